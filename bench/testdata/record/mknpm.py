#!/usr/bin/env python3
"""Builds a tiny npm registry on disk: package tarballs (made with
`npm pack`, offline) and packuments pointing at http://127.0.0.1:PORT/.

    mknpm.py OUTDIR PORT

Then `slowserve.py OUTDIR` serves it; `npm install --registry
http://127.0.0.1:PORT/` installs from it without the internet.
"""
import base64
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile

out, port = sys.argv[1], int(sys.argv[2])
reg = f"http://127.0.0.1:{port}/"
rng = random.Random(11)

# name, version, dependencies, padding bytes, deprecation message
PACKAGES = [
    ("conch-demo-server", "4.2.0", {"conch-demo-router": "^2.0.0", "conch-demo-logger": "^1.3.0", "conch-demo-config": "^3.0.0"}, 400_000, None),
    ("conch-demo-router", "2.7.1", {"conch-demo-path": "^0.6.0", "conch-demo-logger": "^1.3.0"}, 900_000, None),
    ("conch-demo-logger", "1.3.4", {"conch-demo-colors": "^1.4.0"}, 150_000, None),
    ("conch-demo-config", "3.0.2", {"conch-demo-yaml": "^2.2.0"}, 250_000, None),
    ("conch-demo-yaml", "2.2.5", {}, 1_800_000, None),
    ("conch-demo-path", "0.6.3", {}, 30_000, "conch-demo-path@0.6 is no longer maintained; upgrade to conch-demo-path@1"),
    ("conch-demo-colors", "1.4.0", {}, 60_000, "Please upgrade to conch-demo-colors@2, which fixes a ReDoS in strip()"),
    ("conch-demo-bundler", "7.0.0", {"conch-demo-yaml": "^2.2.0", "conch-demo-colors": "^1.4.0"}, 3_500_000, None),
]

os.makedirs(os.path.join(out, "tarballs"), exist_ok=True)
for name, version, deps, pad, deprecated in PACKAGES:
    with tempfile.TemporaryDirectory() as src:
        with open(os.path.join(src, "package.json"), "w") as f:
            json.dump({"name": name, "version": version, "main": "index.js", "license": "MIT", "dependencies": deps}, f)
        with open(os.path.join(src, "index.js"), "w") as f:
            f.write(f"module.exports = {{ name: {json.dumps(name)} }};\n")
        with open(os.path.join(src, "blob.bin"), "wb") as f:
            f.write(rng.randbytes(pad))
        tgz = subprocess.run(["npm", "pack", "--silent", "--pack-destination", os.path.join(out, "tarballs")],
                             cwd=src, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    data = open(os.path.join(out, "tarballs", tgz), "rb").read()
    dist = {
        "tarball": f"{reg}tarballs/{tgz}",
        "shasum": hashlib.sha1(data).hexdigest(),
        "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(),
    }
    v = {"name": name, "version": version, "dependencies": deps, "dist": dist}
    if deprecated:
        v["deprecated"] = deprecated
    with open(os.path.join(out, name), "w") as f:
        json.dump({"name": name, "dist-tags": {"latest": version}, "versions": {version: v}}, f)
