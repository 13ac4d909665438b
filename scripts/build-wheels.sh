#!/usr/bin/env bash
# Builds the wheels of gputop-profiler into dist/:
#   gputop_profiler-V-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
#   gputop_profiler-V-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.whl
#     the gputop binary (installed as the `gputop` command) and the agent
#   gputop_profiler-V-py3-none-any.whl
#     the agent alone, for every other platform
# The binaries are cross-built with cgo and `zig cc` against glibc 2.17
# (scripts/wheels/zig-cc says how NVML stays unbound until run time), and
# each is refused here if it asks for a newer glibc symbol than its tag
# allows or links any NVIDIA library. Tools go into .wheel-tools/ (a venv,
# pinned versions from scripts/wheels/requirements.txt); Go from PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
GLIBC=2.17 # the oldest glibc the binaries run on; manylinux_2_17 (manylinux2014)
TOOLS=.wheel-tools
DIST=dist

die() { echo "build-wheels.sh: $*" >&2; exit 1; }

version=$(sed -n 's/^const version = "\(.*\)"$/\1/p' main.go)
[ -n "$version" ] || die "no 'const version = \"...\"' in main.go"
for f in agent/pyproject.toml agent/gputop/__init__.py; do
	grep -qE "^(version|__version__) = \"$version\"$" "$f" ||
		die "$f does not carry version $version (main.go's): the wheel and gputop version must agree"
done

if [ ! -x "$TOOLS/bin/python" ]; then python3 -m venv "$TOOLS"; fi
"$TOOLS/bin/python" -m pip install -q --disable-pip-version-check -r scripts/wheels/requirements.txt
export ZIG="$PWD/$TOOLS/bin/python -m ziglang" ZIG_GLOBAL_CACHE_DIR="$PWD/$TOOLS/zig-cache"

# Every NVML function go-nvml's nvml.h declares, as a weak symbol.
nvml_h="$(go list -m -f '{{.Dir}}' github.com/NVIDIA/go-nvml)/pkg/nvml/nvml.h"
[ -f "$nvml_h" ] || die "go-nvml's nvml.h not found ($nvml_h): run go mod download"
export NVML_WEAK="$PWD/$TOOLS/nvml_weak.h"
grep -oE 'DECLDIR[^(;]*\bnvml[A-Za-z0-9_]+[[:space:]]*\(' "$nvml_h" | grep -oE 'nvml[A-Za-z0-9_]+' |
	sort -u | sed 's/^/#pragma weak /' >"$NVML_WEAK"
[ "$(wc -l <"$NVML_WEAK")" -gt 100 ] || die "found too few NVML functions in $nvml_h"

build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
rm -rf "$DIST"
mkdir -p "$DIST"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}

# the agent-only wheel, from agent/pyproject.toml, built in a copy of agent/
# so that no earlier build's leftovers (agent/build/) can get into it
cp -r agent "$build/agent"
rm -rf "$build/agent/build" "$build"/agent/*.egg-info
"$TOOLS/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation -w "$build" "$build/agent"
pure="$build/gputop_profiler-$version-py3-none-any.whl"
[ -f "$pure" ] || die "pip wheel made no $pure"
cp "$pure" "$DIST/"

for arch in x86_64 aarch64; do
	case $arch in x86_64) goarch=amd64 ;; aarch64) goarch=arm64 ;; esac
	bin="$build/gputop-$arch"
	ZIG_TARGET=$arch-linux-gnu.$GLIBC CC="$PWD/scripts/wheels/zig-cc" \
		CGO_ENABLED=1 CGO_CFLAGS="-O2 -Wno-deprecated-declarations" GOOS=linux GOARCH=$goarch \
		go build -trimpath -buildvcs=false -ldflags="-s -w -buildid=" -o "$bin" .
	needs=$(objdump -T "$bin" | grep -oE 'GLIBC_[0-9]+\.[0-9]+' | sort -uV | tail -1)
	[ "$(printf '%s\n' "GLIBC_$GLIBC" "$needs" | sort -V | tail -1)" = "GLIBC_$GLIBC" ] ||
		die "$arch binary needs $needs, newer than glibc $GLIBC"
	if objdump -p "$bin" | grep -E 'NEEDED.*(nvidia|cuda)'; then die "$arch binary links an NVIDIA library"; fi
	tag="manylinux_${GLIBC/./_}_$arch.manylinux2014_$arch"
	"$TOOLS/bin/python" scripts/wheels/platform_wheel.py "$pure" "$bin" "$tag" "$DIST" >/dev/null
	echo "build-wheels.sh: $arch binary needs $needs at most: tagged $tag"
done
ls -l "$DIST"
