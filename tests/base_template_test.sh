#!/bin/bash
# shellcheck disable=SC2016  # commands in single quotes run in the template's shell
# Builds the base sandbox template into a temp dir (UID_BASE=1000000) and
# checks that the result works: tools run inside it (chroot, and inside a user
# namespace mapping sandbox 0..65535 -> host 1000000..1065535), ownership is
# shifted, no setuid bits remain, and a second build is a fast no-op.
# Must run as root.  Prints PASS at the end; exits non-zero on any failure.
set -uo pipefail

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
BUILD=${BUILD_BASE_TEMPLATE:-$HERE/../scripts/build-base-template}
UID_BASE=1000000

if [[ $(id -u) -ne 0 ]]; then
    echo "SKIP: base_template_test.sh must run as root" >&2
    exit 77
fi

TMP=$(mktemp -d /tmp/hutch-base-template-test.XXXXXX)
# The rootfs must be reachable by the namespace's root (host uid UID_BASE).
chmod 0755 "$TMP"
cleanup() { rm -rf -- "$TMP"; }
trap cleanup EXIT
DEST=$TMP/templates/base
ROOTFS=$DEST/rootfs

FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
ok()   { echo "ok: $*"; }

# expect_out NAME REGEX CMD...  -- run CMD, require exit 0 and stdout =~ REGEX
expect_out() {
    local name=$1 re=$2 out rc
    shift 2
    out=$("$@" 2>&1); rc=$?
    if [[ $rc -ne 0 ]]; then
        fail "$name: exit $rc: $out"
    elif [[ ! $out =~ $re ]]; then
        fail "$name: output '$out' does not match /$re/"
    else
        ok "$name"
    fi
}
# Run a command as (real) root inside the rootfs with its own /proc.
in_root() {
    unshare --mount --pid --fork --root="$ROOTFS" --wd=/ --mount-proc \
        /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root "$@"
}

# ---------------------------------------------------------------- build
t0=$(date +%s%N)
if ! "$BUILD" "$DEST" "$UID_BASE"; then
    echo "FAIL: build-base-template exited non-zero" >&2
    exit 1
fi
t1=$(date +%s%N)
build_ms=$(( (t1 - t0) / 1000000 ))
# A figure, not a check: build time depends on the machine's load (the
# benchmark is where timings belong).
echo "build took ${build_ms} ms"

# ---------------------------------------------------------------- layout
[[ -d $ROOTFS ]] || { echo "FAIL: $ROOTFS missing" >&2; exit 1; }
if [[ -f $DEST/template.json ]] &&
   grep -Eq '^\{"name":"base","uid_base":1000000,"layout":[0-9]+,"built_at":"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z"\}$' "$DEST/template.json"; then
    ok "template.json: $(cat "$DEST/template.json")"
else
    fail "template.json missing or malformed: $(cat "$DEST/template.json" 2>&1)"
fi
leftovers=$(find "$TMP/templates" -mindepth 1 -maxdepth 1 -name '.base.tmp.*' -o -mindepth 1 -maxdepth 1 -name '.base.old.*')
if [[ -z $leftovers ]]; then ok "no temp dirs left beside DEST"; else fail "leftover temp dirs: $leftovers"; fi

for l in bin:usr/bin sbin:usr/sbin lib:usr/lib lib64:usr/lib64; do
    if [[ $(readlink "$ROOTFS/${l%%:*}") == "${l#*:}" ]]; then ok "/${l%%:*} -> ${l#*:}"
    else fail "/${l%%:*} is not a symlink to ${l#*:}"; fi
done
for d in proc sys dev run mnt opt usr/local/bin etc tmp var/tmp root home/user; do
    [[ -d $ROOTFS/$d && ! -L $ROOTFS/$d ]] || fail "/$d missing"
done
for d in proc sys dev; do
    [[ -z $(ls -A "$ROOTFS/$d") ]] || fail "/$d is not empty"
done
expect_out "mode /tmp"       '^1777$' stat -c %a "$ROOTFS/tmp"
expect_out "mode /var/tmp"   '^1777$' stat -c %a "$ROOTFS/var/tmp"
expect_out "mode /root"      '^700$'  stat -c %a "$ROOTFS/root"
expect_out "mode /home/user" '^755$'  stat -c %a "$ROOTFS/home/user"
[[ -e $ROOTFS/usr/share/doc || -e $ROOTFS/usr/share/man ]] && fail "docs/man pages copied"

# ---------------------------------------------------------------- ownership
expect_out "owner /usr/bin/bash"  '^1000000:1000000$' stat -c %u:%g "$ROOTFS/usr/bin/bash"
expect_out "owner /bin symlink"   '^1000000:1000000$' stat -c %u:%g "$ROOTFS/bin"
expect_out "owner /home/user"     '^1001000:1001000$' stat -c %u:%g "$ROOTFS/home/user"
bad_owner=$(find "$ROOTFS" \( -uid +1065535 -o -uid -1000000 -o -gid +1065535 -o -gid -1000000 \) -print | head -5)
if [[ -z $bad_owner ]]; then ok "all files owned by mapped ids"; else fail "files with unmapped owner: $bad_owner"; fi
bad_home=$(find "$ROOTFS/home/user" ! -uid 1001000 -print | head -5)
if [[ -z $bad_home ]]; then ok "/home/user owned by user"; else fail "/home/user entries not owned by 1001000: $bad_home"; fi
suid=$(find "$ROOTFS" ! -type l -perm /6000 -print | head -5)
if [[ -z $suid ]]; then ok "no setuid/setgid bits"; else fail "setuid/setgid files: $suid"; fi

# ---------------------------------------------------------------- /etc
expect_out "passwd root"  '^root:x:0:0:root:/root:/bin/bash$' grep '^root:' "$ROOTFS/etc/passwd"
expect_out "hostname"     '^sandbox$' cat "$ROOTFS/etc/hostname"
expect_out "hosts"        '127\.0\.0\.1.*localhost' cat "$ROOTFS/etc/hosts"
if [[ -f $ROOTFS/etc/resolv.conf && ! -s $ROOTFS/etc/resolv.conf ]]; then ok "resolv.conf empty"; else fail "resolv.conf not an empty file"; fi
expect_out "os-release"   'ID=' cat "$ROOTFS/etc/os-release"

# ---------------------------------------------------------------- tools (chroot)
expect_out "sh"        '^hi$'                 in_root /bin/sh -c 'echo hi'
expect_out "bash"      '^[0-9]+\.[0-9]+'      in_root bash -c 'echo $BASH_VERSION'
expect_out "python3"   '^1$'                  in_root python3 -c 'import json,ssl,sqlite3,hashlib; print(1)'
expect_out "python3 more modules" '^ok$'      in_root python3 -c 'import ctypes,decimal,lzma,bz2,zlib,uuid,pyexpat,readline,curses,asyncio,multiprocessing,zoneinfo,socket,subprocess; print("ok")'
expect_out "python3 ca certs" '^[1-9][0-9]*$' in_root python3 -c 'import ssl; print(ssl.create_default_context().cert_store_stats()["x509_ca"])'
expect_out "python3 -I -S" '^3\.'             in_root python3 -I -S -c 'import sys; print(sys.version)'
expect_out "ls home"   '\.bashrc'             in_root ls -A /home/user
# The E2B-shaped base (docs/compat-e2b.md): user `user`, bash, git, curl.
expect_out "passwd user" '^user:x:1000:1000::/home/user:/bin/bash$' grep '^user:' "$ROOTFS/etc/passwd"
if dpkg-query -W -f='${db:Status-Status}' git 2>/dev/null | grep -q installed; then
    # (git itself wants /dev/null, which this bare chroot lacks; the E2B
    # suite runs it in a real sandbox. Here: its libraries all resolve.)
    expect_out "git libs" '^[^!]*$'           in_root sh -c '/lib64/ld-linux-x86-64.so.2 --list /usr/bin/git | grep -q "not found" && echo "!missing" || echo ok'
fi
if dpkg-query -W -f='${db:Status-Status}' curl 2>/dev/null | grep -q installed; then
    expect_out "curl"  '^curl [0-9]'          in_root curl --version
fi
expect_out "id user"   'uid=1000\(user\) gid=1000\(user\)' in_root id user
expect_out "id root"   'uid=0\(root\)'        in_root id root
expect_out "getent"    '^nobody:x:65534:'     in_root getent passwd nobody
expect_out "sha256sum" '^5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03 ' in_root sh -c 'echo hello | sha256sum'
expect_out "ps"        '^ *1 +ps$'             in_root ps -e -o pid=,comm=
expect_out "pgrep"     'pgrep from procps'    in_root pgrep -V
expect_out "grep"      '^b$'                  in_root sh -c 'printf "a\nb\n" | grep b'
expect_out "sed"       '^hello world$'        in_root sh -c 'echo hello there | sed s/there/world/'
expect_out "awk"       '^3$'                  in_root sh -c 'echo 1 2 | awk "{print \$1+\$2}"'
expect_out "find"      '^/etc/passwd$'        in_root find /etc -maxdepth 1 -name passwd
expect_out "tar+gzip"  '^etc/hostname$'       in_root sh -c 'tar -C / -czf /tmp/t.tgz etc/hostname && tar -tzf /tmp/t.tgz && rm /tmp/t.tgz'
expect_out "gzip"      '^hi$'                 in_root sh -c 'echo hi | gzip | gzip -d'
expect_out "diff"      '^same$'               in_root sh -c 'diff /etc/hosts /etc/hosts && echo same'
expect_out "mount bin" 'mount from util-linux' in_root mount --version
expect_out "ldd"       'libc\.so\.6'          in_root ldd /usr/bin/bash
expect_out "login shell PATH" '/usr/bin'      in_root bash -lc 'echo $PATH'

expect_out "no dangling symlinks" '^$'       in_root find / -xdev -xtype l

# Every ELF in the tree must have its libraries available inside the tree.
missing=$(find "$ROOTFS/usr" -type f \( -perm /111 -o -name '*.so*' \) -printf '/%P\n' 2>/dev/null |
          sed 's#^/#/usr/#' | xargs -d '\n' chroot "$ROOTFS" /usr/bin/ldd 2>/dev/null |
          awk '/^\/.*:$/ { f = $0 } /not found/ { print f, $1 }' | head -10)
if [[ -z $missing ]]; then ok "no missing shared libraries"; else fail "missing shared libraries: $missing"; fi

# ---------------------------------------------------------------- user namespace
# Run inside a user namespace mapping sandbox 0..65535 to host 1000000.. as the
# sandbox does.  util-linux 2.38's --map-users needs /etc/subuid (newuidmap),
# so a small python helper writes the maps itself (we are root).
userns_run() {
    python3 - "$ROOTFS" "$UID_BASE" "$@" <<'PYEOF'
import ctypes, os, sys
rootfs, base, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
CLONE_NEWUSER = 0x10000000
libc = ctypes.CDLL(None, use_errno=True)
r1, w1 = os.pipe(); r2, w2 = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(w1); os.close(r2)
    if libc.unshare(CLONE_NEWUSER) != 0:
        os.write(w2, b"E"); os._exit(126)
    os.write(w2, b"K")
    if os.read(r1, 1) != b"K":
        os._exit(126)
    os.setgroups([])
    os.setresgid(0, 0, 0); os.setresuid(0, 0, 0)
    os.execvp("unshare", ["unshare", "--mount", "--pid", "--fork", "--mount-proc",
                          "--root=" + rootfs, "--wd=/", *argv])
os.close(r1); os.close(w2)
if os.read(r2, 1) != b"K":
    os.waitpid(pid, 0); print("userns: unshare(CLONE_NEWUSER) failed", file=sys.stderr); sys.exit(125)
for f in ("uid_map", "gid_map"):
    with open(f"/proc/{pid}/{f}", "w") as fh:
        fh.write(f"0 {base} 65536\n")
os.write(w1, b"K")
_, st = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(st))
PYEOF
}
out=$(userns_run /usr/bin/env -i PATH=/usr/bin:/usr/sbin /bin/sh -c 'id -u; true' 2>&1); rc=$?
if [[ $rc -eq 125 ]]; then
    echo "note: user namespaces unavailable, skipping userns checks ($out)"
elif [[ $rc -ne 0 || $out != 0 ]]; then
    fail "userns: basic run failed (rc=$rc): $out"
else
    ok "userns: runs as uid 0"
    U() { userns_run /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root "$@"; }
    expect_out "userns: owners appear as 0 and 1000" '^0:0 1000:1000$' \
        U sh -c 'echo $(stat -c %u:%g /usr/bin/bash) $(stat -c %u:%g /home/user)'
    expect_out "userns: python3" '^1$' U python3 -c 'import json,ssl,sqlite3,hashlib; print(1)'
    expect_out "userns: ps sees own pid ns" '^ *1 ' U sh -c 'ps -e -o pid=,comm= | head -1'
    expect_out "userns: /tmp writable" '^ok$' U sh -c 'echo x > /tmp/probe && rm /tmp/probe && echo ok'
fi

# ---------------------------------------------------------------- idempotence
before=$(stat -c %Y.%i "$DEST/template.json")
t0=$(date +%s%N)
"$BUILD" "$DEST" "$UID_BASE" || fail "second build exited non-zero"
t1=$(date +%s%N)
rerun_ms=$(( (t1 - t0) / 1000000 ))
after=$(stat -c %Y.%i "$DEST/template.json")
if (( rerun_ms < 1000 )); then ok "second run is a no-op (${rerun_ms} ms)"; else fail "second run took ${rerun_ms} ms"; fi
[[ $before == "$after" ]] || fail "second run rewrote template.json"

# A different uid_base rebuilds and replaces the template.
"$BUILD" "$DEST" 2000000 >/dev/null 2>&1 || fail "rebuild with uid_base 2000000 failed"
expect_out "rebuild changes uid_base" '"uid_base":2000000' cat "$DEST/template.json"
expect_out "rebuild owner" '^2000000$' stat -c %u "$ROOTFS/usr/bin/bash"

# Bad arguments fail clearly.
if "$BUILD" "$DEST" notanumber >/dev/null 2>&1; then fail "non-numeric UID_BASE accepted"; else ok "non-numeric UID_BASE rejected"; fi
if "$BUILD" >/dev/null 2>&1; then fail "missing arguments accepted"; else ok "missing arguments rejected"; fi

# A build killed half way leaves no template; the next build cleans up.
DEST2=$TMP/templates2/base
mkdir -p "$TMP/templates2"
# (Killed while it still runs: a build that finished before the kill
# proves nothing, so it is retried with an earlier kill.)
killed=
for delay in 1 0.5 0.2 0.05; do
  setsid "$BUILD" "$DEST2" "$UID_BASE" >/dev/null 2>&1 &
  kpid=$!
  sleep "$delay"
  if kill -KILL -- -"$kpid" 2>/dev/null; then
    killed=1
    wait "$kpid" 2>/dev/null
    break
  fi
  wait "$kpid" 2>/dev/null
  rm -rf "$DEST2"
done
if [[ -z $killed ]]; then
  fail "every build finished before it could be killed"
elif [[ ! -e $DEST2 ]]; then ok "killed build left no template"; else fail "killed build left $DEST2 behind"; fi
"$BUILD" "$DEST2" "$UID_BASE" >/dev/null 2>&1 || fail "build after a killed build failed"
[[ -f $DEST2/template.json ]] || fail "build after a killed build produced no template.json"
leftovers=$(find "$TMP/templates2" -mindepth 1 -maxdepth 1 -name '.base.tmp.*')
if [[ -z $leftovers ]]; then ok "stale temp dir cleaned up"; else fail "stale temp dirs remain: $leftovers"; fi
rm -rf -- "$TMP/templates2"

# A missing required package fails clearly (fake dpkg-query hides dash).
mkdir -p "$TMP/fakebin"
cat > "$TMP/fakebin/dpkg-query" <<'EOF2'
#!/bin/sh
/usr/bin/dpkg-query "$@" | sed 's/^dash installed$/dash not-installed/'
EOF2
chmod +x "$TMP/fakebin/dpkg-query"
out=$(PATH=$TMP/fakebin:$PATH "$BUILD" "$TMP/templates3/base" "$UID_BASE" 2>&1); rc=$?
if [[ $rc -ne 0 && $out == *"required package 'dash'"* && ! -e $TMP/templates3/base ]]; then
    ok "missing required package rejected"
else
    fail "missing required package: rc=$rc out=$out"
fi

if (( FAILS )); then
    echo "FAILED: $FAILS check(s)" >&2
    exit 1
fi
echo PASS
