#!/bin/bash
# What 1 kHz sampling costs on this machine, and gputop's share of a core
# under different runtime settings. Run from the repo root on the GPU
# machine, after building here (where Go and gcc are):
#
#   CGO_ENABLED=1 go build -o bin/gputop .
#   go build -o bin/wakeloop ./bench/cmd/wakeloop
#   gcc -O2 -o bin/wakeups bench/probe/wakeups.c -ldl
#   gcc -O2 -o bin/nvml_rss bench/probe/nvml_rss.c -ldl
#   OUT=/some/dir bash bench/probe/run.sh
#
# Prints a table (also $OUT/probe.txt):
#   - what NVML's initialisation and each query cost (bench/probe/nvml_rss.c);
#   - a bare 1 kHz loop in C, with and without one NVML memory query per tick
#     (the floor of gputop's native sampling thread);
#   - the same loop in Go at GOMAXPROCS 1, 2, 4 and all cores;
#   - `gputop record` (headless) for 12 s at GOMAXPROCS 2 and all cores;
#   - the TUI at 160x50 in tmux beside bench/workloads/train_mlp.py for 20 s,
#     at its defaults and at GOMAXPROCS=all and GOGC=100 (Go's defaults).
# CPU% is of one core, from /proc/PID/stat, split by thread name (Go's
# threads are "gputop", the sampling thread "gputop-nvml"); RSS from
# /proc/PID/status.
set -u
cd "$(dirname "$0")/../.."
O=${OUT:-/tmp/gputop-probe}
mkdir -p "$O"
T=$O/probe.txt
: >"$T"
PY=${PYTHON:-python3}
ALL=$(nproc)

threads() { # PID -> "name ticks" per thread name
	for t in /proc/$1/task/*; do echo "$(cat "$t/comm") $(awk '{print $14+$15}' "$t/stat")"; done |
		awk '{a[$1]+=$2} END {for (k in a) print k, a[k]}' | sort
}

meas() { # NAME SECONDS PID
	local t0 t1 s0 s1 hz
	hz=$(getconf CLK_TCK)
	threads "$3" >"$O/th0"
	t0=$(awk '{print $14+$15}' /proc/$3/stat); s0=$(date +%s.%N)
	sleep "$2"
	threads "$3" >"$O/th1"
	t1=$(awk '{print $14+$15}' /proc/$3/stat); s1=$(date +%s.%N)
	echo "$1: cpu $("$PY" -c "print(round(($t1-$t0)/$hz/($s1-$s0)*100,2))")% of a core, RSS $(awk '/VmRSS/{print $2}' /proc/$3/status) KiB" | tee -a "$T"
	join "$O/th0" "$O/th1" | while read -r n a b; do
		echo "   thread $n: $("$PY" -c "print(round(($b-$a)/$hz/($s1-$s0)*100,2))")%" | tee -a "$T"
	done
}

echo "== NVML's own cost" | tee -a "$T"
bin/nvml_rss | tee -a "$T"

echo "== bare 1 kHz loops, 10 s" | tee -a "$T"
bin/wakeups sleep 10 | tee -a "$T"
bin/wakeups nvml 10 | tee -a "$T"
for g in 1 2 4 "$ALL"; do GOMAXPROCS=$g bin/wakeloop -seconds 10 | tee -a "$T"; done

echo "== gputop record, 12 s" | tee -a "$T"
for g in 2 "$ALL"; do
	GOMAXPROCS=$g bin/gputop record -o "$O/probe-$g.gputop" --duration 14s >"$O/record-$g.log" 2>&1 &
	p=$!; sleep 1; meas "record GOMAXPROCS=$g" 12 $p; wait $p
done

echo "== TUI 160x50 beside training, 20 s each" | tee -a "$T"
export GPUTOP_SOCKET=$O/probe.sock
PYTHONPATH=agent "$PY" bench/workloads/train_mlp.py --seconds 120 --socket "$GPUTOP_SOCKET" >"$O/train.log" 2>&1 &
job=$!
tui() { # NAME ENV...
	local name=$1 pid; shift
	tmux -L gputop-probe -f /dev/null kill-server 2>/dev/null
	tmux -L gputop-probe -f /dev/null new-session -d -x 160 -y 50 \
		"exec env $* bin/gputop --socket $GPUTOP_SOCKET 2>$O/tui-$name.err"
	sleep 4
	pid=$(tmux -L gputop-probe list-panes -F '#{pane_pid}')
	meas "TUI $name" 20 "$pid"
	tmux -L gputop-probe capture-pane -p >"$O/screen-$name.txt"
	tmux -L gputop-probe kill-server
	sleep 0.5
}
tui defaults
tui "GOMAXPROCS=$ALL,GOGC=100" GOMAXPROCS=$ALL GOGC=100
tui defaults-again
kill $job 2>/dev/null
wait
echo
cat "$T"
