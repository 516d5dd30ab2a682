"""hub_server.py - a stand-in for the Hugging Face hub for test_download.sh: serves DIR as
http.server does (the same access log on stderr), and for a gated repository (a path under
one of GATED) answers 401 unless the request carries "Authorization: Bearer $HUB_TOKEN", as
the hub does for a gated model without an accepted licence. Every request's path and the
Authorization header it carried ("-" for none) go to AUTH_LOG, one line each.

    /usr/bin/python3 hub_server.py PORT DIR AUTH_LOG [GATED ...]
"""
import functools
import http.server
import os
import sys

port, root, auth_log, gated = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]


class Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        auth = self.headers.get("Authorization")
        with open(auth_log, "a") as f:
            f.write(f"{self.path} {auth or '-'}\n")
        if any(self.path.startswith(f"/{g}/") for g in gated) and \
                auth != f"Bearer {os.environ.get('HUB_TOKEN', '')}":
            self.send_error(401, "gated repository: a token with the licence accepted needed")
            return
        super().do_GET()


http.server.ThreadingHTTPServer(("127.0.0.1", port),
                                functools.partial(Handler, directory=root)).serve_forever()
