#!/usr/bin/env bash
# Runs the E2B compatibility suite (e2b_compat.test.mjs): installs the pinned
# npm `e2b` versions from package-lock.json when node_modules is missing or
# stale, starts a real hutchd on port 0 with a temp state dir, points the SDK
# at it with environment variables alone, and runs the suite once per SDK
# version. The server must then exit 0 on SIGTERM (sanitizer builds report
# leaks and UB that way).
set -euo pipefail
: "${HUTCHD_BIN:?}" "${HUTCH_TEMPLATES_DIR:?}"
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
# shellcheck disable=SC1091  # lib.sh is checked on its own (scripts/lint)
. "$HERE/lib.sh"
# The lockfile pins both SDK versions; reinstall only when it changed.
ensure_node_modules

T=$(mktemp -d /tmp/hutch-e2b-XXXXXX)
# A hutch key of the generated form; the SDK gets it as e2b_<hex>.
HEX=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
start_server() {
  start_hutchd "$T/state" "$T/log" "hk_$HEX" --templates-dir "$HUTCH_TEMPLATES_DIR"
  export E2B_API_URL="http://$ADDR/e2b" E2B_SANDBOX_URL="http://$ADDR/e2b"
}
trap cleanup EXIT
start_server
export E2B_API_KEY="e2b_$HEX" HUTCH_E2B_RAW_KEY="hk_$HEX"
rc=0
node --test --test-concurrency=1 --test-reporter=spec "$HERE/e2b_compat.test.mjs" || rc=$?

# A crash of hutchd (SIGKILL: no shutdown) and a restart on the same state
# dir: the sandbox is adopted, and the SDK carries on with it.
if [[ $rc == 0 ]]; then
  node "$HERE/restart_phase.mjs" before "$T/restart.json" || rc=$?
fi
if [[ $rc == 0 ]]; then
  kill -KILL "$SERVER"
  wait "$SERVER" 2>/dev/null || true
  start_server
  node "$HERE/restart_phase.mjs" after "$T/restart.json" || rc=$?
fi

finish_hutchd "$rc" "$T"
