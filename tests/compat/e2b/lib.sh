# shellcheck shell=bash
# Shared by run.sh, run_code_interpreter.sh, ../python/run.sh,
# ../pysdk/run.sh and the web console's build and browser suite
# (console/build.sh, console/tests/run.sh) (sourced, not run): the pinned
# npm install, the pinned Python venv, a real hutchd on port 0, and its
# clean exit.

# Installs package-lock.json's pins when node_modules is missing or stale.
# Suites sharing a folder (run.sh and run_code_interpreter.sh) run in
# parallel under ctest, and `npm ci` starts by deleting node_modules: the
# install holds an flock on package-lock.json (read-only, nothing written)
# and the staleness is re-checked once the lock is held.
ensure_node_modules() {
  { command -v node && command -v npm; } >/dev/null || { echo "node and npm are required (scripts/setup)" >&2; exit 1; }
  local lock_fd
  exec {lock_fd}<package-lock.json
  flock "$lock_fd"
  if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
    for attempt in 1 2 3; do
      npm ci --no-audit --no-fund --loglevel=error && break
      [[ $attempt == 3 ]] && { echo "npm ci failed" >&2; exit 1; }
      sleep 5
    done
  fi
  exec {lock_fd}<&-
}

# Sets VENV to the Python venv the suites of ../python run from:
# HUTCH_PYTHON_VENV as it is, else build/venv when it holds
# ../python/requirements.txt (scripts/setup --deps-only builds it). Exits 77
# (CTest's skip), saying why, when there is none.
python_venv_or_skip() {
  local req=$HUTCH_SOURCE_DIR/tests/compat/python/requirements.txt
  # shellcheck disable=SC2034  # VENV is for the sourcing script
  VENV=${HUTCH_PYTHON_VENV:-$HUTCH_SOURCE_DIR/build/venv}
  if [[ ! -x $VENV/bin/python ]]; then
    echo "SKIP: no Python venv at $VENV (scripts/setup --deps-only builds it from $req)"
    exit 77
  fi
  if [[ -z ${HUTCH_PYTHON_VENV:-} ]] && ! cmp -s "$req" "$VENV/hutch-requirements.txt"; then
    echo "SKIP: $VENV does not hold tests/compat/python/requirements.txt (run scripts/setup --deps-only)"
    exit 77
  fi
}

# Sets GO ($GO_BIN or go) and GOFLAGS=-mod=readonly (go.sum decides:
# nothing is resolved or added at test time), then downloads the pinned
# modules of the current directory's go.mod; exits 77 (CTest's skip),
# saying why, when they cannot be had (no proxy, not in the module cache).
go_modules_or_skip() {
  GO=${GO_BIN:-go}
  export GOFLAGS=-mod=readonly
  local why
  if ! why=$("$GO" mod download 2>&1); then
    echo "SKIP: the pinned Go modules are not available: $why"
    exit 77
  fi
}

# On an early exit (trap cleanup EXIT): hutchd killed if it was started,
# the script's temp dir $T removed.
SERVER=
cleanup() {
  [[ -n $SERVER ]] && kill "$SERVER" 2>/dev/null
  [[ -n $SERVER ]] && wait "$SERVER" 2>/dev/null
  rm -rf "$T"
}

# start_hutchd STATE_DIR LOG KEY [FLAGS...]: starts hutchd on port 0 and
# waits for its address; sets SERVER (pid) and ADDR (host:port).
start_hutchd() {
  local state=$1 log=$2 key=$3
  shift 3
  rm -f "$state/hutchd.addr"
  HUTCH_API_KEY=$key "$HUTCHD_BIN" --listen 127.0.0.1:0 --state-dir "$state" "$@" >>"$log" 2>&1 &
  SERVER=$!
  for _ in $(seq 1 600); do [[ -s $state/hutchd.addr ]] && break; sleep 0.1; done
  [[ -s $state/hutchd.addr ]] || { cat "$log" >&2; echo "hutchd did not start" >&2; exit 1; }
  # shellcheck disable=SC2034  # ADDR is for the sourcing script
  ADDR=$(cat "$state/hutchd.addr")
}

# finish_hutchd RC TMPDIR: stops hutchd with SIGTERM (it must exit 0:
# sanitizer builds report leaks and UB that way), prints the log's tail on
# any failure, removes TMPDIR and exits.
finish_hutchd() {
  local rc=$1 tmp=$2 src=0
  kill -TERM "$SERVER"
  wait "$SERVER" || src=$?
  trap - EXIT
  if [[ $rc != 0 || $src != 0 ]]; then
    echo "--- hutchd log (test rc=$rc, server exit $src)" >&2
    tail -n 200 "$tmp/log" >&2
    rm -rf "$tmp"
    exit 1
  fi
  rm -rf "$tmp"
  echo PASS
}

# start_code_hutchd NAME: the code-interpreter suites' server. A temp dir
# $T (/tmp/hutch-NAME-*), hutchd on HUTCH_CI_STATE_DIR (or $T/state) with
# HUTCHD_EXTRA_ARGS (whitespace-separated flags), its key hk_$HEX exported
# as HUTCH_URL/HUTCH_API_KEY, and the code-interpreter template built when
# the state dir lacks it (debootstrap from the host's mirror: minutes).
start_code_hutchd() {
  T=$(mktemp -d "/tmp/hutch-$1-XXXXXX")
  local state=${HUTCH_CI_STATE_DIR:-$T/state} extra
  HEX=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
  read -r -a extra <<<"${HUTCHD_EXTRA_ARGS:-}"
  trap cleanup EXIT
  start_hutchd "$state" "$T/log" "hk_$HEX" "${extra[@]}"
  export HUTCH_URL="http://$ADDR" HUTCH_API_KEY="hk_$HEX"
  if ! "$HUTCH_CLI_BIN" template ls 2>/dev/null | grep -q '^code-interpreter\b'; then
    "$HUTCH_CLI_BIN" template build "$HUTCH_SOURCE_DIR/templates/code-interpreter.toml"
  fi
}
