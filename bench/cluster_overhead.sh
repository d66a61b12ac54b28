#!/usr/bin/env bash
# What a relay through a non-owner node costs (issue 27): one etcd and two
# hutchd nodes on loopback; a sandbox on node b; N blocking execs sent to b
# (the owner) and to a (relayed), then N/5 creates on b made on b directly
# and placed through a. The two of each pair take turns (owner, relayed,
# owner, ...), so a busy machine slows both alike. Prints p50/p99 (ms) of
# each, from curl's time_total.
#   bench/cluster_overhead.sh HUTCHD [TEMPLATES_DIR] [N]
# Run as root; it stops what it started (by PID) and removes its temp dir.
set -euo pipefail
HUTCHD=${1:?usage: bench/cluster_overhead.sh HUTCHD [TEMPLATES_DIR] [N]}
TPL=${2:-}
N=${3:-200}
DIR=$(mktemp -d /tmp/hutch-cluster-bench.XXXXXX)
KEY=bench-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$DIR"
}
trap cleanup EXIT

etcd --name b --data-dir "$DIR/etcd" --listen-client-urls http://127.0.0.1:23890 \
  --advertise-client-urls http://127.0.0.1:23890 --listen-peer-urls http://127.0.0.1:23891 \
  --initial-advertise-peer-urls http://127.0.0.1:23891 --initial-cluster b=http://127.0.0.1:23891 \
  >"$DIR/etcd.log" 2>&1 &
PIDS+=($!)
sleep 2
port=23880
for n in a b; do
  port=$((port + 1))
  extra=()
  [[ -n $TPL ]] && extra=(--templates-dir "$TPL")
  HUTCH_API_KEY=$KEY "$HUTCHD" --listen 127.0.0.1:$port --state-dir "$DIR/$n" --no-network \
    --rate-limit 0 --warm-pool none "${extra[@]}" --cluster-etcd http://127.0.0.1:23890 \
    --node-name "$n" >"$DIR/$n.log" 2>&1 &
  PIDS+=($!)
done
for n in a b; do
  for _ in $(seq 1 600); do grep -q "hutchd listening" "$DIR/$n.log" && break; sleep 0.2; done
done
A=http://127.0.0.1:23881 B=http://127.0.0.1:23882
H=(-H "Authorization: Bearer $KEY" -H "Content-Type: application/json")
ID=$(curl -s "${H[@]}" -d '{"node":"b","ttl_seconds":900}' $A/v1/sandboxes |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')

pct() { sort -n | awk '{a[NR]=$1} END {printf "p50 %.2f ms  p99 %.2f ms  (n=%d)\n", a[int(NR*0.5)+1]*1000, a[int(NR*0.99)+1]*1000, NR}'; }
# One sample each of $1 (owner) and $2 (relayed), appended to the files.
exec_pair() {
  for url in "$1" "$2"; do
    curl -s -o /dev/null -w '%{time_total}\n' "${H[@]}" -d '{"cmd":"true"}' \
      "$url/v1/sandboxes/$ID/exec" >>"$DIR/exec-$([[ $url == "$B" ]] && echo owner || echo relayed)"
  done
}
create_one() {  # url body file
  out=$(curl -s -w '\n%{time_total}' "${H[@]}" -d "$2" "$1/v1/sandboxes")
  tail -1 <<<"$out" >>"$3"
  id=$(head -1 <<<"$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  curl -s -o /dev/null -X DELETE "${H[@]}" "$B/v1/sandboxes/$id"
}
for _ in $(seq 1 "$N"); do exec_pair "$B" "$A"; done
for _ in $(seq 1 "$((N / 5))"); do
  create_one "$B" '{"ttl_seconds":60}' "$DIR/create-owner"
  create_one "$A" '{"node":"b","ttl_seconds":60}' "$DIR/create-relayed"
done
echo "exec, owner (b):               $(pct <"$DIR/exec-owner")"
echo "exec, relayed (a->b):          $(pct <"$DIR/exec-relayed")"
echo "create on b, sent to b:        $(pct <"$DIR/create-owner")"
echo "create on b, placed through a: $(pct <"$DIR/create-relayed")"
