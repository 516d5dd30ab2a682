#!/usr/bin/python3
"""No fork while a thread of the app's own runs (a launch that never ended, CI of stop 42).

SDL's first init connects to the D-Bus session bus; with no DBUS_SESSION_BUS_ADDRESS,
libdbus autolaunches one: it forks, and its child calls opendir and malloc before exec.
A fork while another thread holds an allocator lock leaves the child waiting on that lock
for ever, and the app waiting on the child: ASan's allocator, which has no fork handlers,
hung about one launch in ten under load while fontconfig's lookup thread (text.c) ran.

Under `strace -f` (forks, thread starts and ends, thread names), with
DBUS_SESSION_BUS_ADDRESS unset (the autolaunch's fork): at every fork of a launch, and of
a start-up error's message box (SDL shows it from a forked child; a shader that does not
compile), none of the app's own threads may be running: those named "vitlens-..." (the
fonts' lookup, the workers). The engine's pool threads ("vitlens-pool") run only inside
their caller's vit_pool_run, and that caller is a worker (counted) or the thread that
forks: between tasks they wait on a condition variable, holding nothing. Mesa's and the
libraries' threads are not the app's to stop. Deterministic: the order of calls, not a
race's outcome. The negative controls: the launch's order before the fix (the lookup
thread, then SDL_Init) and the box shown while the worker runs, both failed here.

  xvfb.py -s "-screen 0 1280x1024x24" /usr/bin/python3 test_fork.py --app build/vitlens \\
      --out build/tests/gui/fork
Exits 0, 1 on a failed check, 77 (skip) without strace or when nothing forks (an SDL
without D-Bus, say).
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_gui import TIMEOUT_S, broken_shaders, windows_titled  # noqa: E402


def traced(argv, log, env, until):
    """argv under strace -f (clone, clone3, fork, vfork and the processes' ends into log).
    until: None (the app ends by itself), or polled with the stdout lines read so far until
    True; then the app and what it forked are killed. Returns the log's lines."""
    cmd = ["strace", "-f", "-q", "-e", "trace=clone,clone3,fork,vfork,prctl", "-o", str(log)]
    p = subprocess.Popen(cmd + argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env=env, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(ln.rstrip("\n") for ln in p.stdout),
                              daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while until and not until(lines):
            if p.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"FAIL {argv[1:]}: the app ended or timed out first "
                                 f"(exit {p.returncode}; last lines {lines[-3:]})")
            time.sleep(0.05)  # polling a condition, not a fixed wait
        if until:
            kill_tree(p.pid, top=False)
        p.wait(timeout=TIMEOUT_S)
    finally:
        if p.poll() is None:
            kill_tree(p.pid)
            p.wait()
    return log.read_text().splitlines()


def box_shown(_lines):
    """SDL's message box on the display (test_gui.py's windows_titled)."""
    return bool(windows_titled("vitlens: cannot start"))


def kill_tree(pid, top=True):
    """SIGKILL pid's descendants (and pid when top): the app and a message box's child."""
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        kids = []
    for kid in kids:
        kill_tree(int(kid))
    if top:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def forks(lines):
    """Each fork the app made (a clone without CLONE_THREAD): the names of the app's own
    threads running then. The app's own: those that named themselves "vitlens-..." (SDL
    names its threads so, pool.c its pool's), counted from their clone's return to their
    "+++ exited" line, whether the name came before the fork or after."""
    ours = {int(m.group(1)) for m in (re.match(r'(\d+)\s+prctl\(PR_SET_NAME, "(vitlens-[^"]*)"',
                                                ln) for ln in lines) if m}
    names = {int(m.group(1)): m.group(2) for m in (re.match(
        r'(\d+)\s+prctl\(PR_SET_NAME, "([^"]*)"', ln) for ln in lines) if m}
    running, pending, out = set(), {}, []
    for ln in lines:
        m = re.match(r"(\d+)\s+(.*)", ln)
        if not m:
            continue
        pid, rest = int(m.group(1)), m.group(2)
        call = re.match(r"(clone3?|v?fork)\((.*)", rest)
        if call:
            is_thread = "CLONE_THREAD" in call.group(2)
            if not is_thread:
                out.append(sorted(names.get(t, str(t)) for t in running))
            if "<unfinished" in rest:
                pending[pid] = is_thread
                continue
        elif re.match(r"<\.\.\. (clone3?|v?fork) resumed>", rest):
            is_thread = pending.pop(pid, False)
        elif rest.startswith("+++"):
            running.discard(pid)
            continue
        else:
            continue
        r = re.search(r"= (\d+)\s*$", rest)
        if is_thread and r and int(r.group(1)) in ours:
            running.add(int(r.group(1)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if not shutil.which("strace"):
        print("SKIP: no strace (Debian: strace; scripts/install-deps.sh installs it)")
        return 77
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    xdg = tempfile.mkdtemp(prefix="vitlens-xdg-")
    env = dict(os.environ, VITLENS_TRACE="1", XDG_CONFIG_HOME=os.path.join(xdg, "config"),
               XDG_DATA_HOME=os.path.join(xdg, "data"))
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)  # the autolaunch: libdbus's fork
    env.pop("VITLENS_FONT", None)  # fontconfig's lookup thread
    root = Path(__file__).resolve().parents[2]
    photo = sorted(str(p) for p in (root / "assets" / "default" / "demo").glob("*.png"))[0]
    shaders = broken_shaders(str(out))  # SDL's message box, from a forked child
    try:
        launch = traced([a.app, photo], out / "launch.strace", env,
                        lambda lines: f"ready {photo}" in lines)
        box = traced([a.app, photo], out / "box.strace",
                     dict(env, VITLENS_SHADER_DIR=shaders), box_shown)
    finally:
        shutil.rmtree(xdg, ignore_errors=True)
    ok = True
    for what, lines in (("the launch", launch), ("a start-up error's message box", box)):
        seen = forks(lines)
        if not seen:
            print(f"SKIP: {what} forked nothing (no D-Bus autolaunch here?): no order to "
                  "check")
            return 77
        good = not any(t != "vitlens-pool" for names in seen for t in names)
        ok &= good
        print(f"{'ok  ' if good else 'FAIL'} {what}: the app's own threads running at "
              f"each of its {len(seen)} forks: {seen}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
