#!/usr/bin/env bash
# Runs template_build.test.mjs: the npm `e2b` SDK, unmodified, builds E2B
# templates on a live hutchd (issue 31 item 3). A loopback registry
# (Debian's docker-registry) serves an image this script makes itself
# (tests/support/oci_test_image.sh: a few host binaries, user `app`,
# workdir /home/app, env GREETING); hutchd pulls it for fromImage.
set -euo pipefail
: "${HUTCHD_BIN:?}" "${HUTCH_TEMPLATES_DIR:?}" "${HUTCH_SOURCE_DIR:?}"
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
# shellcheck disable=SC1091  # lib.sh is checked on its own (scripts/lint)
. "$HERE/lib.sh"
command -v docker-registry >/dev/null || { echo "SKIP: no docker-registry (scripts/setup)"; exit 77; }
ensure_node_modules

T=$(mktemp -d /tmp/hutch-e2b-tpl-XXXXXX)
REGISTRY=
# shellcheck disable=SC2034  # lib.sh's cleanup reads it (set by start_hutchd)
SERVER=
stop_registry() {
  if [[ -n $REGISTRY ]]; then
    kill -KILL "$REGISTRY" 2>/dev/null || true
    wait "$REGISTRY" 2>/dev/null || true
  fi
}
# A free loopback port for the registry (asked of the kernel, then bound
# by the registry right after).
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$T/registry.yml" <<YML
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $T/registry
http:
  addr: 127.0.0.1:$PORT
  secret: hutch-test
YML
docker-registry serve "$T/registry.yml" >"$T/registry.log" 2>&1 &
REGISTRY=$!
trap 'stop_registry; cleanup' EXIT
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$PORT/v2/" >/dev/null && break
  sleep 0.1
done
# bash too: the SDK's commands.run is `/bin/bash -l -c`.
OCI_TEST_EXTRA_BINS=bash bash "$HUTCH_SOURCE_DIR/tests/support/oci_test_image.sh" "$T/image" "127.0.0.1:$PORT" hutch/e2b-base:1 e2b

HEX=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
start_hutchd "$T/state" "$T/log" "hk_$HEX" --templates-dir "$HUTCH_TEMPLATES_DIR" \
  --image-insecure-registry "127.0.0.1:$PORT"
export E2B_API_URL="http://$ADDR/e2b" E2B_SANDBOX_URL="http://$ADDR/e2b"
export E2B_API_KEY="e2b_$HEX" HUTCH_TEST_IMAGE="127.0.0.1:$PORT/hutch/e2b-base:1"
rc=0
node --test --test-concurrency=1 --test-reporter=spec "$HERE/template_build.test.mjs" || rc=$?
stop_registry
REGISTRY=
finish_hutchd "$rc" "$T"
