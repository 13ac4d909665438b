#!/usr/bin/env bash
# Regenerates screenshots/*.png from the real TUI: gputop --demo runs in tmux
# at 160x50 and 80x24 (demo, help; the OOM replay at 120x30), capture-pane keeps its colours, scripts/ansi2svg.py puts
# every character on its terminal cell (the chart's braille comes from a
# fallback font that text-flow renderers such as freeze misplace), and
# rsvg-convert (Debian: librsvg2-bin, with fonts-dejavu-core) makes the PNG.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
go build -o bin/gputop .
mkdir -p screenshots
tmp=$(mktemp -d)
# a tmux server of its own with no configuration: never the user's, whose
# settings would change what the screenshots show
tmux() { command tmux -S "$tmp/tmux" -f /dev/null "$@"; }
trap 'tmux kill-server 2>/dev/null || true; rm -rf "$tmp"' EXIT

shot() { # name [session]
  tmux capture-pane -e -p -t "${2:-gputop-shot}" >"$tmp/$1.ansi"
  python3 scripts/ansi2svg.py "$tmp/$1.ansi" "$tmp/$1.svg"
  rsvg-convert "$tmp/$1.svg" -o "screenshots/$1.png"
  echo "screenshots/$1.png"
}

# the demo opens on its whole run, just after its last end row: the same
# moment at the two sizes the README and docs/keys.md show
tmux new-session -d -s gputop-shot -x 160 -y 50 -- bin/gputop --demo
sleep 1
shot demo
tmux send-keys -t gputop-shot '?'
sleep 1
shot help
tmux kill-session -t gputop-shot
tmux new-session -d -s gputop-shot -x 80 -y 24 -- bin/gputop --demo
sleep 1
shot demo-80x24
tmux send-keys -t gputop-shot '?'
sleep 1
shot help-80x24

# a real CUDA out-of-memory error on an H200 (bench/oom_check.py), explained
tmux new-session -d -s gputop-oom -x 120 -y 30 -- bin/gputop --replay testdata/recordings/h200-oom.gputop
sleep 2
shot oom gputop-oom
