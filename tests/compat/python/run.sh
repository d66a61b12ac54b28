#!/usr/bin/env bash
# Runs the Python SDK suite: the PyPI SDKs e2b-code-interpreter
# (test_e2b_code_interpreter.py) and opensandbox-code-interpreter
# (test_opensandbox_code_interpreter.py), unmodified, from build/venv
# (scripts/setup builds it from requirements.txt, every package pinned by
# hash), with stdlib unittest, against a real hutchd. Like
# ../e2b/run_code_interpreter.sh it builds templates/code-interpreter.toml
# unless the state dir has it; HUTCH_CI_STATE_DIR keeps the state dir (in
# CTest the one code_api_test built the template in), else a temp dir is
# used and removed. Exits 77 (CTest's skip) when the venv is missing.
# HUTCH_PYTHON_VENV names another venv (used as it is); HUTCHD_EXTRA_ARGS
# goes to hutchd.
# Extra arguments go to unittest (e.g. test_e2b_code_interpreter).
set -euo pipefail
: "${HUTCHD_BIN:?}" "${HUTCH_CLI_BIN:?}" "${HUTCH_SOURCE_DIR:?}"
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
VENV=${HUTCH_PYTHON_VENV:-$HUTCH_SOURCE_DIR/build/venv}
if [[ ! -x $VENV/bin/python ]]; then
  echo "SKIP: no Python venv at $VENV (scripts/setup --deps-only builds it from tests/compat/python/requirements.txt)"
  exit 77
fi
if [[ -z ${HUTCH_PYTHON_VENV:-} ]] && ! cmp -s "$HERE/requirements.txt" "$VENV/hutch-requirements.txt"; then
  echo "SKIP: $VENV does not hold tests/compat/python/requirements.txt (run scripts/setup --deps-only)"
  exit 77
fi
# shellcheck disable=SC1091  # lib.sh is checked on its own (scripts/lint)
. "$HERE/../e2b/lib.sh"

start_code_hutchd pysdk

# Each SDK is configured by its environment variables alone.
export E2B_API_URL="http://$ADDR/e2b" E2B_SANDBOX_URL="http://$ADDR/e2b" E2B_API_KEY="e2b_$HEX"
export OPEN_SANDBOX_DOMAIN="$ADDR/opensandbox" OPEN_SANDBOX_API_KEY="hk_$HEX"
# No bytecode files in the source tree.
export PYTHONDONTWRITEBYTECODE=1
rc=0
if (($#)); then
  "$VENV/bin/python" -m unittest -v "$@" || rc=$?
else
  "$VENV/bin/python" -m unittest -v test_e2b_code_interpreter test_opensandbox_code_interpreter || rc=$?
fi

finish_hutchd "$rc" "$T"
