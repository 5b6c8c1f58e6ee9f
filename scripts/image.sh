#!/usr/bin/env bash
# Builds the container image of deploy/Containerfile with buildah: no daemon,
# no registry (`make image`).
#
#   scripts/image.sh [TAG]          (default localhost/ptserve:latest)
#
# 1. The base. The Containerfile builds FROM debian:12; where no registry can
#    be reached, scripts/image.sh makes that base itself: Debian 12 (minbase)
#    from Debian's archive with debootstrap, committed as
#    localhost/ptserve-base:bookworm (made once, kept in buildah's storage).
#    PTS_IMAGE_BASE names another base instead (debian:12 where it can be
#    pulled); PTS_DEBIAN_MIRROR the archive (default deb.debian.org).
# 2. The image: `buildah bud` of deploy/Containerfile, both stages, in a
#    chroot (--isolation chroot: no user namespaces or runc needed), with the
#    vfs storage driver (no overlay mounts needed), in Docker's format, which
#    keeps the HEALTHCHECK (OCI's drops it). Where PTS_TORCH_WHEELS (default
#    /opt/wheels, the build machines' folder of local wheels) holds a torch
#    wheel, that folder is mounted into the build and pip looks there first:
#    no download of the torch wheel. pip in the build trusts the host's CA
#    bundle (PTS_IMAGE_CA, default /etc/ssl/certs/ca-certificates.crt):
#    where a proxy re-signs TLS, its CA is in the host's bundle and not in
#    the build stage's fresh ca-certificates.
# 3. Prints the image's size as buildah stores it.
#
# Root, or rootless buildah with its subordinate ids. Needs buildah and
# debootstrap (scripts/setup.sh installs them).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TAG=${1:-localhost/ptserve:latest}
BASE=${PTS_IMAGE_BASE:-localhost/ptserve-base:bookworm}
MIRROR=${PTS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
WHEELS=${PTS_TORCH_WHEELS:-/opt/wheels}
CA=${PTS_IMAGE_CA:-/etc/ssl/certs/ca-certificates.crt}
# vfs: plain copies of each layer, slower and larger than overlay, but it
# works in any container or VM this may run in (overlay needs a kernel mount
# that nested sandboxes refuse).
B=(buildah --storage-driver vfs)

log() { echo "image.sh: $*" >&2; }

make_base() {
  local work ctr
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  log "base: debootstrap Debian 12 (minbase) from $MIRROR"
  debootstrap --variant=minbase bookworm "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log" >&2; return 1; }
  # What a registry's debian:12 leaves out: the package cache and lists.
  rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/*
  tar -C "$work/rootfs" -cf "$work/base.tar" .
  ctr=$("${B[@]}" from scratch)
  "${B[@]}" add "$ctr" "$work/base.tar" /  # add unpacks a local tarball
  "${B[@]}" config --cmd /bin/bash --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
  "${B[@]}" commit --quiet --rm "$ctr" "$BASE" >/dev/null
  log "base: $BASE"
}

if ! "${B[@]}" inspect --type image "$BASE" >/dev/null 2>&1; then
  case "$BASE" in
    localhost/*) make_base ;;
    *) "${B[@]}" pull --quiet "$BASE" >/dev/null ;;
  esac
fi

args=(--isolation chroot --format docker -f "$ROOT/deploy/Containerfile" -t "$TAG"
      --build-arg "DEBIAN=$BASE")
pip_args=()
if compgen -G "$WHEELS/torch-*.whl" >/dev/null; then
  args+=(--volume "$WHEELS:/wheels:ro")
  pip_args+=(--find-links=/wheels)
  log "torch from the wheels in $WHEELS"
fi
if [ -f "$CA" ]; then
  args+=(--volume "$CA:/host-ca.crt:ro")
  pip_args+=(--cert=/host-ca.crt)
fi
[ ${#pip_args[@]} -eq 0 ] || args+=(--build-arg "TORCH_PIP_ARGS=${pip_args[*]}")
log "buildah bud -t $TAG (the build stage compiles ptserve: minutes)"
"${B[@]}" bud "${args[@]}" "$ROOT"
# An earlier build under the same tag is left untagged: remove it.
"${B[@]}" rmi --prune >/dev/null 2>&1 || true
log "$TAG: $("${B[@]}" images --format '{{.Size}}' "$TAG" | head -1)"
