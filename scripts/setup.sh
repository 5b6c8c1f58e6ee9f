#!/usr/bin/env bash
# Installs what ptserve needs to build and test, and nothing else.
#
# Debian/Ubuntu: each package is checked with dpkg-query; only the missing
# ones are installed (apt-get, through sudo when not root). The package
# lists are refreshed only when an install fails or there are none yet.
# macOS: Homebrew equivalents (brew skips what is already installed).
#
# Idempotent and silent when everything is present, so `make run` and
# `make test` can call it every time.
set -euo pipefail

DEB_PACKAGES=(
  build-essential cmake pkg-config
  libevent-dev libjansson-dev libprotobuf-c-dev protobuf-c-compiler zlib1g-dev
  libcmocka-dev
  libgrpc-dev protobuf-compiler protobuf-compiler-grpc python3-grpcio python3-protobuf  # gRPC
  libtorch-dev python3-torch
  python3-numpy python3-pytest python3-requests python3-matplotlib  # matplotlib: bench plots
  python3-prometheus-client  # tests/e2e/test_stats_metrics.py parses /metrics with it
  curl
  clang libclang-rt-dev  # the fuzz drivers: clang and its libFuzzer runtime
)

BREW_PACKAGES=(cmake pkg-config libevent jansson protobuf-c grpc cmocka pytorch)

# A package counts as present only when dpkg says "installed" (a removed
# package whose config files remain is listed by dpkg-query -W too).
deb_missing() {
  local p
  for p in "$@"; do
    if [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | cut -c1-2)" != "ii" ]; then
      echo "$p"
    fi
  done
}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "setup.sh: need root (or sudo) to run: $*" >&2
    return 1
  fi
}

apt_lists_empty() {
  ! compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null
}

setup_debian() {
  local missing
  mapfile -t missing < <(deb_missing "${DEB_PACKAGES[@]}")
  [ "${#missing[@]}" -eq 0 ] && return 0

  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if apt_lists_empty; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  fi
  if ! as_root env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -q --no-install-recommends "${missing[@]}"; then
    # Stale lists name package versions the mirror no longer has.
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}

setup_macos() {
  if ! command -v brew >/dev/null 2>&1; then
    echo "setup.sh: Homebrew is required on macOS (https://brew.sh)" >&2
    return 1
  fi
  local missing=() p
  for p in "${BREW_PACKAGES[@]}"; do
    brew list --versions "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  echo "setup.sh: installing ${missing[*]}"
  brew install "${missing[@]}"
}

# The end-to-end tests need numpy, pytest and requests in the interpreter
# that runs them ($PYTHON, as in the Makefile); Homebrew has no formulae for
# the last two, so pip installs them for this user, and only when missing.
setup_macos_python() {
  local py="${PYTHON:-python3}"
  "$py" -c 'import numpy, pytest, requests' >/dev/null 2>&1 && return 0
  echo "setup.sh: installing numpy pytest requests for $py"
  "$py" -m pip install --user --quiet numpy pytest requests
}

case "$(uname -s)" in
  Linux)
    if command -v dpkg-query >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
      setup_debian
    else
      echo "setup.sh: only Debian/Ubuntu (apt) are automated; install the equivalents of:" >&2
      echo "  ${DEB_PACKAGES[*]}" >&2
      exit 1
    fi
    ;;
  Darwin)
    setup_macos
    setup_macos_python
    ;;
  *)
    echo "setup.sh: unsupported system $(uname -s)" >&2
    exit 1
    ;;
esac
