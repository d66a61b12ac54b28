# shellcheck shell=bash
# Shared by tests/compat/osbgo/run.sh and bench/vault_proxy.sh (sourced,
# not run): the credential vault's HTTPS host in a world hutch-test-world
# built, as api_vault_egress_test makes it in C++ (MakeVaultEnv).

# world_field WORLD_FILE KEY: a field of hutch-test-world's JSON line.
world_field() {
  python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$(head -n 1 "$1")" "$2"
}

# start_world_https DIR WORLD_FILE SECRET: a CA (DIR/ca.pem) and a
# certificate for api.vault.test and other.vault.test it signs, then
# world_https.py serving them in the world's namespace (HTTPS_PID) until
# killed, waited for until it answers.
start_world_https() {
  local dir=$1 world=$2 secret=$3 src
  src=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
  (
    cd "$dir" || exit 1
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
      -subj /CN=vault-world-ca -keyout ca.key -out ca.pem
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
      -subj /CN=api.vault.test -keyout leaf.key -out leaf.csr
    printf 'subjectAltName=DNS:api.vault.test,DNS:other.vault.test\n' >ext
    openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
      -extfile ext -out leaf.pem
  ) >>"$dir/log" 2>&1
  ip netns exec "hutchw$(world_field "$world" index)" python3 "$src/world_https.py" \
    "$dir/leaf.pem" "$dir/leaf.key" "$secret" >>"$dir/log" 2>&1 &
  # shellcheck disable=SC2034  # HTTPS_PID is for the sourcing script
  HTTPS_PID=$!
  local allowed
  allowed=$(world_field "$world" allowed)
  for _ in $(seq 1 100); do
    [[ $(curl -s -m 1 --cacert "$dir/ca.pem" --resolve "api.vault.test:443:$allowed" \
      https://api.vault.test/secret || true) == denied ]] && return 0
    sleep 0.1
  done
}
