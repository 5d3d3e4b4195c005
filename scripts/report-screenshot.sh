#!/usr/bin/env bash
# A picture of an HTML report as a browser shows it: headless Chromium
# (Debian's package, installed here if missing) takes a screenshot of the
# page at 1280x2000.
#   scripts/report-screenshot.sh REPORT.html OUT.png [WIDTHxHEIGHT]
# The figure in BENCHMARKS.md ("Issue 15") was made with:
#   wb sim scenarios/axboe-2016.toml --compare wbt_lat_usec=0,-1 --html /tmp/axboe.html
#   scripts/report-screenshot.sh /tmp/axboe.html docs/axboe-2016-wbt-report.png
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 REPORT.html OUT.png [WIDTHxHEIGHT]" >&2; exit 2; }
page=$(realpath "$1")
out=$(realpath -m "$2")
size=${3:-1280x2000}
[ -f "$page" ] || { echo "$0: no such report: $1" >&2; exit 2; }
command -v chromium >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
# --no-sandbox: root in a container has no user namespaces for the sandbox;
# the page is our own file with no scripts.
chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
  --window-size="${size/x/,}" --screenshot="$out" "file://$page" 2>/dev/null
[ -s "$out" ] || { echo "$0: chromium wrote no screenshot" >&2; exit 1; }
echo "$out"
