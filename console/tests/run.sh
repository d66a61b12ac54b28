#!/usr/bin/env bash
# The web console in a real browser (issue 28; docs/console.md): Debian's
# chromium, headless, driven by npm playwright-core (pinned in
# ../package-lock.json; it never downloads a browser of its own), against a
# real hutchd on port 0 with a temp state dir that serves the console's
# build (HUTCH_UI_DIR, what CMake's hutch-console target wrote). The
# server runs without a rate limit or commitment cap and with room for the
# 500-sandbox measurement. Screenshots of each page go to
# HUTCH_SCREENSHOT_DIR. Exits 77 (skipped) when chromium is missing.
set -euo pipefail
: "${HUTCHD_BIN:?}" "${HUTCH_UI_DIR:?}" "${HUTCH_TEMPLATES_DIR:?}"
export HUTCH_CHROMIUM=${HUTCH_CHROMIUM:-/usr/bin/chromium}
if [[ ! -x $HUTCH_CHROMIUM ]]; then
  echo "SKIP: no $HUTCH_CHROMIUM (scripts/setup installs Debian's chromium)"
  exit 77
fi
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE/.."
# shellcheck disable=SC1091  # lib.sh is checked on its own (scripts/lint)
. "$HERE/../../tests/compat/e2b/lib.sh"
ensure_node_modules
[[ -s $HUTCH_UI_DIR/index.html ]] || { echo "no console build in $HUTCH_UI_DIR (cmake --build: target hutch-console)" >&2; exit 1; }

T=$(mktemp -d /tmp/hutch-console-XXXXXX)
trap cleanup EXIT
HEX=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
start_hutchd "$T/state" "$T/log" "hk_$HEX" --ui-dir "$HUTCH_UI_DIR" --templates-dir "$HUTCH_TEMPLATES_DIR" \
  --max-sandboxes 600 --rate-limit 0 --warm-pool none
export HUTCH_URL="http://$ADDR" HUTCH_API_KEY="hk_$HEX"
export HUTCH_SCREENSHOT_DIR=${HUTCH_SCREENSHOT_DIR:-$T/screenshots}
mkdir -p "$HUTCH_SCREENSHOT_DIR"
rc=0
node --test --test-concurrency=1 --test-reporter=spec "$HERE/console.test.mjs" || rc=$?
echo "screenshots: $HUTCH_SCREENSHOT_DIR"
finish_hutchd "$rc" "$T"
