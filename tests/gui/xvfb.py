#!/usr/bin/python3
"""xvfb.py -s "XVFB ARGS" CMD...: CMD with DISPLAY on a fresh Xvfb, its exit status CMD's.

xvfb-run -a takes the first display number without a /tmp/.X<n>-lock file, and two window
tests that start at once (ctest runs a job per core) can both take it: the second Xvfb
then fails to start. Here the server picks the number itself (-displayfd) and says which.
"""
import os
import shlex
import subprocess
import sys


def main():
    args = sys.argv[1:]
    server_args = []
    if len(args) >= 2 and args[0] == "-s":
        server_args, args = shlex.split(args[1]), args[2:]
    if not args:
        print("usage: xvfb.py [-s \"XVFB ARGS\"] CMD...", file=sys.stderr)
        return 2
    rfd, wfd = os.pipe()
    try:
        xvfb = subprocess.Popen(["Xvfb", "-displayfd", str(wfd), "-nolisten", "tcp",
                                 *server_args], pass_fds=(wfd,), stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        print("xvfb.py: no Xvfb (Debian's xvfb package; scripts/install-deps.sh installs it)",
              file=sys.stderr)
        return 77  # a skip (the window tests' SKIP_RETURN_CODE; in CI a failure)
    finally:
        os.close(wfd)
    with os.fdopen(rfd) as f:
        number = f.readline().strip()  # written once the server accepts connections
    if not number.isdigit():
        xvfb.wait()
        print(f"xvfb.py: Xvfb did not start (exit {xvfb.returncode})", file=sys.stderr)
        return 1
    env = dict(os.environ, DISPLAY=f":{number}")
    env.pop("WAYLAND_DISPLAY", None)
    try:
        return subprocess.call(args, env=env)
    finally:
        xvfb.terminate()
        xvfb.wait()


if __name__ == "__main__":
    sys.exit(main())
