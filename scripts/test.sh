#!/usr/bin/env bash
# Runs every test: gofmt and go vet, the Go tests (unit, golden views, NVML
# against go-nvml's mock, the real binary over the real socket and in a real
# tmux terminal), then the Python agent's tests against the real binary,
# then the wheels (scripts/build-wheels.sh) installed and run.
# Python test packages go into .venv (made on first use).
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations

command -v tmux >/dev/null || { echo "test.sh: tmux is needed for the terminal tests (apt-get install tmux)" >&2; exit 1; }
{ [ -x /usr/sbin/sshd ] && command -v ssh >/dev/null; } || { echo "test.sh: sshd and ssh are needed for the --ssh tests (apt-get install openssh-server openssh-client)" >&2; exit 1; }
command -v prometheus >/dev/null && command -v promtool >/dev/null ||
  { echo "test.sh: prometheus and promtool are needed for the metrics test (apt-get install prometheus)" >&2; exit 1; }
command -v jq >/dev/null || { echo "test.sh: jq is needed to run docs/status.md's examples (apt-get install jq)" >&2; exit 1; }

unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then echo "test.sh: gofmt needed on: $unformatted" >&2; exit 1; fi
go vet ./...
go test -count=1 -timeout 30m ./...
# every package again under the race detector
go test -count=1 -timeout 30m -race ./...

if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/python -m pip install -q --disable-pip-version-check -r agent/requirements-test.txt
.venv/bin/python -m pytest -q agent/tests

# the wheels: built into dist/, installed into fresh venvs, run (also on
# Debian 11's glibc 2.31 and, for aarch64, under qemu-user), tags checked
bash scripts/build-wheels.sh
bash scripts/wheels/old-glibc.sh .wheel-tools/glibc-2.31
.venv/bin/python -m pytest -q scripts/wheels/test_wheels.py
