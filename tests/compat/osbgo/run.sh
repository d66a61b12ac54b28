#!/usr/bin/env bash
# Runs the OpenSandbox Go SDK suite (tests/compat/osbgo, `go test`): the
# SDK github.com/alibaba/OpenSandbox/sdks/sandbox/go at the version
# go.mod/go.sum pin, unmodified, through its README's Credential Vault flow
# (vault_test.go) against a real hutchd started on port 0 with a temp state
# dir. The outside world is hutch-test-world ($HUTCH_TEST_WORLD_BIN) plus
# the HTTPS server tests/support/world_https.py run in the world's network
# namespace, with a CA and certificate made here for api.vault.test and
# other.vault.test; hutchd verifies the world's upstreams against that CA
# (--vault-upstream-ca). The server must then exit 0 on SIGTERM (sanitizer
# builds report leaks and UB that way). Exits 77 (CTest's skip), saying
# why, when the pinned modules cannot be had or the world cannot be built
# (not root).
set -euo pipefail
: "${HUTCHD_BIN:?}" "${HUTCH_TEMPLATES_DIR:?}" "${HUTCH_TEST_WORLD_BIN:?}"
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd -- "$HERE/../../.." && pwd)
cd "$HERE"
# shellcheck disable=SC1091  # lib.sh is checked on its own (scripts/lint)
. "$HERE/../e2b/lib.sh"
go_modules_or_skip

T=$(mktemp -d /tmp/hutch-osbgo-XXXXXX)
HEX=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
SERVER='' WORLD='' HTTPS=''
# (Replaces lib.sh's cleanup: the world and its HTTPS server go too.)
cleanup() {
  # hutchd first: the world holds the network index hutchd's pool uses.
  [[ -n $SERVER ]] && { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; }
  [[ -n $HTTPS ]] && { kill "$HTTPS" 2>/dev/null || true; wait "$HTTPS" 2>/dev/null || true; }
  [[ -n $WORLD ]] && { kill "$WORLD" 2>/dev/null || true; wait "$WORLD" 2>/dev/null || true; }
  rm -rf "$T"
}
trap cleanup EXIT

"$HUTCH_TEST_WORLD_BIN" >"$T/world" 2>>"$T/log" &
WORLD=$!
for _ in $(seq 1 300); do [[ -s $T/world ]] && break; kill -0 "$WORLD" 2>/dev/null || break; sleep 0.1; done
if [[ ! -s $T/world ]]; then
  echo "SKIP: hutch-test-world did not start: $(cat "$T/log")"
  exit 77
fi
# shellcheck disable=SC1091  # checked on its own (scripts/lint)
. "$SRC/tests/support/world_https.sh"
field() { world_field "$T/world" "$1"; }
SECRET="sk-osbgo-$HEX"
start_world_https "$T" "$T/world" "$SECRET"
HTTPS=$HTTPS_PID

start_hutchd "$T/state" "$T/log" "hk_$HEX" --templates-dir "$HUTCH_TEMPLATES_DIR" --net-warm 1 \
  --net-pool "$(field net_pool)" --dns-upstream "$(field dns)" \
  --net-allow-private "$(field world_net)" --vault-upstream-ca "$T/ca.pem"
export OPEN_SANDBOX_DOMAIN="$ADDR/opensandbox" OPEN_SANDBOX_API_KEY="hk_$HEX" HUTCH_VAULT_SECRET=$SECRET
rc=0
"$GO" test -count=1 -v -timeout 10m ./... || rc=$?

# The secret never reached hutchd's log nor its database as plain bytes.
if grep -q "$SECRET" "$T/log" || cat "$T/state/state.db"* | grep -aq "$SECRET"; then
  echo "FAIL: the secret is in hutchd's log or state database" >&2
  rc=1
fi
kill -TERM "$SERVER"
src=0
wait "$SERVER" || src=$?
SERVER=''
if [[ $rc != 0 || $src != 0 ]]; then
  echo "--- hutchd log (test rc=$rc, server exit $src)" >&2
  tail -n 200 "$T/log" >&2
  exit 1
fi
echo PASS
