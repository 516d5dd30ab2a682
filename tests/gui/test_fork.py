#!/usr/bin/python3
"""No fork while a thread of the app's own runs (a launch that never ended, CI of stop 42).

SDL's first init connects to the D-Bus session bus; with no DBUS_SESSION_BUS_ADDRESS,
libdbus autolaunches one: it forks, and its child calls opendir and malloc before exec.
A fork while another thread holds an allocator lock leaves the child waiting on that lock
for ever, and the app waiting on the child: ASan's allocator, which has no fork handlers,
hung about one launch in ten under load while fontconfig's lookup thread (text.c) ran.

Under `strace -f`, with DBUS_SESSION_BUS_ADDRESS unset (the autolaunch's fork), the app
must have started no thread before its first fork beyond those the libraries start before
main (counted on `--version`, which starts none of the app's). Deterministic: the order of
calls, not a race's outcome. The negative control is the order before this fix (the
lookup thread, then SDL_Init), which this test fails.

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
from pathlib import Path

TIMEOUT_S = float(os.environ.get("VITLENS_TEST_TIMEOUT", "120"))


def traced(argv, log, env, until=None):
    """argv under strace -f (clone, clone3, fork, vfork into log); until: a stdout line
    after which the app is ended (SIGTERM to it). Returns the log's lines."""
    cmd = ["strace", "-f", "-qq", "-e", "trace=clone,clone3,fork,vfork", "-o", str(log)]
    p = subprocess.Popen(cmd + argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env=env, text=True)
    try:
        if until:
            for line in p.stdout:
                if line.rstrip("\n") == until:
                    break
            kids = Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()
            for kid in kids:  # the app (strace's child): SDL makes SIGTERM a quit
                os.kill(int(kid), signal.SIGTERM)
            p.stdout.read()
        p.wait(timeout=TIMEOUT_S)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return log.read_text().splitlines()


def calls(lines, pid):
    """The calls the first process (pid) made, in order: 'thread' or 'fork' each (a call's
    first line: "PID clone3({flags=...}" whole or "<unfinished ...>")."""
    out = []
    for ln in lines:
        m = re.match(r"(\d+)\s+(clone3?|v?fork)\((.*)", ln)
        if m and int(m.group(1)) == pid:
            out.append("thread" if "CLONE_THREAD" in m.group(3) else "fork")
    return out


def first_pid(lines):
    return int(lines[0].split()[0]) if lines else -1


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
    demo = Path(__file__).resolve().parents[2] / "assets" / "default" / "demo"
    photo = sorted(str(p) for p in demo.glob("*.png"))[0]
    try:
        base = traced([a.app, "--version"], out / "version.strace", env)
        before_main = calls(base, first_pid(base)).count("thread")
        lines = traced([a.app, photo], out / "launch.strace", env, until=f"ready {photo}")
    finally:
        shutil.rmtree(xdg, ignore_errors=True)
    seq = calls(lines, first_pid(lines))
    if "fork" not in seq:
        print(f"SKIP: the launch forked nothing ({len(seq)} threads; no D-Bus autolaunch "
              "here), so there is no order to check")
        return 77
    threads = seq.index("fork")
    ok = threads <= before_main
    print(f"{'ok  ' if ok else 'FAIL'} threads started before the first fork: {threads} "
          f"(the libraries' before main: {before_main}; calls {' '.join(seq[:8])} ...)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
