# Source this on an offline host: unpacks .bundle/debs (made by
# scripts/bundle-deps.sh) into .bundle/root and points pkg-config, CMake and
# the dynamic loader at it. Nothing is installed system-wide.
#   source scripts/use-bundle.sh
_pts_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.bundle"
# Unpacked again when the list of packages changed (a new bundle).
if [ "$(ls "$_pts_root/debs")" != "$(cat "$_pts_root/root/.debs" 2>/dev/null)" ]; then
  rm -rf "$_pts_root/root" && mkdir -p "$_pts_root/root"
  for f in "$_pts_root"/debs/*.deb; do dpkg-deb -x "$f" "$_pts_root/root"; done
  # Development symlinks whose library was left out of the bundle (libssl)
  # point at the host's copy instead.
  for l in "$_pts_root"/root/usr/lib/x86_64-linux-gnu/*.so; do
    [ -L "$l" ] && [ ! -e "$l" ] || continue
    t=$(readlink "$l")
    [ -e "/usr/lib/x86_64-linux-gnu/$t" ] && ln -sf "/usr/lib/x86_64-linux-gnu/$t" "$l"
  done
  ls "$_pts_root/debs" > "$_pts_root/root/.debs"
fi
_lib="$_pts_root/root/usr/lib/x86_64-linux-gnu"
export PATH="$_pts_root/root/usr/bin:$PATH"
export LD_LIBRARY_PATH="$_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Debian's grpc.pc says libdir=/usr/lib although its libraries live in the
# multiarch directory; the linker's own search path covers that.
export LIBRARY_PATH="$_lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
# The .pc files say prefix=/usr; the sysroot makes their -I/-L point inside
# the bundle instead.
export PKG_CONFIG_PATH="$_lib/pkgconfig:$_pts_root/root/usr/share/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$_pts_root/root"
export PKG_CONFIG="$_pts_root/root/usr/bin/pkgconf"
# Libraries without a .pc file (http-parser) are found by CMake's
# find_path / find_library under this prefix.
export CMAKE_PREFIX_PATH="$_pts_root/root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
unset _lib _pts_root
