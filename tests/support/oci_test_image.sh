#!/usr/bin/env bash
# Makes a small OCI image with umoci and pushes it with skopeo to a
# loopback registry, for api_image_test. No debootstrap and no download:
# the root is a few of the host's own binaries (sh, cat, id, env, ls,
# stat) with their libraries, plus test files.
#   oci_test_image.sh WORKDIR REGISTRY REPO:TAG [MARK [TOP]]
# The image has three layers: the first holds the root, /etc/first.txt,
# /etc/deleted.txt and /etc/mark.txt (MARK, so images with different marks
# share no layer); the second is a whiteout of /etc/deleted.txt, the third adds
# /etc/second.txt. Its config: User app (uid 1000), WorkingDir /home/app,
# Env GREETING=hello and PATH, Cmd ["/bin/sh"].
# With TOP, the image of MARK made before gets a fourth layer adding
# /etc/top.txt (TOP) and is pushed as REPO:TAG: an image that shares its
# first three layers with the other. With OCI_TEST_BIG_MB=N in the
# environment, the first layer also holds /big.bin, N MiB of random bytes.
# OCI_TEST_EXTRA_BINS adds more of the host's binaries (space-separated names).
set -euo pipefail
work=$1 registry=$2 ref=$3 mark=${4:-plain} top=${5:-}
root=$work/root-$mark
layout=$work/layout-$mark
if [ -n "$top" ]; then
  umoci tag --image "$layout:img" "top-$top"
  echo "$top" >"$work/top-$mark-$top"
  umoci insert --image "$layout:top-$top" "$work/top-$mark-$top" /etc/top.txt
  skopeo copy --quiet --dest-tls-verify=false "oci:$layout:top-$top" "docker://$registry/$ref"
  exit 0
fi
rm -rf "$root" "$layout"
mkdir -p "$root"/{bin,etc,home/app,tmp,proc,sys,dev,root}
chmod 1777 "$root/tmp"
# shellcheck disable=SC2086  # the extra names are split on purpose
for b in sh cat id env ls stat ${OCI_TEST_EXTRA_BINS:-}; do
  p=$(command -v "$b")
  cp -L "$p" "$root/bin/$b"
  ldd "$p" | grep -o '/[^ ]*' | while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
done
printf 'root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\napp:x:1000:\n' >"$root/etc/group"
echo one >"$root/etc/first.txt"
echo doomed >"$root/etc/deleted.txt"
echo "$mark" >"$root/etc/mark.txt"
if [ -n "${OCI_TEST_BIG_MB:-}" ]; then
  head -c "${OCI_TEST_BIG_MB}M" /dev/urandom >"$root/big.bin"
fi
chown 1000:1000 "$root/home/app"

umoci init --layout "$layout"
umoci new --image "$layout:img"
umoci insert --image "$layout:img" "$root" /
umoci insert --image "$layout:img" --whiteout /etc/deleted.txt
second=$work/second-$mark
echo two >"$second"
umoci insert --image "$layout:img" "$second" /etc/second.txt
umoci config --image "$layout:img" --config.user=app --config.workingdir=/home/app \
  --config.env=GREETING=hello --config.env=PATH=/bin --config.cmd=/bin/sh
skopeo copy --quiet --dest-tls-verify=false "oci:$layout:img" "docker://$registry/$ref"
