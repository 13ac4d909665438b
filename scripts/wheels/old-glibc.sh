#!/usr/bin/env bash
# Unpacks Debian 11's glibc (2.31, as on Ubuntu 20.04; older than the 2.34 a
# plain gcc build needs) into DIR/lib, for scripts/wheels/test_wheels.py to
# run the x86_64 wheel's binary on: DIR/lib/ld-linux-x86-64.so.2
# --library-path DIR/lib BINARY. apt fetches the package with a private
# configuration under DIR; the machine's own apt setup is not touched.
# usage: old-glibc.sh DIR
set -euo pipefail
mkdir -p "${1:?usage: old-glibc.sh DIR}"
dir=$(cd "$1" && pwd) # apt takes relative paths as under /etc/apt
lib="$dir/lib"
if [ -x "$lib/ld-linux-x86-64.so.2" ]; then exit 0; fi
mkdir -p "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial"
echo "deb http://deb.debian.org/debian bullseye main" >"$dir/apt/sources.list"
apt=(apt-get -qq -o Dir::Etc::SourceList="$dir/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
	-o Dir::State::Lists="$dir/apt/lists" -o Dir::Cache="$dir/apt/cache" -o Dir::State::status=/dev/null
	-o APT::Sandbox::User=root -o APT::Architecture=amd64)
"${apt[@]}" update
(cd "$dir/apt" && "${apt[@]}" download libc6:amd64)
rm -rf "$dir/root"
dpkg-deb -x "$dir"/apt/libc6_2.31-*_amd64.deb "$dir/root"
ln -sfn root/lib/x86_64-linux-gnu "$lib"
rm -rf "$dir/apt/lists"
"$lib/ld-linux-x86-64.so.2" --library-path "$lib" "$lib/libc.so.6" | grep -q 'release version 2\.31' ||
	{ echo "old-glibc.sh: $dir/root holds no glibc 2.31" >&2; exit 1; }
