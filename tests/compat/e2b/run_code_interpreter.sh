#!/usr/bin/env bash
# Runs the code-interpreter suite (code_interpreter.test.mjs): the npm
# `@e2b/code-interpreter` SDK against a real hutchd. Builds
# templates/code-interpreter.toml (and debian, python before it: debootstrap
# from the host's apt mirror, many minutes) unless the state dir already has
# it. HUTCH_CI_STATE_DIR keeps the state dir (and so the built templates)
# between runs; without it a temp dir is used and removed.
# HUTCHD_EXTRA_ARGS goes to hutchd as more flags, e.g.
# "--net-allow-private 203.0.113.0/24" where the apt mirror has a non-public
# address (build sandboxes may not reach those by default).
set -euo pipefail
: "${HUTCHD_BIN:?}" "${HUTCH_CLI_BIN:?}" "${HUTCH_SOURCE_DIR:?}"
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
{ command -v node && command -v npm; } >/dev/null || { echo "node and npm are required (scripts/setup)" >&2; exit 1; }

if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
  for attempt in 1 2 3; do
    npm ci --no-audit --no-fund --loglevel=error && break
    [[ $attempt == 3 ]] && { echo "npm ci failed" >&2; exit 1; }
    sleep 5
  done
fi

T=$(mktemp -d /tmp/hutch-e2b-ci-XXXXXX)
STATE=${HUTCH_CI_STATE_DIR:-$T/state}
HEX=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
rm -f "$STATE/hutchd.addr"
# HUTCHD_EXTRA_ARGS: whitespace-separated flags (e.g. --net-allow-private CIDR).
read -r -a EXTRA <<<"${HUTCHD_EXTRA_ARGS:-}"
HUTCH_API_KEY="hk_$HEX" "$HUTCHD_BIN" --listen 127.0.0.1:0 --state-dir "$STATE" \
  "${EXTRA[@]}" >>"$T/log" 2>&1 &
SERVER=$!
cleanup() {
  kill "$SERVER" 2>/dev/null || true
  wait "$SERVER" 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT
for _ in $(seq 1 600); do [[ -s $STATE/hutchd.addr ]] && break; sleep 0.1; done
[[ -s $STATE/hutchd.addr ]] || { cat "$T/log" >&2; echo "hutchd did not start" >&2; exit 1; }
ADDR=$(cat "$STATE/hutchd.addr")

export HUTCH_URL="http://$ADDR" HUTCH_API_KEY="hk_$HEX"
if ! "$HUTCH_CLI_BIN" template ls 2>/dev/null | grep -q '^code-interpreter\b'; then
  "$HUTCH_CLI_BIN" template build "$HUTCH_SOURCE_DIR/templates/code-interpreter.toml"
fi

export E2B_API_URL="http://$ADDR/e2b" E2B_SANDBOX_URL="http://$ADDR/e2b" E2B_API_KEY="e2b_$HEX"
rc=0
node --test --test-concurrency=1 --test-reporter=spec "$HERE/code_interpreter.test.mjs" || rc=$?

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
