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
{ command -v node && command -v npm; } >/dev/null || { echo "node and npm are required (scripts/setup)" >&2; exit 1; }

# The lockfile pins both SDK versions; reinstall only when it changed.
if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
  for attempt in 1 2 3; do
    npm ci --no-audit --no-fund --loglevel=error && break
    [[ $attempt == 3 ]] && { echo "npm ci failed" >&2; exit 1; }
    sleep 5
  done
fi

T=$(mktemp -d /tmp/hutch-e2b-XXXXXX)
# A hutch key of the generated form; the SDK gets it as e2b_<hex>.
HEX=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
start_server() {
  rm -f "$T/state/hutchd.addr"
  HUTCH_API_KEY="hk_$HEX" "$HUTCHD_BIN" --listen 127.0.0.1:0 --state-dir "$T/state" \
    --templates-dir "$HUTCH_TEMPLATES_DIR" >>"$T/log" 2>&1 &
  SERVER=$!
  for _ in $(seq 1 600); do [[ -s $T/state/hutchd.addr ]] && break; sleep 0.1; done
  [[ -s $T/state/hutchd.addr ]] || { cat "$T/log" >&2; echo "hutchd did not start" >&2; exit 1; }
  ADDR=$(cat "$T/state/hutchd.addr")
  export E2B_API_URL="http://$ADDR/e2b" E2B_SANDBOX_URL="http://$ADDR/e2b"
}
SERVER=
cleanup() {
  [[ -n $SERVER ]] && kill "$SERVER" 2>/dev/null
  [[ -n $SERVER ]] && wait "$SERVER" 2>/dev/null
  rm -rf "$T"
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

kill -TERM "$SERVER"
src=0
wait "$SERVER" || src=$?
trap - EXIT
if [[ $rc != 0 || $src != 0 ]]; then
  echo "--- hutchd log (test rc=$rc, server exit $src)" >&2
  tail -n 200 "$T/log" >&2
  rm -rf "$T"
  exit 1
fi
rm -rf "$T"
echo PASS
