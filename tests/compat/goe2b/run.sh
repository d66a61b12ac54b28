#!/usr/bin/env bash
# Runs the go-e2b suite (tests/compat/goe2b, `go test`): the Go client
# github.com/matiasinsaurralde/go-e2b at the version go.mod/go.sum pin,
# unmodified, against a real hutchd started on port 0 with a temp state
# dir and --domain, reaching envd by host name (49983-{id}.{domain}) with
# Connect's binary protobuf codec through the client's own *http.Client
# option (main_test.go). The server must then exit 0 on SIGTERM (sanitizer
# builds report leaks and UB that way). Exits 77 (CTest's skip) when the
# pinned modules cannot be had (the module proxy does not serve them and
# the module cache lacks them), saying why.
set -euo pipefail
: "${HUTCHD_BIN:?}" "${HUTCH_TEMPLATES_DIR:?}"
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE"
# shellcheck disable=SC1091  # lib.sh is checked on its own (scripts/lint)
. "$HERE/../e2b/lib.sh"
go_modules_or_skip

T=$(mktemp -d /tmp/hutch-goe2b-XXXXXX)
HEX=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
DOMAIN=sandboxes.hutch.test
trap cleanup EXIT
start_hutchd "$T/state" "$T/log" "hk_$HEX" --templates-dir "$HUTCH_TEMPLATES_DIR" --domain "$DOMAIN"
export HUTCH_ADDR=$ADDR HUTCH_E2B_KEY="e2b_$HEX" HUTCH_DOMAIN=$DOMAIN
rc=0
"$GO" test -count=1 -v -timeout 15m ./... || rc=$?
finish_hutchd "$rc" "$T"
