#!/usr/bin/env bash
# Assembles ptserve's runtime tree: the root filesystem of the container image
# (deploy/Containerfile copies exactly this tree into an empty image), made
# without a container engine.
#
#   scripts/rootfs.sh [--tar FILE.tar.gz] BINARY DEST
#
# DEST (created, must not exist or be empty) receives
#   /usr/bin/ptserve            BINARY, stripped of debug information
#   /usr/bin/tritonserver       a link to it: a pod `command: [tritonserver]` or
#                               a script that starts `tritonserver --model-store=...`
#                               by name runs ptserve
#   /usr/lib/x86_64-linux-gnu/  every shared library ptserve loads, as ldd
#   (or the host's multiarch    resolves them: glibc and the loader, libevent,
#    directory)                 http-parser, jemalloc, jansson, protobuf-c, nghttp2, zlib,
#                               libstdc++, and LibTorch's libraries from the pip torch
#                               ptserve was linked with. That directory is on
#                               the loader's built-in search path, so neither
#                               LD_LIBRARY_PATH nor an ld.so.cache is needed.
#   /bin/busybox, /bin/sh       busybox-static: the image's health check
#                               (`busybox wget`), preStop `busybox sleep`, and
#                               a shell to look around with
#   /etc/passwd, /etc/group     the unprivileged user ptserve (uid/gid 1000)
#   /etc/hosts, /etc/nsswitch.conf, /models (the model repository's mount
#   point), /tmp, and the empty mount points /proc /sys /dev.
#
# --tar also writes the tree as a gzip'd tarball (root-owned entries), the
# size a registry would store for the image's one layer.
#
# Needs: ldd, strip (binutils), busybox-static (scripts/setup.sh installs them).
set -euo pipefail

usage() {
  echo "usage: $0 [--tar FILE.tar.gz] BINARY DEST" >&2
  exit 2
}

TAR=
while [ $# -gt 0 ]; do
  case "$1" in
    --tar) [ $# -ge 2 ] || usage; TAR=$2; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "$0: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -eq 2 ] || usage
BIN=$1
DEST=$2

[ -x "$BIN" ] || { echo "$0: $BIN is not an executable (build ptserve first: make build)" >&2; exit 1; }
if [ -e "$DEST" ] && [ -n "$(ls -A "$DEST")" ]; then
  echo "$0: $DEST exists and is not empty" >&2
  exit 1
fi
BUSYBOX=$(command -v busybox || true)
# ldd fails on a static program: that is the one wanted.
if [ -z "$BUSYBOX" ] || ldd "$BUSYBOX" >/dev/null 2>&1; then
  echo "$0: needs a static busybox (apt-get install busybox-static)" >&2
  exit 1
fi

MULTIARCH=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
LIBDIR=usr/lib/$MULTIARCH

mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
mkdir -p "$DEST"/{usr/bin,"$LIBDIR",etc,models,proc,sys,dev,bin}
install -d -m 1777 "$DEST/tmp"
# Debian's merged /usr: /lib and /lib64 are links into /usr.
ln -s usr/lib "$DEST/lib"
mkdir -p "$DEST/usr/lib64"
ln -s usr/lib64 "$DEST/lib64"

install -m 0755 "$BIN" "$DEST/usr/bin/ptserve"
strip --strip-debug "$DEST/usr/bin/ptserve"
ln -s ptserve "$DEST/usr/bin/tritonserver"

# Every library of the binary, by the name it is asked for (ldd's left
# column, its soname), with symbolic links resolved: "name => path (addr)".
# The loader itself is the line without "=>".
libs=$(ldd "$BIN")
if grep -q "not found" <<<"$libs"; then
  echo "$0: $BIN has unresolved libraries:" >&2
  grep "not found" <<<"$libs" >&2
  exit 1
fi
while read -r name arrow path _; do
  if [ "$arrow" = "=>" ]; then
    [ -n "$path" ] && [ -e "$path" ] || continue # linux-vdso.so.1 has no file
    cp -L "$path" "$DEST/$LIBDIR/$name"
  elif [ -e "$name" ]; then # the program interpreter, e.g. /lib64/ld-linux-x86-64.so.2
    base=$(basename "$name")
    cp -L "$name" "$DEST/$LIBDIR/$base"
    case "$name" in
      /lib64/*) ln -sf "../lib/$MULTIARCH/$base" "$DEST/usr/lib64/$base" ;;
    esac
  fi
done <<<"$libs"
# Debug sections of the libraries are dead weight in an image.
find "$DEST/$LIBDIR" -name '*.so*' -type f -exec strip --strip-debug {} +

install -m 0755 "$BUSYBOX" "$DEST/bin/busybox"
ln -s busybox "$DEST/bin/sh"

cat >"$DEST/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
ptserve:x:1000:1000:ptserve:/models:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/sh
EOF
cat >"$DEST/etc/group" <<'EOF'
root:x:0:
ptserve:x:1000:
nogroup:x:65534:
EOF
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$DEST/etc/hosts"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$DEST/etc/nsswitch.conf"
chmod 0755 "$DEST/models"

bytes=$(du -sb "$DEST" | cut -f1)
echo "rootfs: $DEST, $(find "$DEST" -type f | wc -l) files, $((bytes / 1048576)) MiB"
if [ -n "$TAR" ]; then
  tar --numeric-owner --owner=0 --group=0 -C "$DEST" -czf "$TAR" .
  echo "rootfs: $TAR, $(( $(stat -c %s "$TAR") / 1048576 )) MiB compressed"
fi
