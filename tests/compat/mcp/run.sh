#!/usr/bin/env bash
# Runs the MCP suites against a real hutchd: mcp_client.test.mjs (the npm
# @modelcontextprotocol/sdk client, pinned in package-lock.json, over
# Streamable HTTP on /mcp and over the `hutch mcp` stdio bridge) and
# test_mcp_python.py (the PyPI `mcp` client from build/venv, pinned by hash
# in ../python/requirements.txt; skipped, saying why, when the venv lacks
# it). Like ../e2b/run_code_interpreter.sh it builds
# templates/code-interpreter.toml unless the state dir has it (run_code);
# HUTCH_CI_STATE_DIR keeps the state dir (in CTest the one code_api_test
# built the template in), else a temp dir is used and removed.
# HUTCH_PYTHON_VENV names another venv; HUTCHD_EXTRA_ARGS goes to hutchd.
set -euo pipefail
: "${HUTCHD_BIN:?}" "${HUTCH_CLI_BIN:?}" "${HUTCH_SOURCE_DIR:?}"
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
# shellcheck disable=SC1091  # lib.sh is checked on its own (scripts/lint)
. "$HERE/../e2b/lib.sh"
ensure_node_modules

VENV=${HUTCH_PYTHON_VENV:-$HUTCH_SOURCE_DIR/build/venv}
python_skip=
if [[ ! -x $VENV/bin/python ]]; then
  python_skip="no Python venv at $VENV (scripts/setup --deps-only builds it from tests/compat/python/requirements.txt)"
elif ! "$VENV/bin/python" -c 'import mcp' 2>/dev/null; then
  python_skip="$VENV lacks the mcp package (run scripts/setup --deps-only)"
fi

start_code_hutchd mcp

export HUTCH_MCP_URL="http://$ADDR/mcp" HUTCH_MCP_KEY="hk_$HEX"
# No bytecode files in the source tree.
export PYTHONDONTWRITEBYTECODE=1
rc=0
node --test --test-concurrency=1 --test-reporter=spec "$HERE/mcp_client.test.mjs" || rc=$?
if [[ -n $python_skip ]]; then
  echo "SKIP (Python mcp client): $python_skip"
else
  "$VENV/bin/python" -m unittest -v test_mcp_python || rc=$?
fi

finish_hutchd "$rc" "$T"
