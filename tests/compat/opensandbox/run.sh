#!/usr/bin/env bash
# Runs the OpenSandbox compatibility suite (opensandbox_compat.test.mjs):
# installs the pinned npm `@alibaba-group/opensandbox` from package-lock.json
# when node_modules is missing or stale, starts a real hutchd on port 0 with
# a temp state dir, points the SDK at it with environment variables alone
# (OPEN_SANDBOX_DOMAIN=<addr>/opensandbox, OPEN_SANDBOX_API_KEY=<hutch key>)
# and runs the suite. The server must then exit 0 on SIGTERM (sanitizer
# builds report leaks and UB that way). The egress tests get an outside
# world built for them by hutch-test-world ($HUTCH_TEST_WORLD_BIN).
set -euo pipefail
: "${HUTCHD_BIN:?}" "${HUTCH_TEMPLATES_DIR:?}"
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
# shellcheck disable=SC1091  # lib.sh is checked on its own (scripts/lint)
. "$HERE/../e2b/lib.sh"
# The lockfile pins the SDK; reinstall only when it changed.
ensure_node_modules

T=$(mktemp -d /tmp/hutch-osb-XXXXXX)
HEX=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
SERVER='' WORLD=''
cleanup() {
  # hutchd first: the world holds the network index hutchd's pool uses.
  [[ -n $SERVER ]] && { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; }
  [[ -n $WORLD ]] && { kill "$WORLD" 2>/dev/null || true; wait "$WORLD" 2>/dev/null || true; }
  rm -rf "$T"
}
trap cleanup EXIT

# The egress tests' outside world (tests/support/net_world.h): two HTTP
# servers and a DNS server answering allowed.test / denied.test, in a
# network namespace built for this run. hutchd takes its sandbox pool from
# the world's index and resolves names through the world's DNS, so the
# sandboxes reach nothing but it. Without it (not root, no binary) the
# egress reachability tests are skipped, saying why.
NETARGS=(--net-warm 1)
if [[ -n ${HUTCH_TEST_WORLD_BIN:-} && -x ${HUTCH_TEST_WORLD_BIN} ]]; then
  "$HUTCH_TEST_WORLD_BIN" >"$T/world" 2>>"$T/log" &
  WORLD=$!
  for _ in $(seq 1 300); do [[ -s $T/world ]] && break; kill -0 "$WORLD" 2>/dev/null || break; sleep 0.1; done
  if [[ -s $T/world ]]; then
    HUTCH_WORLD=$(head -n 1 "$T/world")
    export HUTCH_WORLD
    pool=$(node -e 'console.log(JSON.parse(process.argv[1]).net_pool)' "$HUTCH_WORLD")
    dns=$(node -e 'console.log(JSON.parse(process.argv[1]).dns)' "$HUTCH_WORLD")
    world_net=$(node -e 'console.log(JSON.parse(process.argv[1]).world_net)' "$HUTCH_WORLD")
    NETARGS+=(--net-pool "$pool" --dns-upstream "$dns" --net-allow-private "$world_net")
  else
    echo "hutch-test-world did not start (see below); egress reachability tests will be skipped" >&2
    cat "$T/log" >&2
    wait "$WORLD" 2>/dev/null || true
    WORLD=''
  fi
fi

HUTCH_API_KEY="hk_$HEX" "$HUTCHD_BIN" --listen 127.0.0.1:0 --state-dir "$T/state" \
  --templates-dir "$HUTCH_TEMPLATES_DIR" "${NETARGS[@]}" >>"$T/log" 2>&1 &
SERVER=$!
for _ in $(seq 1 600); do [[ -s $T/state/hutchd.addr ]] && break; sleep 0.1; done
[[ -s $T/state/hutchd.addr ]] || { cat "$T/log" >&2; echo "hutchd did not start" >&2; exit 1; }
ADDR=$(cat "$T/state/hutchd.addr")
export OPEN_SANDBOX_DOMAIN="$ADDR/opensandbox" OPEN_SANDBOX_API_KEY="hk_$HEX" HUTCH_OSB_ADDR="$ADDR"
# The SDK's create-latency telemetry goes to POST /v1/metrics/events, which
# hutch answers 204: leave it on so that route is exercised too.
rc=0
node --test --test-concurrency=1 --test-reporter=spec "$HERE/opensandbox_compat.test.mjs" || rc=$?

kill -TERM "$SERVER"
src=0
wait "$SERVER" || src=$?
SERVER=''
if [[ -n $WORLD ]]; then
  kill -TERM "$WORLD" 2>/dev/null || true
  wait "$WORLD" 2>/dev/null || true
  WORLD=''
fi
trap - EXIT
if [[ $rc != 0 || $src != 0 ]]; then
  echo "--- hutchd log (test rc=$rc, server exit $src)" >&2
  tail -n 200 "$T/log" >&2
  rm -rf "$T"
  exit 1
fi
rm -rf "$T"
echo PASS
