#!/usr/bin/env bash
# Runs the hutch Python SDK's suite (sdk/python) with pytest from build/venv
# (scripts/setup builds it from tests/compat/python/requirements.txt, every
# package pinned by hash) against real hutchd servers the suite starts
# itself on port 0 with temp state dirs (conftest.py; HUTCHD_BIN and
# HUTCH_TEMPLATES_DIR from CTest's environment).
#   run.sh        everything but the code interpreter (python_hutch_sdk_test)
#   run.sh code   test_code.py, on the code-interpreter template in
#                 HUTCH_CI_STATE_DIR (python_hutch_sdk_code_test; the CLI,
#                 HUTCH_CLI_BIN, builds it when that state dir lacks it)
# Other arguments go to pytest. Exits 77 (CTest's skip) when the venv is
# missing or lacks pytest; HUTCH_PYTHON_VENV names another venv.
set -euo pipefail
: "${HUTCHD_BIN:?}" "${HUTCH_SOURCE_DIR:?}"
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
# shellcheck disable=SC1091  # lib.sh is checked on its own (scripts/lint)
. "$HERE/../e2b/lib.sh"
python_venv_or_skip
if ! "$VENV/bin/python" -c 'import pytest' 2>/dev/null; then
  echo "SKIP: no pytest in $VENV"
  exit 77
fi
# No bytecode or pytest cache in the source tree.
export PYTHONDONTWRITEBYTECODE=1
args=(-p no:cacheprovider -v -rs)
if [[ ${1:-} == code ]]; then
  shift
  : "${HUTCH_CI_STATE_DIR:?run.sh code needs HUTCH_CI_STATE_DIR}"
  exec "$VENV/bin/python" -m pytest "${args[@]}" test_code.py "$@"
fi
unset HUTCH_CI_STATE_DIR
exec "$VENV/bin/python" -m pytest "${args[@]}" --ignore=test_code.py "$@"
