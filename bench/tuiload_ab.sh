#!/bin/bash
# bench/tuiload_ab.sh OLD NEW [SECONDS] [ROUNDS]: two builds of the same
# program (bench/cmd/tuiload, or gputop itself with CONFIGS set) compared in
# A B B A order, each alone in a 160x50 tmux pane of a tmux server of its
# own: after a 5 s warm-up, its CPU time over SECONDS (default 30) as % of
# one core, RSS, and wake-ups a second (voluntary context switches of all
# its threads). The machine's noise is shared by both builds this way; the
# medians per build and configuration come last.
#
#   go build -o /tmp/tuiload-old ./bench/cmd/tuiload   # on the old commit
#   go build -o /tmp/tuiload-new ./bench/cmd/tuiload
#   bench/tuiload_ab.sh /tmp/tuiload-old /tmp/tuiload-new 30 2
#   CONFIGS="--rate 1000|--rate 100" bench/tuiload_ab.sh bin/gputop-main bin/gputop   # on a GPU
set -euo pipefail
secs=${3:-30} rounds=${4:-1}
# each binary run from a plain copy, as an installed one is: one the Go
# linker has just written maps about 3 MiB more of itself into RSS
bin=$(mktemp -d)
mkdir "$bin/old" "$bin/new"
cp "$1" "$bin/old/" && cp "$2" "$bin/new/"
old="$bin/old/$(basename "$1")" new="$bin/new/$(basename "$2")"
IFS='|' read -r -a configs <<< "${CONFIGS:--rate 1000 -agent|-rate 100 -agent|-rate 1000 -agent -flat}"
tck=$(getconf CLK_TCK)
out=$(mktemp)
switches() { cat /proc/$1/task/*/status 2>/dev/null | awk '/^voluntary_ctxt_switches/{s+=$2} END{print s+0}'; }
one() { # one BIN CONFIG
	local sock=ab$$ pid u0 s0 w0 u1 s1 w1
	tmux -L $sock new-session -d -x 160 -y 50 "exec $1 $2 2>/dev/null"
	sleep 0.5
	pid=$(tmux -L $sock list-panes -F '#{pane_pid}')
	sleep 5
	read -r u0 s0 < <(awk '{print $14, $15}' /proc/$pid/stat); w0=$(switches $pid)
	sleep "$secs"
	read -r u1 s1 < <(awk '{print $14, $15}' /proc/$pid/stat); w1=$(switches $pid)
	local rss; rss=$(awk '/VmRSS/{print $2}' /proc/$pid/status)
	tmux -L $sock kill-server
	sleep 1
	awk -v b="$1" -v c="$2" -v t=$((u1 + s1 - u0 - s0)) -v k="$tck" -v s="$secs" -v r="$rss" -v w=$((w1 - w0)) \
		'BEGIN{printf "%s\t%s\tcpu %.2f%%\trss %.1f MiB\twakeups %.0f/s\n", b, c, 100*t/k/s, r/1024, w/s}' | tee -a "$out"
}
for _ in $(seq "$rounds"); do
	for c in "${configs[@]}"; do
		for b in "$old" "$new" "$new" "$old"; do one "$b" "$c"; done
	done
done
median() { sort -n | awk '{v[NR]=$1} END{print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
echo "medians:"
for b in "$old" "$new"; do
	for c in "${configs[@]}"; do
		rows=$(awk -F'\t' -v b="$b" -v c="$c" '$1==b && $2==c' "$out")
		cpu=$(cut -f3 <<< "$rows" | tr -d 'cpu %' | median)
		wk=$(cut -f5 <<< "$rows" | tr -d 'wakeups /s' | median)
		printf '%s\t%s\tcpu %s%%\twakeups %s/s\t(%d runs)\n' "$b" "$c" "$cpu" "$wk" "$(wc -l <<< "$rows")"
	done
done
rm -rf "$out" "$bin"
