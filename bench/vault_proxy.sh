#!/usr/bin/env bash
# What the credential vault's egress proxy costs (issue 26): the test
# world (hutch-test-world) with its HTTPS host (tests/support/world_https.py,
# which answers "granted" only with the right x-api-key), one hutchd
# verifying that host against the world's CA, and two sandboxes. Inside
# them, N HTTPS GETs each on a new connection (Python urllib):
#   direct     no vault, the header set by the client, the world's CA
#   injected   a binding for the host: hutch interposes (its CA's leaf to
#              the sandbox, verified TLS upstream) and adds the header
#   spliced    the same sandbox to a host with no binding: redirected to
#              the proxy, which peeks the SNI and splices the bytes
# Prints p50/p90 (ms) of each, measured in the sandbox.
#   bench/vault_proxy.sh HUTCHD HUTCH_TEST_WORLD [TEMPLATES_DIR] [N]
# Run as root; it stops what it started (by PID) and removes its temp dir.
set -euo pipefail
HUTCHD=${1:?usage: bench/vault_proxy.sh HUTCHD HUTCH_TEST_WORLD [TEMPLATES_DIR] [N]}
WORLD_BIN=${2:?usage: bench/vault_proxy.sh HUTCHD HUTCH_TEST_WORLD [TEMPLATES_DIR] [N]}
TPL=${3:-}
N=${4:-200}
SRC=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
DIR=$(mktemp -d /tmp/hutch-vault-bench.XXXXXX)
KEY=bench-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
SECRET=sk-bench-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
PIDS=()
cleanup() {
  # hutchd and the HTTPS server before the world (it holds the index).
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    kill "${PIDS[$i]}" 2>/dev/null || true
    wait "${PIDS[$i]}" 2>/dev/null || true
  done
  rm -rf "$DIR"
}
trap cleanup EXIT

"$WORLD_BIN" >"$DIR/world" 2>>"$DIR/log" &
PIDS+=($!)
for _ in $(seq 1 300); do [[ -s $DIR/world ]] && break; sleep 0.1; done
[[ -s $DIR/world ]] || { cat "$DIR/log" >&2; exit 1; }
# shellcheck disable=SC1091  # checked on its own (scripts/lint)
. "$SRC/tests/support/world_https.sh"
field() { world_field "$DIR/world" "$1"; }
start_world_https "$DIR" "$DIR/world" "$SECRET"
PIDS+=("$HTTPS_PID")
extra=()
[[ -n $TPL ]] && extra=(--templates-dir "$TPL")
HUTCH_API_KEY=$KEY "$HUTCHD" --listen 127.0.0.1:0 --state-dir "$DIR/state" --rate-limit 0 \
  "${extra[@]}" --net-pool "$(field net_pool)" --dns-upstream "$(field dns)" \
  --net-allow-private "$(field world_net)" --vault-upstream-ca "$DIR/ca.pem" >>"$DIR/log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 600); do [[ -s $DIR/state/hutchd.addr ]] && break; sleep 0.2; done
ADDR=$(cat "$DIR/state/hutchd.addr")
api() { curl -sS -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' "$@"; }
id_of() { python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'; }
vault=$(printf '{"network":{"mode":"all"},"vault":{"credentials":[{"name":"k","value":"%s"}],"bindings":[{"name":"b","match":{"host":"api.vault.test"},"auth":{"type":"header","credential":"k","header":"x-api-key"}}]}}' "$SECRET")
bound=$(api -X POST "http://$ADDR/v1/sandboxes" -d "$vault" | id_of)
plain=$(api -X POST "http://$ADDR/v1/sandboxes" -d '{"network":{"mode":"all"}}' | id_of)

# N GETs on new connections, timed in the sandbox; prints "p50 p90" (ms)
# after checking every answer. Args: url, CA file or "", header value or "".
cat >"$DIR/get.py" <<'PY'
import ssl, sys, time, urllib.request
url, ca, key, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ctx = ssl.create_default_context(cafile=ca or None)
times = []
for i in range(n + 5):
    req = urllib.request.Request(url, headers={"x-api-key": key} if key else {})
    t = time.perf_counter()
    body = urllib.request.urlopen(req, context=ctx).read()
    if i >= 5:
        times.append((time.perf_counter() - t) * 1000)
    assert body.startswith(b"granted") or b"host" in body, body
times.sort()
print("%.2f %.2f" % (times[len(times) // 2], times[int(len(times) * 0.9)]))
PY
put() { api -X PUT "http://$ADDR/v1/sandboxes/$1/fs?path=$2" --data-binary "@$3" -o /dev/null; }
for sb in "$bound" "$plain"; do
  put "$sb" /tmp/get.py "$DIR/get.py"
  put "$sb" /tmp/world-ca.pem "$DIR/ca.pem"
done
run() {
  local sb=$1
  shift
  api -X POST "http://$ADDR/v1/sandboxes/$sb/exec" \
    -d "$(python3 -c 'import json,sys; print(json.dumps({"argv": ["python3", "/tmp/get.py"] + sys.argv[1:], "timeout_seconds": 600}))' "$@")" |
    python3 -c 'import json,sys; r = json.load(sys.stdin); print(r["stdout"].strip() or r)'
}
direct=$(run "$plain" https://api.vault.test/secret /tmp/world-ca.pem "$SECRET" "$N")
injected=$(run "$bound" https://api.vault.test/secret "" "" "$N")
spliced=$(run "$bound" https://other.vault.test/echo /tmp/world-ca.pem "" "$N")
printf '%-10s %8s %8s   (ms, N=%s, HTTPS GET on a new connection, timed in the sandbox)\n' path p50 p90 "$N"
for row in "direct:$direct" "injected:$injected" "spliced:$spliced"; do
  read -r p50 p90 <<<"${row#*:}"
  printf '%-10s %8s %8s\n' "${row%%:*}" "$p50" "$p90"
done
