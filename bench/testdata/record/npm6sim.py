#!/usr/bin/env python3
"""Writes what `npm install` of npm 6 (npmlog + gauge) prints on a colour
terminal: the 20-column progress bar with its spinner redrawn in place
(gauge: ESC[?25l, ESC[7m…ESC[27m bar, ESC[90m remaining, ESC[0m ESC[K CR),
log lines that first erase the bar (CR ESC[K), a postinstall banner and
the closing summary. The escape sequences follow console-control-strings
and gauge's colorASCII theme; the timing (one frame per 50 ms tick over
about 40 s) is simulated, not slept.

    npm6sim.py > npm6-install.raw
"""
import random
import sys

rng = random.Random(6)
out = sys.stdout
ESC = "\x1b["
WIDTH = 100


def color(*codes):
    return ESC + ";".join(str(c) for c in codes) + "m"


RESET, INVERSE, STOP_INVERSE, GREY, MAGENTA = color(0), color(7), color(27), color(90), color(35)
SPIN = "-\\|/"
LEVEL = {"sill": color(7), "http": color(32, 40), "timing": color(32, 40), "verb": color(34, 40)}


def bar(done):
    n = round(20 * done)
    return "[" + INVERSE + " " * n + STOP_INVERSE + GREY + "." * (20 - n) + RESET + "]"


def frame(done, tick, section, level, prefix, msg):
    # gauge's show(): template rendered and trimmed, then reset, erase to
    # the end of the line, back to the start of the line.
    visible = f"{section}: {level} {prefix} {msg}"
    room = WIDTH - 25
    if len(visible) > room:
        msg = msg[: max(0, len(msg) - (len(visible) - room))]
    line = (bar(done) + " " + SPIN[tick % 4] + " " + section + ":" + " "
            + LEVEL[level] + level + RESET + " " + MAGENTA + prefix + RESET + " " + msg)
    return line.rstrip() + RESET + ESC + "K" + "\r"


def hide():
    return "\r" + ESC + "K"


def npmlog(level, prefix, msg):
    styles = {"WARN": color(30, 43), "ERR!": color(31, 40), "notice": color(34, 40)}
    return (color(37, 40) + "npm" + RESET + " " + styles[level] + level + RESET + " "
            + MAGENTA + prefix + RESET + " " + msg + "\n")


PKGS = ["@babel/core@7.9.0", "@babel/runtime@7.9.2", "react@16.13.1", "react-dom@16.13.1",
        "react-scripts@3.4.1", "webpack@4.42.0", "webpack-dev-server@3.10.3", "jest@24.9.0",
        "eslint@6.8.0", "postcss@7.0.27", "terser@4.6.10", "core-js@3.6.5", "lodash@4.17.15",
        "chokidar@2.1.8", "fsevents@1.2.12", "node-sass@4.14.1", "typescript@3.8.3",
        "@types/node@13.11.0", "babel-loader@8.1.0", "sass-loader@8.0.2", "workbox-webpack-plugin@4.3.1",
        "request@2.88.2", "har-validator@5.1.3", "uuid@3.4.0", "mkdirp@0.5.1", "chalk@2.4.2",
        "rxjs@6.5.5", "tslib@1.11.1", "immer@1.10.0", "browserslist@4.11.1", "caniuse-lite@1.0.30001039"]
WARNINGS = {
    180: ("deprecated", "request@2.88.2: request has been deprecated, see https://github.com/request/request/issues/3142"),
    260: ("deprecated", "har-validator@5.1.3: this library is no longer supported"),
    330: ("deprecated", "chokidar@2.1.8: Chokidar 2 will break on node v14+. Upgrade to chokidar 3 with 15x less dependencies."),
    390: ("deprecated", "fsevents@1.2.12: fsevents 1 will break on node v14+ and could be using insecure binaries. Upgrade to fsevents 2."),
    420: ("deprecated", "mkdirp@0.5.1: Legacy versions of mkdirp are no longer supported. Please update to mkdirp 1.x."),
    455: ("deprecated", "core-js@2.6.11: core-js@<3 is no longer maintained and not recommended for usage due to the number of issues."),
    500: ("deprecated", "uuid@3.4.0: Please upgrade  to version 7 or higher.  Older versions may use Math.random() in certain circumstances."),
}
PHASES = [  # section, level, prefix, message template, frames, progress from, to
    ("fetchMetadata", "sill", "resolveWithNewModule", "{p} checking installable status", 300, 0.00, 0.25),
    ("fetchMetadata", "http", "fetch", "GET 200 https://registry.npmjs.org/{n} 41ms (from cache)", 220, 0.25, 0.40),
    ("extract", "sill", "extract", "{p} extracted to /home/dev/app/node_modules/.staging/{n}-{h}", 160, 0.40, 0.70),
    ("finalize", "sill", "finalize", "/home/dev/app/node_modules/{n}", 60, 0.70, 0.80),
    ("refresh-package-json", "timing", "action:refresh-package-json", "Completed in {ms}ms", 30, 0.80, 0.85),
    ("build", "sill", "build", "{n}", 50, 0.85, 0.95),
    ("lifecycle", "sill", "lifecycle", "{n}@{v}~install: no script for install, continuing", 40, 0.95, 0.99),
]

out.write(ESC + "?25l")
tick = 0
for section, level, prefix, tmpl, frames, a, b in PHASES:
    for i in range(frames):
        p = rng.choice(PKGS)
        n, v = p.rsplit("@", 1)
        msg = tmpl.format(p=p, n=n, v=v, h=f"{rng.getrandbits(32):08x}", ms=rng.randint(3, 900))
        done = a + (b - a) * i / frames
        if tick in WARNINGS:
            out.write(hide())
            out.write(npmlog("WARN", *WARNINGS[tick]))
        out.write(frame(done, tick, section, level, prefix, msg))
        tick += 1
out.write(hide())
out.write(ESC + "?25h")
out.write("\n> core-js@3.6.5 postinstall /home/dev/app/node_modules/babel-runtime/node_modules/core-js\n"
          "> node -e \"try{require('./postinstall')}catch(e){}\"\n\n")
out.write(color(96) + "Thank you for using core-js (" + color(94) + " https://github.com/zloirock/core-js "
          + color(96) + ") for polyfilling JavaScript standard library!" + color(0) + "\n\n")
out.write(color(96) + "The project needs your help! Please consider supporting of core-js on Open Collective or Patreon: "
          + color(0) + "\n" + color(96) + ">" + color(94) + " https://opencollective.com/core-js " + color(0) + "\n"
          + color(96) + ">" + color(94) + " https://www.patreon.com/zloirock " + color(0) + "\n\n")
out.write("\n> node-sass@4.14.1 install /home/dev/app/node_modules/node-sass\n> node scripts/install.js\n\n")
out.write("Cached binary found at /home/dev/.npm/node-sass/4.14.1/linux-x64-72_binding.node\n")
out.write("\n> node-sass@4.14.1 postinstall /home/dev/app/node_modules/node-sass\n> node scripts/build.js\n\n")
out.write("Binary found at /home/dev/app/node_modules/node-sass/vendor/linux-x64-72/binding.node\n"
          "Testing binary\nBinary is fine\n")
out.write(npmlog("WARN", "optional", "SKIPPING OPTIONAL DEPENDENCY: fsevents@2.1.2 (node_modules/jest-haste-map/node_modules/fsevents):"))
out.write(npmlog("WARN", "notsup", 'SKIPPING OPTIONAL DEPENDENCY: Unsupported platform for fsevents@2.1.2: wanted {"os":"darwin","arch":"any"} (current: {"os":"linux","arch":"x64"})'))
out.write(npmlog("WARN", "tsutils@3.17.1", "requires a peer of typescript@>=2.8.0 || >= 3.2.0-dev but none is installed. You must install peer dependencies yourself."))
out.write("\nadded 1687 packages from 800 contributors and audited 1692 packages in 41.532s\n\n")
out.write("118 packages are looking for funding\n  run `npm fund` for details\n\n")
out.write("found " + color(1) + "4" + color(22) + " vulnerabilities (2 " + color(1) + "moderate" + color(22) + ", 2 "
          + color(1) + color(91) + "high" + color(39) + color(22) + ")\n  run `npm audit fix` to fix them, or `npm audit` for details\n")
