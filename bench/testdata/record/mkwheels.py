#!/usr/bin/env python3
"""Builds a few pure-Python wheels and a PEP 503 simple index for them.

    mkwheels.py OUTDIR

Each wheel carries incompressible padding so that pip shows a download
progress bar (pip draws one above 40 kB). Nothing is fetched from the
network.
"""
import base64
import hashlib
import os
import random
import sys
import zipfile

out = sys.argv[1]
rng = random.Random(7)

# name, version, dependencies, padding bytes
PACKAGES = [
    ("conch-demo-app", "2.4.1", ["conch-demo-http>=1.0", "conch-demo-models", "conch-demo-cli"], 300_000),
    ("conch-demo-http", "1.8.0", ["conch-demo-utils"], 2_600_000),
    ("conch-demo-models", "0.9.3", ["conch-demo-utils", "conch-demo-numeric"], 1_200_000),
    ("conch-demo-numeric", "3.1.0", [], 9_500_000),
    ("conch-demo-cli", "5.0.2", [], 60_000),
    ("conch-demo-utils", "1.2.0", [], 20_000),
]


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def wheel(name, version, deps, pad):
    mod = name.replace("-", "_")
    dist = f"{mod}-{version}"
    path = os.path.join(out, "files", f"{dist}-py3-none-any.whl")
    files = {
        f"{mod}/__init__.py": f'__version__ = "{version}"\n'.encode(),
        f"{mod}/_blob.bin": rng.randbytes(pad),
        f"{dist}.dist-info/METADATA": (
            "Metadata-Version: 2.1\n"
            f"Name: {name}\nVersion: {version}\nSummary: demo package for conch benchmarks\n"
            + "".join(f"Requires-Dist: {d}\n" for d in deps)
        ).encode(),
        f"{dist}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: mkwheels\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [record_line(k, v) for k, v in files.items()] + [f"{dist}.dist-info/RECORD,,"]
    files[f"{dist}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for k, v in files.items():
            z.writestr(k, v)
    return path


os.makedirs(os.path.join(out, "files"), exist_ok=True)
links = []
for name, version, deps, pad in PACKAGES:
    p = wheel(name, version, deps, pad)
    sha = hashlib.sha256(open(p, "rb").read()).hexdigest()
    d = os.path.join(out, "simple", name)
    os.makedirs(d, exist_ok=True)
    fn = os.path.basename(p)
    with open(os.path.join(d, "index.html"), "w") as f:
        f.write(f'<!DOCTYPE html><html><body><a href="/files/{fn}#sha256={sha}">{fn}</a></body></html>\n')
    links.append(f'<a href="/simple/{name}/">{name}</a>')
with open(os.path.join(out, "simple", "index.html"), "w") as f:
    f.write("<!DOCTYPE html><html><body>" + "".join(links) + "</body></html>\n")
