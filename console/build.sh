#!/usr/bin/env bash
# Builds the web console into OUTDIR (CMake's hutch-console target: build/*/ui,
# beside hutchd): npm ci from package-lock.json when node_modules is missing
# or stale (pinned versions, under the same lock as the test suites'
# installs), then build.mjs (type check, esbuild, index.html).
#   console/build.sh OUTDIR
set -euo pipefail
: "${1:?usage: console/build.sh OUTDIR}"
cd "$(dirname "$0")"
# shellcheck disable=SC1091  # lib.sh is checked on its own (scripts/lint)
. ../tests/compat/e2b/lib.sh
ensure_node_modules
exec node build.mjs --outdir "$1"
