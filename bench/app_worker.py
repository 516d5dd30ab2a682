#!/usr/bin/python3
"""The window on the large-input path (issue 17), under Xvfb: how long it freezes, how long
Esc takes. Compare two builds (e.g. one from before issue 17) with the same command:

  xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 bench/app_worker.py build/vitlens

On the built-in model at 512 px (T = 4097: 1 GiB of attention, so it is recomputed from
queries and keys): rollout on, then T (the layers x heads table: every fusion of every layer
recomputed) while G is pressed every 0.15 s, each G timed to the frame that shows the toggled
grid, until the table is on screen; then Esc while another table computes (discard 0.1), and,
at 640 px, Esc during the forward pass N starts, each timed to the process's exit. Prints one
line per measurement. The checks of these behaviours are tests/gui/test_worker.py's
(gui_worker); this reuses its trace reader.
"""
import os
import statistics
import sys
import time

ROOT = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "gui"))
from test_worker import Traced, start  # noqa: E402


def main():
    app_path = sys.argv[1]
    env = dict(os.environ, VITLENS_TRACE="1")
    env.pop("VITLENS_ATT", None)
    app = Traced([app_path, "--size", "512"], env)
    start(app)
    app.keys("r")
    app.idle("rollout", kind="rollout")
    app.keys("t")
    t0 = time.monotonic()
    times, busy = [], 0
    while True:
        dt, st = app.ping()
        times.append(dt)
        busy += st.get("busy") == "1"
        if st.get("busy") == "0" and st.get("overview") == "2":
            break
        time.sleep(0.15)
    print(f"G during the table: {len(times)} pings, first {times[0] * 1000:.0f} ms, median "
          f"{statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms, "
          f"{busy} answered while busy; the table on screen after {time.monotonic() - t0:.2f} s")
    app.keys("bracketright")
    app.idle("discard 0.1", discard="0.10")
    app.keys("t")
    time.sleep(0.3)
    dt, rc = app.quit_timed("during the table")
    print(f"Esc during the table: exit after {dt * 1000:.0f} ms (status {rc})")
    app = Traced([app_path, "--size", "640"], env)
    start(app)
    app.keys("n")
    time.sleep(0.3)
    dt, rc = app.quit_timed("during a forward pass")
    print(f"Esc during a forward pass: exit after {dt * 1000:.0f} ms (status {rc})")


if __name__ == "__main__":
    main()
