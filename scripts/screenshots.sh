#!/usr/bin/env bash
# Regenerates screenshots/*.png from the real TUI: gputop --demo runs in tmux
# at a fixed size, capture-pane keeps its colours, freeze turns the ANSI
# screen into SVG and rsvg-convert into PNG.
# Needs: tmux, rsvg-convert (Debian: librsvg2-bin), freeze
# (go install github.com/charmbracelet/freeze@v0.2.2), fonts-dejavu-core.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=1 CGO_CFLAGS=-Wno-deprecated-declarations
FREEZE=${FREEZE:-$(command -v freeze || echo "$(go env GOPATH)/bin/freeze")}
go build -o bin/gputop .
mkdir -p screenshots
tmp=$(mktemp -d)
trap 'tmux kill-session -t gputop-shot 2>/dev/null || true; rm -rf "$tmp"' EXIT

shot() { # name
  tmux capture-pane -e -p -t gputop-shot >"$tmp/$1.ansi"
  "$FREEZE" --language ansi --font.family "DejaVu Sans Mono" --window=false \
    --padding 10 --output "$tmp/$1.svg" "$tmp/$1.ansi" >/dev/null
  rsvg-convert "$tmp/$1.svg" -o "screenshots/$1.png"
  echo "screenshots/$1.png"
}

tmux new-session -d -s gputop-shot -x 160 -y 50 -- bin/gputop --demo
sleep 1
tmux send-keys -t gputop-shot End   # the whole run, from its end
tmux send-keys -t gputop-shot -l --  "--"   # zoom out to the whole run
sleep 1
shot demo
tmux send-keys -t gputop-shot h
sleep 1
shot holders
tmux send-keys -t gputop-shot h '?'
sleep 1
shot help
