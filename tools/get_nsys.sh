#!/usr/bin/env bash
# Get Nsight Systems (nsys) on a Debian or Ubuntu machine without touching the system's apt setup.
#
# usage: tools/get_nsys.sh [--suite SUITE] [--dest DIR]
#
#   --suite SUITE  distribution suite that carries nsight-systems (default: trixie on Debian,
#                  the machine's own codename on Ubuntu, where the package is in multiverse)
#   --dest DIR     where to unpack (default: tools/nsys in this repository, which git ignores)
#
# Reads the mirror from the machine's own apt sources, fetches nsight-systems-target,
# nsight-systems (for QdstrmImporter, which turns a capture into a .nsys-rep) and the two
# libraries the importer needs (libssh-4, libpfm4) with `apt-get download` into a private
# folder, and unpacks them with `dpkg -x`. Nothing is installed system-wide. Prints the
# directory to put on PATH as its last line. NVIDIA's own build (newer, and the one the
# study used) comes as a .deb or .run from NVIDIA's site; see docs/profiling.md.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dest="$here/nsys"
suite=""

usage() { sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die() { echo "get_nsys: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --suite) suite=${2:?--suite needs a value}; shift 2 ;;
    --dest) dest=${2:?--dest needs a value}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown option: $1" ;;
  esac
done

check_tools() {
  local t
  for t in apt-get dpkg; do
    command -v "$t" >/dev/null || die "$t not found: this script needs a Debian or Ubuntu machine"
  done
  [ "$(dpkg --print-architecture)" = amd64 ] || die "nsight-systems is packaged for amd64 only"
}

# The first http(s) mirror named in the machine's apt sources, in either format.
find_mirror() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    case "$f" in
      *.sources) awk '/^URIs:/ {print $2}' "$f" ;;
      *) awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:\/\//) { print $i; break } }' "$f" ;;
    esac
  done | grep -E '/(debian|ubuntu)/?$' | head -n 1
}

download() {
  local mirror=$1 work=$2 components
  . /etc/os-release
  if [ "${ID:-}" = ubuntu ]; then
    suite=${suite:-$VERSION_CODENAME}; components="main universe multiverse"
  else
    suite=${suite:-trixie}; components="main non-free"
  fi
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs"
  echo "deb ${mirror%/} $suite $components" > "$work/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
              -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o APT::Sandbox::User=root)
  echo "get_nsys: reading $suite ($components) from $mirror" >&2
  apt-get "${opts[@]}" -qq update || die "apt-get update failed for $mirror $suite"
  (cd "$work/debs" && apt-get "${opts[@]}" -qq download nsight-systems-target nsight-systems libssh-4 libpfm4) \
    || die "could not download nsight-systems from $mirror $suite"
}

unpack() {
  local work=$1 deb
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
  for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$dest.tmp"; done
  # nsys looks for QdstrmImporter in host-linux-x64 beside its own (resolved) folder, which Debian
  # installs elsewhere and links from /usr/lib: make the same link inside the unpacked tree
  ln -s ../../nsight-systems/host-linux-x64 "$dest.tmp/usr/lib/x86_64-linux-gnu/nsight-systems/host-linux-x64"
  # `nsys stats` imports nsysstats from its own python/lib, where Debian no longer puts it
  cp "$dest.tmp"/usr/lib/python3/dist-packages/*.py "$dest.tmp/usr/lib/nsight-systems/host-linux-x64/python/lib/"
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
}

main() {
  local bin="$dest/usr/lib/nsight-systems/bin"
  if [ -x "$bin/nsys" ]; then
    echo "get_nsys: already in $dest" >&2
  else
    check_tools
    local mirror
    mirror=$(find_mirror) || true
    [ -n "$mirror" ] || die "no Debian or Ubuntu mirror in /etc/apt/sources.list*"
    work=$(mktemp -d)  # global: the EXIT trap runs after main returns
    trap 'rm -rf "$work"' EXIT
    download "$mirror" "$work"
    unpack "$work"
  fi
  # QdstrmImporter looks for libssh and libpfm beside the system's libraries
  export LD_LIBRARY_PATH="$dest/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  "$bin/nsys" --version >&2 || die "the unpacked nsys does not run"
  echo "$bin"
}

main
