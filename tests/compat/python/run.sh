#!/usr/bin/env bash
# Runs the Python SDK suites, unmodified PyPI SDKs from build/venv
# (scripts/setup builds it from requirements.txt, every package pinned by
# hash), with stdlib unittest, against a real hutchd on port 0.
#   run.sh       the code-interpreter SDKs: e2b-code-interpreter
#                (test_e2b_code_interpreter.py) and
#                opensandbox-code-interpreter
#                (test_opensandbox_code_interpreter.py). Like
#                ../e2b/run_code_interpreter.sh it builds
#                templates/code-interpreter.toml unless the state dir has
#                it; HUTCH_CI_STATE_DIR keeps the state dir (in CTest the
#                one code_api_test built the template in), else a temp dir
#                is used and removed. HUTCHD_EXTRA_ARGS goes to hutchd.
#   run.sh base  the base SDKs: `e2b` (test_e2b_sdk.py, and its
#                control-plane extras test_e2b_control.py) and `opensandbox`
#                (test_opensandbox_sdk.py), sync and async clients, on the
#                test templates ($HUTCH_TEMPLATES_DIR: `base`) with a temp
#                state dir; with HUTCH_TEST_WORLD_BIN, inside the egress
#                tests' outside world (below).
# Extra arguments go to unittest (modules or cases, e.g. test_e2b_sdk).
# Exits 77 (CTest's skip) when the venv is missing. HUTCH_PYTHON_VENV names
# another venv (used as it is).
set -euo pipefail
: "${HUTCHD_BIN:?}" "${HUTCH_SOURCE_DIR:?}"
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
# shellcheck disable=SC1091  # lib.sh is checked on its own (scripts/lint)
. "$HERE/../e2b/lib.sh"
python_venv_or_skip

if [[ ${1:-} == base ]]; then
  shift
  : "${HUTCH_TEMPLATES_DIR:?}"
  T=$(mktemp -d /tmp/hutch-pybase-XXXXXX)
  HEX=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
  trap cleanup EXIT
  # With HUTCH_TEST_WORLD_BIN (python_e2b_control_test): the egress tests'
  # outside world (tests/support/net_world.h: allowed.test and denied.test
  # servers and their DNS in a network namespace of this run), given to the
  # suite as HUTCH_WORLD; hutchd's sandboxes reach nothing but it. It ends
  # with this script (its parent-death signal), after hutchd. Without it
  # (not root) the reachability cases are skipped, saying why.
  NETARGS=()
  if [[ -n ${HUTCH_TEST_WORLD_BIN:-} ]]; then
    "$HUTCH_TEST_WORLD_BIN" >"$T/world" 2>>"$T/log" &
    world=$!
    for _ in $(seq 1 300); do [[ -s $T/world ]] && break; kill -0 "$world" 2>/dev/null || break; sleep 0.1; done
    if [[ -s $T/world ]]; then
      HUTCH_WORLD=$(head -n 1 "$T/world")
      export HUTCH_WORLD
      read -r pool dns world_net < <("$VENV/bin/python" -c \
        'import json,sys; w=json.loads(sys.argv[1]); print(w["net_pool"], w["dns"], w["world_net"])' "$HUTCH_WORLD")
      NETARGS=(--net-pool "$pool" --dns-upstream "$dns" --net-allow-private "$world_net")
    else
      echo "hutch-test-world did not start; egress reachability cases will be skipped" >&2
      cat "$T/log" >&2
    fi
  fi
  start_hutchd "$T/state" "$T/log" "hk_$HEX" --templates-dir "$HUTCH_TEMPLATES_DIR" "${NETARGS[@]}"
  suites=(test_e2b_sdk test_opensandbox_sdk)
else
  : "${HUTCH_CLI_BIN:?}"
  start_code_hutchd pysdk
  suites=(test_e2b_code_interpreter test_opensandbox_code_interpreter)
fi

# Each SDK is configured by its environment variables alone.
export E2B_API_URL="http://$ADDR/e2b" E2B_SANDBOX_URL="http://$ADDR/e2b" E2B_API_KEY="e2b_$HEX"
export OPEN_SANDBOX_DOMAIN="$ADDR/opensandbox" OPEN_SANDBOX_API_KEY="hk_$HEX"
# No bytecode files in the source tree.
export PYTHONDONTWRITEBYTECODE=1
(($#)) && suites=("$@")
rc=0
"$VENV/bin/python" -m unittest -v "${suites[@]}" || rc=$?

finish_hutchd "$rc" "$T"
