#!/usr/bin/env bash
# The SDK parity test (issue 30): scenario.txt run by the Go SDK
# (sdk/go/internal/parity) and by the Python SDK (sdk/python/tools/parity.py,
# standard library only: the system python3) against one hutchd on port 0,
# each in a fresh sandbox; their outputs must be identical.
set -euo pipefail
: "${HUTCHD_BIN:?}" "${HUTCH_SOURCE_DIR:?}"
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
GO=${GO_BIN:-go}
command -v "$GO" >/dev/null || { echo "SKIP: no go"; exit 77; }
# shellcheck disable=SC1091  # lib.sh is checked on its own (scripts/lint)
. "$HERE/../e2b/lib.sh"
T=$(mktemp -d /tmp/hutch-parity-XXXXXX)
trap cleanup EXIT
HEX=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
start_hutchd "$T/state" "$T/log" "hk_$HEX" --rate-limit 0 --net-warm 0 --warm-pool none \
  --templates-dir "${HUTCH_TEMPLATES_DIR:?}"
export HUTCH_URL="http://$ADDR" HUTCH_API_KEY="hk_$HEX" PYTHONDONTWRITEBYTECODE=1
rc=0
(cd "$HUTCH_SOURCE_DIR/sdk/go" && "$GO" run ./internal/parity "$HERE/scenario.txt") >"$T/go.out" || rc=$?
python3 "$HUTCH_SOURCE_DIR/sdk/python/tools/parity.py" "$HERE/scenario.txt" >"$T/py.out" || rc=$?
if ((rc == 0)) && ! diff -u --label go "$T/go.out" --label python "$T/py.out"; then
  rc=1
fi
if ((rc == 0)); then
  echo "parity: $(wc -l <"$T/go.out") steps, the same output from both SDKs:"
  cat "$T/go.out"
fi
finish_hutchd "$rc" "$T"
