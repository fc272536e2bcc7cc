#!/bin/sh
# Vendors the terminal widget of the control UI from npm into
# static/vendor/xterm. Run from this directory with network access to the
# npm registry; commit the result. The files are the packages' shipped
# builds, unmodified except that the trailing sourceMappingURL comment is
# dropped (the source maps are not shipped, and a browser with DevTools
# open would otherwise request them).
set -eu
XTERM=6.0.0
FIT=0.11.0
out=static/vendor/xterm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "@xterm/xterm@$XTERM" "@xterm/addon-fit@$FIT" >/dev/null)
mkdir -p "$tmp/x" "$tmp/f" "$out"
tar xzf "$tmp/xterm-xterm-$XTERM.tgz" -C "$tmp/x"
tar xzf "$tmp/xterm-addon-fit-$FIT.tgz" -C "$tmp/f"
sed '/^\/\/# sourceMappingURL=/d' "$tmp/x/package/lib/xterm.js" >"$out/xterm.js"
sed '/^\/\/# sourceMappingURL=/d' "$tmp/f/package/lib/addon-fit.js" >"$out/addon-fit.js"
cp "$tmp/x/package/css/xterm.css" "$out/xterm.css"
cp "$tmp/x/package/LICENSE" "$out/LICENSE"
cp "$tmp/f/package/LICENSE" "$out/LICENSE.addon-fit"
{
	echo "@xterm/xterm $XTERM (lib/xterm.js, css/xterm.css, LICENSE)"
	echo "@xterm/addon-fit $FIT (lib/addon-fit.js, LICENSE as LICENSE.addon-fit)"
	echo "vendored by internal/adapter/ui/vendor.sh; sha256 of the vendored files:"
	(cd "$out" && sha256sum xterm.js addon-fit.js xterm.css LICENSE LICENSE.addon-fit)
} >"$out/VERSION"
