#!/usr/bin/env bash
# The README's first command: builds gputop into bin/ and runs it on the
# demo recording embedded in the binary (no GPU needed). The build's own
# output (Go's module downloads, gcc's warnings from go-nvml's C part) goes
# to bin/build.log, named only when the build fails; what the terminal
# shows is gputop's.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
log=bin/build.log
echo "building gputop into bin/ (the first time takes a minute or two)"
# go-nvml's header marks NVML calls deprecated that gputop never calls:
# gcc's warnings about them are noise (see docs/install.md)
if ! CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations" go build -trimpath -o bin/gputop . >"$log" 2>&1; then
	tail -n 20 "$log" >&2
	echo "scripts/demo.sh: the build failed; its whole output is in $log" >&2
	exit 1
fi
exec bin/gputop --demo "$@"
