#!/usr/bin/env python3
"""Static file server on 127.0.0.1 that sends files slowly, so that
package managers draw several frames of their progress bars.

    slowserve.py ROOT PORTFILE [BYTES_PER_SECOND]

Serves ROOT; a path without an extension that is a file is served as
JSON (npm packuments). Writes the chosen port to PORTFILE. Loopback only.
"""
import http.server
import os
import sys
import time

root, portfile = sys.argv[1], sys.argv[2]
rate = int(sys.argv[3]) if len(sys.argv) > 3 else 4_000_000


class Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *a, **kw):
        super().__init__(*a, directory=root, **kw)

    def guess_type(self, path):
        if os.path.isfile(path) and "." not in os.path.basename(path):
            return "application/json"
        return super().guess_type(path)

    def copyfile(self, src, dst):
        chunk = max(rate // 20, 1024)
        while True:
            b = src.read(chunk)
            if not b:
                return
            dst.write(b)
            dst.flush()
            if len(b) == chunk:
                time.sleep(chunk / rate)

    def log_message(self, fmt, *args):
        sys.stderr.write("slowserve: " + (fmt % args) + "\n")


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
