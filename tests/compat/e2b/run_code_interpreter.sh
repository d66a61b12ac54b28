#!/usr/bin/env bash
# Runs the code-interpreter suite (code_interpreter.test.mjs): the npm
# `@e2b/code-interpreter` SDK against a real hutchd. Builds
# templates/code-interpreter.toml (and debian, python before it: debootstrap
# from the host's apt mirror, many minutes) unless the state dir already has
# it. HUTCH_CI_STATE_DIR keeps the state dir (and so the built templates)
# between runs; without it a temp dir is used and removed.
# HUTCHD_EXTRA_ARGS goes to hutchd as more flags. In CTest the state dir is
# the one code_api_test built the template in (a fixture).
set -euo pipefail
: "${HUTCHD_BIN:?}" "${HUTCH_CLI_BIN:?}" "${HUTCH_SOURCE_DIR:?}"
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
# shellcheck disable=SC1091  # lib.sh is checked on its own (scripts/lint)
. "$HERE/lib.sh"
ensure_node_modules

start_code_hutchd e2b-ci

export E2B_API_URL="http://$ADDR/e2b" E2B_SANDBOX_URL="http://$ADDR/e2b" E2B_API_KEY="e2b_$HEX"
rc=0
node --test --test-concurrency=1 --test-reporter=spec "$HERE/code_interpreter.test.mjs" || rc=$?

finish_hutchd "$rc" "$T"
