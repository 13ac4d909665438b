#!/usr/bin/env bash
# gputop on a real GPU: every check and benchmark that needs one, in one go.
#
#   CGO_ENABLED=1 go build -o bin/gputop .      # where Go is (the GPU machine has none)
#   OUT=/some/dir bash scripts/gpu-check.sh     # on the GPU machine, at the repo root
#
# Steps (each runs even when an earlier one failed; each records its status):
#   preflight   bin/gputop, torch + CUDA, the agent (PYTHONPATH=agent), tools
#   train       `gputop record --source all` beside bench/workloads/train_mlp.py:
#               CSV allocated/reserved/peak == torch's own to the byte, After
#               cleanup back at the Training start baseline; NVML used vs
#               nvidia-smi; achieved sample rate; the recording is the demo
#   direct      bench/direct_check.py: the agent finds torch's allocator counters
#               in place; they agree word for word with the stats call after
#               every step and from a second thread; what a copy costs
#   verdict     bench/verdict_check.py: gputop's verdict after cleanup on the
#               article's program (its own cleanup, gputop.cleanup(), a kept
#               tensor), the six leak scenarios (baseline before any matmul),
#               a Hugging Face Trainer and a Lightning run; every row of the
#               article's runs equal to torch's own counters to the byte
#   spikes      20 x 4 GiB for 5 ms beside `gputop record`: all 20 seen? and
#               what a 10 Hz / 4 Hz sampler would have seen
#   sigkill     a training job killed with SIGKILL mid-run: its history stays,
#               an "ended" frame marks it; `gputop snap LABEL` from the shell
#   oom         bench/oom_check.py: real CUDA out-of-memory errors (one request
#               larger than the GPU; the GPU filled with tensors; a request past
#               set_per_process_memory_fraction) reach the
#               recording with torch's allocator state, the CSV as a row, and
#               `gputop export` gives each its cause; the replayed TUI too
#   overhead    bench/overhead.py: the agent's cost, snapshot() latency;
#               bench/agent_tick.py: the GIL it holds per wake-up
#   resource    bench/resource.py: gputop's CPU and RSS over 60 s at 160x50
#   baseline    bench/resource.py --baseline: the TUI of $GPUTOP_BASELINE (an
#               earlier build, default bin/gputop-baseline) and of $GPUTOP in
#               turn beside one job, 4 rounds of 30 s in ABBA order: what a
#               change costs in CPU and RSS, the host's drift on both alike
#   tools       bench/resource.py --tools: issue #29's table (the TUI, record,
#               nvidia-smi -lms 1, nvtop, nvitop each alone beside one job, two
#               rounds in alternating order), RSS by mapping, the TUI's profile;
#               nvtop and nvitop are skipped where not on PATH (carry them; alone:
#               GPU_CHECK_STEPS=tools, a command of its own)
#   holders     bench/holders_scenarios.py and bench/holders_bench.py if present
#   history     bench/history_check.py: six programs with history on whose
#               optimizer imports torch._dynamo while the agent reads layouts
#               (none may break; gputop's thread imports no torch._inductor);
#               history=100000 on vs off on the small
#               CPU-bound and the large GPU-bound loop; an OOM's dump (top frame
#               the allocating line, read by gputop dump-info and by torch's
#               memory_viz loader, named by the recording and the CSV); dumps
#               of a growing `losses` list name its append line as top grower;
#               issue #29's OOM under `gputop run --history 100000` (17 x 8
#               GiB, a script with no gputop in it): the dump's wall and GIL
#               ms against 1 s / 200 ms, its phases, the first block's stack
#               (alone: GPU_CHECK_STEPS=history, or
#               bench/history_check.py --only run)
#   run         bench/run_check.py: `gputop run --no-tui --record --csv` around
#               a script with no gputop in it (bench/workloads/plain.py, with a
#               real OOM), train_mlp.py --no-agent, a Lightning fit and an HF
#               Trainer run with the callbacks: Process start 0 B, every row
#               equal to torch's own counters (read by the script at the same
#               moment), end rows with verdicts, CMD's exit code kept
#   metrics     bench/metrics_check.py: `gputop serve --metrics` beside real
#               training (RANK etc. set as torchrun sets them): every allocator
#               series equal to torch's own counters at each hold, labels
#               right, a 5 ms 4 GiB spike in gputop_nvml_used_max_bytes and a
#               50 ms one in gputop_torch_allocated_max_bytes; bench/resource.py
#               --metrics-compare: the TUI's CPU with the endpoint scraped every
#               second vs without (at most +0.2 points of a core)
#   wheel       the x86_64 wheel in dist/ installed by pip into a venv: its
#               binary samples the real driver at 1 kHz, and bench/run_check.py
#               passes with it (the agent found in the wheel, no PYTHONPATH)
#   ddp         bench/ddp_check.py, on a machine of two GPUs or more: two DDP
#               ranks, each shown the other's GPU as cuda:0; rows, values and
#               processes must land on the right GPU (SKIP with one GPU)
#   forecast    bench/workloads/leak_steps.py under gputop run: a loop that
#               leaks 32 MiB a step under a memory fraction (every forecast
#               within 15% of the step of its OOM) and a stable loop of 120 s
#               (never an OOM forecast), checked by bin/forecastcheck (build
#               it: go build -o bin/forecastcheck ./bench/cmd/forecastcheck)
#   layout      bench/layout_check.py: the allocator's layout the agent sends
#               equals torch's own snapshot at the same moment (a fragmentation
#               OOM to the byte, CUDA graphs' and reduce-overhead's private
#               pools, expandable segments on/off and the settings); a
#               reading's cost at 100 / 10,000 / 100,000 blocks; a compiled
#               transformer's step with the layout read or not, ABBA, within
#               0.5% at the median (last: GPU_CHECK_STEPS=layout runs it alone)
#   ledger      bench/ledger_check.py: each row's ledger (what the process's
#               memory is made of) against the model, the optimizer and a
#               saved-tensor pack hook: the article's program and a compiled
#               GPT-2-small-sized transformer, params / grads / optimizer to
#               the byte, activations of a forward held before backward,
#               unattributed under 1% of NVML's figure; the ledger's cost at a
#               row; steps between rows with and without it, ABBA, within 0.5%
#               (last: GPU_CHECK_STEPS=ledger runs it alone)
#   peak        bench/peak_check.py: a deep MLP under gputop run --record with a
#               "Step N" row before each step and batches going up and down:
#               each interval's peak exact exactly when torch's peak counter
#               rose, "activations and temporaries" within 1% of the bytes a
#               pack hook counted, bounds holding them (needs bin/peakcheck:
#               go build -o bin/peakcheck ./bench/cmd/peakcheck)
#   status      bench/status_check.py: gputop status --json with no gputop running
#               (devices as nvidia-smi says) and from a running gputop record
#               after train_mlp.py (rows equal to torch's counters to the byte;
#               valid against docs/status.schema.json where jsonschema is)
#   fit         bench/fit_check.py: `gputop fit --memory 16GiB` on a nanoGPT-sized
#               transformer and a torchvision ResNet-50 (skipped without
#               torchvision): the predicted largest batch fits when run directly
#               under the same cap, 10% above it does not (or the model's stated
#               error allowed it); gputop fit's time against a bisection's
#               (GPU_CHECK_STEPS=fit runs it alone)
#   frameworks  bench/frameworks_check.py: a flax/optax JAX training loop with
#               XLA's preallocation and without it, a CuPy workload, torch and
#               CuPy in one process: every row's framework figures equal the
#               framework's own (memory_stats(), the pool's) read in the
#               program at the row, to the byte; `gputop run` on the JAX loop
#               with no gputop in it; gputop.cleanup() in a JAX and a CuPy
#               program against their own figures before and after it, to
#               the byte; the agent's overhead on the loop, ABBA,
#               within 0.5% (GPU_CHECK_STEPS=frameworks runs it alone; a check
#               whose framework is not installed is SKIP)
# Writes to $OUT: summary.txt (the table printed last), summary.md,
# results.json (every check's numbers), demo.gputop, logs.tar.gz (all logs,
# recordings and raw results, in one folder named as the work directory, so
# that extracting it anywhere makes that folder). Exit status 0 when every
# check passed or was skipped. Changes no GPU setting.
set -u

cd "$(dirname "$0")/.." || exit 2
REPO=$PWD
OUT=${OUT:-$REPO/gpu-check-out}
GPUTOP=${GPUTOP:-$REPO/bin/gputop}
PY=${PYTHON:-python3}
BUDGET=${BUDGET:-540} # seconds for all steps; a device command may run 600
mkdir -p "$OUT"
W=$(mktemp -d /tmp/gpuchk.XXXXXX)
R=$W/results # one result JSON per check, read by check.py table
L=$W/logs
mkdir -p "$R" "$L"
export PYTHONUNBUFFERED=1
export PYTHONPATH=$REPO/agent${PYTHONPATH:+:$PYTHONPATH}
T0=$(date +%s)
PIDS=() # background processes started here, stopped on exit
TMUXL=${GPU_CHECK_TMUX:-gputop-check} # a private tmux server (another name: two runs side by side)

# ---------------------------------------------------------------- helpers

elapsed() { echo $(($(date +%s) - T0)); }

alive() { # a running (not zombie) process
	[ -e "/proc/$1" ] && ! grep -qE '^[0-9]+ \(.*\) Z' "/proc/$1/stat" 2>/dev/null
}

stop_pid() { # PID [SIGNAL]: ask, then insist
	local pid=$1 sig=${2:-INT} _
	if alive "$pid"; then
		kill -"$sig" "$pid" 2>/dev/null
		for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done
		if alive "$pid"; then
			kill -TERM "$pid" 2>/dev/null
			sleep 1
			kill -KILL "$pid" 2>/dev/null
		fi
	fi
	wait "$pid" 2>/dev/null
	return 0
}

on_exit() {
	local p
	for p in ${PIDS[@]+"${PIDS[@]}"}; do stop_pid "$p"; done
	tmux -L "$TMUXL" kill-server 2>/dev/null
}
trap on_exit EXIT

result() { # NAME STATUS SUMMARY: a result for a check that has no checker of its own
	"$PY" bench/check.py result --out "$R/$1.json" --status "$2" --summary "$3" >/dev/null 2>&1 ||
		printf '{"status": "%s", "summary": "result could not be written"}\n' "$2" >"$R/$1.json"
}

wait_file() { # PATH SECONDS
	local _
	for _ in $(seq $(($2 * 10))); do [ -e "$1" ] && return 0; sleep 0.1; done
	return 1
}

REC_PID=
start_record() { # NAME [ARGS...]: gputop record -o $W/NAME.gputop in the background
	local name=$1
	shift
	"$GPUTOP" record -o "$W/$name.gputop" "$@" >"$L/$name-record.log" 2>&1 &
	REC_PID=$!
	PIDS+=("$REC_PID")
	sleep 0.5
	if ! alive "$REC_PID"; then
		echo "gputop record exited at once:"
		cat "$L/$name-record.log"
		return 1
	fi
}

export_csv() { # RECORDING CSV
	timeout 60 "$GPUTOP" export "$1" --csv "$2" ||
		timeout 60 "$GPUTOP" export --csv "$2" "$1"
}

have_gputop() {
	[ -x "$GPUTOP" ] && return 0
	echo "$GPUTOP not found: build it with CGO_ENABLED=1 go build -o bin/gputop ."
	return 1
}

STEPS=()
step() { # NAME ESTIMATED_SECONDS RESULT...: run step_NAME unless the budget is spent
	local name=$1 est=$2 started rc e
	shift 2
	# GPU_CHECK_STEPS="train holders" runs only those (preflight always runs)
	if [ -n "${GPU_CHECK_STEPS:-}" ] && [ "$name" != preflight ] && [[ " $GPU_CHECK_STEPS " != *" $name "* ]]; then
		for e in "$@"; do result "$e" SKIP "not selected (GPU_CHECK_STEPS=$GPU_CHECK_STEPS)"; done
		STEPS+=("$name:not-selected")
		return
	fi
	if [ $(($(elapsed) + est)) -gt "$BUDGET" ]; then
		echo "== $name: skipped, $(elapsed) s used of $BUDGET"
		for e in "$@"; do result "$e" SKIP "not run: $(elapsed) s of the $BUDGET s budget used"; done
		STEPS+=("$name:skipped")
		return
	fi
	started=$(date +%s)
	echo "== $name (at $(elapsed) s)"
	"step_$name" >"$L/step-$name.log" 2>&1
	rc=$?
	echo "   rc $rc in $(($(date +%s) - started)) s; last lines of logs/step-$name.log:"
	tail -n 6 "$L/step-$name.log" | sed 's/^/   | /'
	# a checker that crashed leaves no result: that must show in the table
	for e in "$@"; do
		[ -s "$R/$e.json" ] || result "$e" FAIL "no result: the step broke (logs/step-$name.log)"
	done
	STEPS+=("$name:$(($(date +%s) - started))s")
}

# ---------------------------------------------------------------- steps

step_preflight() {
	local ok=1 missing="" tool
	date -u +"date: %Y-%m-%d %H:%M:%S UTC"
	uname -a
	nvidia-smi || {
		ok=0
		missing+=" nvidia-smi"
	}
	nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,memory.used --format=csv
	"$PY" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name(0))' || {
		ok=0
		missing+=" torch+CUDA"
	}
	"$PY" -c 'import gputop; print("agent:", gputop.__file__)' || {
		ok=0
		missing+=" agent(PYTHONPATH=agent)"
	}
	if [ -x "$GPUTOP" ]; then
		ls -la "$GPUTOP"
		timeout 10 "$GPUTOP" --help 2>&1 | head -n 40
	else
		ok=0
		missing+=" $GPUTOP"
	fi
	for tool in tmux nvtop nvitop stdbuf; do printf '%s: %s\n' "$tool" "$(command -v "$tool" || echo missing)"; done
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$W/gpu.txt" 2>/dev/null
	"$PY" -c 'import torch; print(torch.__version__)' >"$W/torch.txt" 2>/dev/null
	if [ "$ok" = 1 ]; then
		result 00-preflight PASS "$(head -n1 "$W/gpu.txt"); torch $(cat "$W/torch.txt"); tmux $(command -v tmux >/dev/null && echo yes || echo no)"
	else
		result 00-preflight FAIL "missing:$missing"
	fi
}

step_train() {
	have_gputop || { result 10-allocator-exact FAIL "no gputop binary"; return 1; }
	local sock=$W/train.sock rc smi
	start_record train --source all --socket "$sock" || { result 10-allocator-exact FAIL "gputop record did not start"; return 1; }
	"$PY" bench/nvml_compare.py smi --dir "$W/smi" >"$L/smi.log" 2>&1 &
	smi=$!
	PIDS+=("$smi")
	wait_file "$sock" 10 || echo "socket $sock did not appear within 10 s"
	GPUTOP_SOCKET=$sock timeout 150 "$PY" bench/workloads/train_mlp.py --out "$W/train-torch.json" \
		>"$L/train-job.log" 2>&1
	rc=$?
	sleep 1
	stop_pid "$REC_PID"
	stop_pid "$smi"
	cat "$L/train-job.log"
	if [ "$rc" != 0 ] || [ ! -s "$W/train-torch.json" ]; then
		result 10-allocator-exact FAIL "train_mlp.py exited with $rc (logs/train-job.log)"
	elif ! export_csv "$W/train.gputop" "$W/train-summary.csv"; then
		result 10-allocator-exact FAIL "gputop export failed on the recording"
	else
		cat "$W/train-summary.csv"
		"$PY" bench/check.py train --torch "$W/train-torch.json" --csv "$W/train-summary.csv" \
			--rec "$W/train.gputop" --out "$R/10-allocator-exact.json"
	fi
	if [ -s "$W/train.gputop" ]; then
		"$PY" bench/nvml_compare.py compare "$W/train.gputop" --dir "$W/smi" --out "$R/11-nvml-vs-smi.json"
		"$PY" bench/check.py rate --rec "$W/train.gputop" --out "$R/12-sample-rate.json"
		cp "$W/train.gputop" "$OUT/demo.gputop"
		replay_smoke "$W/train.gputop"
	else
		result 11-nvml-vs-smi FAIL "no recording"
		result 12-sample-rate FAIL "no recording"
	fi
}

replay_smoke() { # RECORDING: the TUI replays it in a real terminal; its screen goes to the logs
	command -v tmux >/dev/null || { result 13-replay-screen SKIP "tmux not installed"; return; }
	tmux -L "$TMUXL" -f /dev/null new-session -d -s replay -x 160 -y 50 \
		"exec $GPUTOP --replay $1 2>$L/replay.stderr"
	sleep 2
	tmux -L "$TMUXL" send-keys -t replay End # the end of the run: every row is in the table
	sleep 2
	tmux -L "$TMUXL" capture-pane -p -t replay >"$L/replay-screen.txt" 2>&1
	tmux -L "$TMUXL" capture-pane -e -p -t replay >"$L/replay-screen.ansi" 2>&1
	tmux -L "$TMUXL" send-keys -t replay h # the holders report train_mlp.py sent after training
	sleep 1
	tmux -L "$TMUXL" capture-pane -p -t replay >"$L/replay-holders.txt" 2>&1
	tmux -L "$TMUXL" kill-session -t replay 2>/dev/null
	cat "$L/replay-screen.txt"
	local label missing=""
	for label in "Training start" "Epoch 5" "Epoch 10" "Training end" "Before cleanup" "After cleanup" "✓ After cleanup: "; do
		grep -q "$label" "$L/replay-screen.txt" || missing="$missing '$label'"
	done
	grep -Eq " in [0-9]+ groups?, " "$L/replay-holders.txt" || missing="$missing 'a holders report after h (logs/replay-holders.txt)'"
	if [ -z "$missing" ]; then
		result 13-replay-screen PASS "gputop --replay at 160x50, at the end of the run: the six rows, the After cleanup verdict and, after h, the holders report on screen ($(grep -o '✓ After cleanup: .*' "$L/replay-screen.txt" | head -1 | sed 's/ *$//' | cut -c1-110); logs/replay-screen.txt)"
	else
		result 13-replay-screen FAIL "gputop --replay at 160x50, at the end of the run: not on screen:$missing (logs/replay-screen.txt, replay.stderr)"
	fi
}

step_direct() {
	timeout 150 "$PY" bench/direct_check.py --results-dir "$R" --name 15-direct
}

step_verdict() {
	have_gputop || { result 16-verdict FAIL "no gputop binary"; return 1; }
	timeout 420 "$PY" bench/verdict_check.py --gputop "$GPUTOP" --results-dir "$R" --name 16-verdict \
		--workdir "$W/verdict"
}

step_spikes() {
	have_gputop || { result 20-spikes FAIL "no gputop binary"; return 1; }
	local smi t_start t_exit
	# nvidia-smi at 1 kHz beside gputop: a gap both see is the driver's
	TZ=UTC nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader -lms 1 >"$W/spikes-smi.csv" 2>/dev/null &
	smi=$!
	PIDS+=("$smi")
	start_record spikes --source nvml || { result 20-spikes FAIL "gputop record did not start"; return 1; }
	sleep 1
	t_start=$(date +%s%N)
	timeout 90 "$PY" bench/workloads/spikes.py --out "$W/spikes.json"
	t_exit=$(date +%s%N)
	sleep 0.5
	stop_pid "$REC_PID"
	stop_pid "$smi"
	printf '{"workload start": %s, "workload exit": %s}\n' "$t_start" "$t_exit" >"$W/spikes-events.json"
	"$PY" bench/nvml_gaps.py --rec "$W/spikes.gputop" --smi "$W/spikes-smi.csv" \
		--events "$W/spikes-events.json" --results-dir "$R"
	if [ -s "$W/spikes.json" ]; then
		"$PY" bench/check.py spikes --spikes "$W/spikes.json" --rec "$W/spikes.gputop" --out "$R/20-spikes.json"
	else
		result 20-spikes FAIL "spikes.py wrote nothing"
	fi
}

step_sigkill() {
	have_gputop || { result 30-sigkill FAIL "no gputop binary"; return 1; }
	local sock=$W/kill.sock job kill_ns
	start_record kill --source all --socket "$sock" || { result 30-sigkill FAIL "gputop record did not start"; return 1; }
	wait_file "$sock" 10
	GPUTOP_SOCKET=$sock "$PY" bench/workloads/train_mlp.py --seconds 300 --out "$W/kill-torch.json" \
		>"$L/kill-job.log" 2>&1 &
	job=$!
	PIDS+=("$job")
	# kill it once its samples reach the recording, and a few seconds into training
	for _ in $(seq 400); do
		grep -F "\"pid\":$job," "$W/kill.gputop" 2>/dev/null | grep -q '"type":"sample"' && break
		alive "$job" || break
		sleep 0.1
	done
	sleep 1
	# a snapshot from the shell while the job runs (this recording is not the demo)
	timeout 10 "$GPUTOP" snap "from the shell" --socket "$sock"
	echo "gputop snap: rc $?"
	sleep 2
	kill_ns=$(date +%s%N)
	kill -KILL "$job"
	wait "$job" 2>/dev/null
	echo "killed pid $job at $kill_ns"
	sleep 2
	stop_pid "$REC_PID"
	cat "$L/kill-job.log"
	"$PY" bench/check.py sigkill --rec "$W/kill.gputop" --pid "$job" --kill-ns "$kill_ns" --out "$R/30-sigkill.json"
	if export_csv "$W/kill.gputop" "$W/kill-summary.csv"; then
		cat "$W/kill-summary.csv"
		local row
		row=$(grep '^from the shell,' "$W/kill-summary.csv" | head -n1)
		if [ -n "$row" ]; then
			result 31-cli-snap PASS "gputop snap LABEL reached the running recorder: $row"
		else
			result 31-cli-snap FAIL "no 'from the shell' row in the CSV of the recording (logs/step-sigkill.log)"
		fi
	else
		result 31-cli-snap FAIL "gputop export failed on the killed job's recording"
	fi
}

step_oom() {
	have_gputop || return 1
	timeout 200 "$PY" bench/oom_check.py --gputop "$GPUTOP" --results-dir "$R" --name 32-oom \
		--workdir "$W/oom"
	local rc=$?
	[ -f "$W/oom/oom.gputop" ] && oom_screen "$W/oom/oom.gputop"
	return $rc
}

oom_screen() { # RECORDING: the TUI explains its OOM under the summary table
	command -v tmux >/dev/null || { result 33-oom-screen SKIP "tmux not installed"; return; }
	tmux -L "$TMUXL" -f /dev/null new-session -d -s oom -x 160 -y 50 \
		"exec $GPUTOP --replay $1 2>$L/oom-replay.stderr"
	sleep 1
	tmux -L "$TMUXL" send-keys -t oom End # the end of the recording, past the OOM
	sleep 2
	tmux -L "$TMUXL" capture-pane -p -t oom >"$L/oom-screen.txt" 2>&1
	tmux -L "$TMUXL" kill-session -t oom 2>/dev/null
	cat "$L/oom-screen.txt"
	if grep -q 'more than the whole GPU' "$L/oom-screen.txt"; then
		result 33-oom-screen PASS "gputop --replay of the OOM recording explains it at 160x50: $(grep -o 'That is more than the whole GPU ([^)]*)' "$L/oom-screen.txt" | head -1) (logs/oom-screen.txt)"
	else
		result 33-oom-screen FAIL "gputop --replay of the OOM recording does not explain it (logs/oom-screen.txt)"
	fi
}

step_overhead() {
	have_gputop || return 1
	timeout 330 "$PY" bench/overhead.py --gputop "$GPUTOP" --workdir "$W/overhead" \
		--out "$W/overhead.json" --results-dir "$R" --prefix 40-
	local rc=$?
	[ "$rc" = 124 ] && echo "overhead.py ran past 330 s"
	# the GIL the agent thread holds per wake-up, timed inside a real agent
	if timeout 45 "$PY" bench/agent_tick.py --gputop "$GPUTOP" --seconds 5 --bare --out "$W/tick.json" >"$L/tick.log" 2>&1; then
		result 41-agent-tick INFO "$(tail -n2 "$L/tick.log" | paste -sd " ")"
	else
		result 41-agent-tick FAIL "bench/agent_tick.py failed: $(tail -n1 "$L/tick.log")"
	fi
	cat "$L/tick.log"
	return "$rc"
}

step_resource() {
	have_gputop || return 1
	timeout 200 "$PY" bench/resource.py --gputop "$GPUTOP" --workdir "$W/resource" \
		--out "$W/resource.json" --results-dir "$R" --prefix 50-
}

step_tools() {
	have_gputop || return 1
	timeout 480 "$PY" bench/resource.py --tools --gputop "$GPUTOP" --workdir "$W/tools" \
		--out "$W/resource-tools.json" --results-dir "$R" --prefix 50- --seconds 20 --warmup 5 --rounds 2
}

step_baseline() {
	have_gputop || return 1
	local base=${GPUTOP_BASELINE:-$REPO/bin/gputop-baseline}
	[ -x "$base" ] || { result 50-resource-tui-baseline SKIP "no baseline build at $base"; return 0; }
	timeout 400 "$PY" bench/resource.py --gputop "$GPUTOP" --baseline "$base" --workdir "$W/baseline" \
		--out "$W/resource-baseline.json" --results-dir "$R" --prefix 50- --seconds 30 --rounds 4
}

step_history() {
	have_gputop || return 1
	timeout 420 "$PY" bench/history_check.py --gputop "$GPUTOP" --results-dir "$R" --workdir "$W/history"
}

step_run() {
	have_gputop || { result 90-run FAIL "no gputop binary"; return 1; }
	timeout 500 "$PY" bench/run_check.py --gputop "$GPUTOP" --python "$PY" --results-dir "$R" \
		--name 90-run --workdir "$W/run"
}

step_metrics() {
	have_gputop || return 1
	timeout 120 "$PY" bench/metrics_check.py --gputop "$GPUTOP" --results-dir "$R" --name 80-metrics \
		--workdir "$W/metrics"
	timeout 200 "$PY" bench/resource.py --gputop "$GPUTOP" --workdir "$W/metrics-resource" \
		--out "$W/resource-metrics.json" --results-dir "$R" --prefix 80- --metrics-compare --seconds 30 --rounds 2
}

step_wheel() {
	# the x86_64 wheel scripts/build-wheels.sh left in dist/ (built with zig
	# cc against glibc 2.17, NVML weak and bound at run time), installed by
	# pip into a venv beside the system's torch: its binary samples the real
	# driver, and gputop run finds the wheel's agent with no PYTHONPATH
	local whl venv rec
	whl=$(ls dist/gputop_profiler-*-manylinux_2_17_x86_64*.whl 2>/dev/null | head -n1)
	if [ -z "$whl" ]; then
		result 98-wheel-nvml SKIP "no x86_64 wheel in dist/ (bash scripts/build-wheels.sh, then carry dist)"
		result 98-wheel-run SKIP "no x86_64 wheel in dist/"
		result 98-wheel-run-exact SKIP "no x86_64 wheel in dist/"
		return 0
	fi
	venv=$W/wheel-venv
	if ! { "$PY" -m venv --system-site-packages "$venv" && "$venv/bin/pip" install -q --no-index --no-deps "$whl"; }; then
		result 98-wheel-nvml FAIL "pip could not install $whl"
		return 1
	fi
	rec=$W/wheel-nvml.gputop
	"$venv/bin/gputop" version
	if timeout 30 "$venv/bin/gputop" record --source nvml -o "$rec" --duration 5s; then
		"$PY" - "$rec" "$R/98-wheel-nvml.json" "$whl" <<'PYEOF'
import json, sys
rec, out, whl = sys.argv[1:4]
n, t0, t1 = {}, None, None
for line in open(rec):
    f = json.loads(line)
    if f.get("type") == "nvml":
        n[f["dev"]] = n.get(f["dev"], 0) + len(f["dt"])
        t = f["t0"] + sum(f["dt"])
        t0 = f["t0"] if t0 is None else min(t0, f["t0"])
        t1 = t if t1 is None else max(t1, t)
secs = (t1 - t0) / 1e9 if n else 0
rates = {d: round(c / secs, 1) for d, c in n.items()} if secs > 0 else {}
ok = bool(rates) and all(r > 900 for r in rates.values())
json.dump({"status": "PASS" if ok else "FAIL", "rates": rates,
           "summary": f"{whl.split('/')[-1]}: gputop record --source nvml 5 s: "
                      + (", ".join(f"device {d} {r} samples/s" for d, r in rates.items()) or "no NVML samples")},
          open(out, "w"))
PYEOF
	else
		result 98-wheel-nvml FAIL "the wheel's gputop record failed (logs/step-wheel.log)"
	fi
	timeout 300 "$PY" bench/run_check.py --gputop "$venv/bin/gputop" --python "$PY" --results-dir "$R" \
		--name 98-wheel-run --workdir "$W/wheel-run"
}

step_ddp() {
	have_gputop || return 1
	timeout 240 "$PY" bench/ddp_check.py --gputop "$GPUTOP" --results-dir "$R" --name 70-ddp \
		--workdir "$W/ddp"
}

step_layout() {
	timeout 260 "$PY" bench/layout_check.py --gputop "$GPUTOP" --results-dir "$R" --workdir "$W/layout"
}

step_forecast() {
	have_gputop || return 1
	local fc=$REPO/bin/forecastcheck d=$W/forecast mode log sum
	if [ ! -x "$fc" ]; then
		echo "$fc not found: build it with go build -o bin/forecastcheck ./bench/cmd/forecastcheck"
		return 1
	fi
	mkdir -p "$d"
	# FORECAST_MODES="stable" FORECAST_STABLE_SECONDS=600: the long stable run alone
	for mode in ${FORECAST_MODES:-leak stable}; do
		log=$L/forecast-$mode.log
		PYTHONPATH=$REPO/agent timeout $((${FORECAST_STABLE_SECONDS:-120} + 80)) "$GPUTOP" run --no-tui --record "$d/$mode.gputop" -- \
			"$PY" bench/workloads/leak_steps.py "$mode" --leak-mib 32 --seconds "${FORECAST_STABLE_SECONDS:-120}" \
			--out "$d/$mode.json" >"$log" 2>&1
		echo "what the workload did: $(cat "$d/$mode.json" 2>/dev/null)" >>"$log"
		if "$fc" -json "$d/$mode-check.json" "$d/$mode.gputop" >>"$log" 2>&1; then
			sum=PASS
		else
			sum=FAIL
		fi
		cat "$log"
		result "37-forecast-$mode" "$sum" "$(grep -v '^[[:space:]]*$' "$log" | tail -n2 | tr '\n' ' ' | cut -c1-300)"
	done
}

step_ledger() {
	timeout 240 "$PY" bench/ledger_check.py --results-dir "$R" --workdir "$W/ledger"
}

step_peak() {
	have_gputop || return 1
	if [ ! -x "$REPO/bin/peakcheck" ]; then
		echo "bin/peakcheck not found: build it with go build -o bin/peakcheck ./bench/cmd/peakcheck"
		return 1
	fi
	timeout 300 "$PY" bench/peak_check.py --gputop "$GPUTOP" --peakcheck "$REPO/bin/peakcheck" \
		--results-dir "$R" --workdir "$W/peak"
}

step_status() {
	have_gputop || return 1
	local sock=$W/status.sock
	# no gputop running: one NVML reading, nvidia-smi's just after it
	"$GPUTOP" status --json --socket "$sock" >"$W/status-nvml.json" 2>"$L/status-nvml.err"
	echo "gputop status (no gputop running): rc $?"
	nvidia-smi --query-gpu=index,uuid,memory.total,memory.used --format=csv,noheader,nounits >"$W/status-smi.csv"
	start_record status --source all --socket "$sock" || { result 99-status FAIL "gputop record did not start"; return 1; }
	wait_file "$sock" 10
	GPUTOP_SOCKET=$sock timeout 120 "$PY" bench/workloads/train_mlp.py --seconds 15 --out "$W/status-torch.json" \
		>"$L/status-job.log" 2>&1
	echo "train_mlp.py: rc $?"
	"$GPUTOP" status --json --socket "$sock" >"$W/status-live.json" 2>"$L/status-live.err"
	echo "gputop status (gputop running): rc $?"
	"$GPUTOP" status --socket "$sock" | head -n 40
	stop_pid "$REC_PID"
	"$PY" bench/status_check.py --nvml "$W/status-nvml.json" --smi "$W/status-smi.csv" \
		--live "$W/status-live.json" --torch "$W/status-torch.json" --results-dir "$R"
}

step_fit() {
	timeout 280 "$PY" bench/fit_check.py --gputop "$GPUTOP" --results-dir "$R" --workdir "$W/fit"
}

step_frameworks() {
	have_gputop || return 1
	timeout 500 "$PY" bench/frameworks_check.py --gputop "$GPUTOP" --python "$PY" --results-dir "$R" \
		--workdir "$W/frameworks"
}

step_holders() {
	local left rc f name
	# holders_scenarios runs holders_bench itself for the cost figure
	for f in holders_scenarios; do
		name=60-$f
		if [ ! -f "bench/$f.py" ]; then
			result "$name" SKIP "bench/$f.py not present"
			continue
		fi
		left=$((BUDGET - $(elapsed) - 5))
		if [ "$left" -lt 20 ]; then
			result "$name" SKIP "not run: $(elapsed) s of the $BUDGET s budget used"
			continue
		fi
		[ "$left" -gt 150 ] && left=150
		echo "== bench/$f.py (limit $left s)"
		GPUTOP_CHECK_DIR=$W timeout "$left" "$PY" "bench/$f.py" >"$L/$f.log" 2>&1
		rc=$?
		cat "$L/$f.log"
		if [ "$rc" = 0 ]; then
			result "$name" PASS "bench/$f.py passed: $(grep -v '^[[:space:]]*$' "$L/$f.log" | tail -n1 | cut -c1-150)"
		else
			result "$name" FAIL "bench/$f.py exited with $rc: $(grep -v '^[[:space:]]*$' "$L/$f.log" | tail -n1 | cut -c1-150)"
		fi
	done
}

# ---------------------------------------------------------------- run

echo "gputop GPU check: work dir $W, results to $OUT, budget $BUDGET s"
step preflight 20 00-preflight
step train 75 10-allocator-exact 11-nvml-vs-smi 12-sample-rate 13-replay-screen
step direct 30 15-direct
step verdict 150 16-verdict 16-verdict-exact
step spikes 30 20-spikes 21-nvml-gaps
step sigkill 40 30-sigkill 31-cli-snap
step oom 60 32-oom 33-oom-screen
step overhead 350 40-overhead-cpu 40-overhead-gpu 40-overhead-compiled 40-snapshot-latency 40-snapshot-visible 40-stats-call 41-agent-tick
step resource 150 50-resource-tui 50-resource-record 50-resource-nvtop 50-resource-nvitop
step baseline 330 50-resource-tui-baseline
step tools 470 50-resource-tools
step holders 25 60-holders_scenarios
step history 200 95-history-imports 95-history-overhead-cpu 95-history-overhead-gpu 96-history-oom-dump 97-history-labelled-dump 98-history-run-oom-dump
step run 150 90-run 90-run-exact
step ddp 60 70-ddp
step metrics 200 80-metrics-exact 80-metrics-spike 80-resource-tui-metrics
step wheel 120 98-wheel-nvml 98-wheel-run 98-wheel-run-exact
step forecast 200 37-forecast-leak 37-forecast-stable
step layout 190 35-layout-oom 35-layout-explained 35-layout-graphs 35-layout-expandable 35-layout-cost 35-layout-overhead
step ledger 180 36-ledger-article 36-ledger-exact 36-ledger-activations 36-ledger-unattributed 36-ledger-cost 36-ledger-overhead
step fit 240 38-fit-gpt 38-fit-resnet 38-fit-time
step peak 120 39-peak
step status 60 99-status
step frameworks 270 39-frameworks-versions 39-frameworks-jax 39-frameworks-jax-noprealloc 39-frameworks-cupy 39-frameworks-torch-cupy \
	39-frameworks-run 39-frameworks-cleanup-jax 39-frameworks-cleanup-cupy 39-frameworks-overhead

# ---------------------------------------------------------------- report

{
	echo "gputop GPU check, $(date -u +'%Y-%m-%d %H:%M UTC'), $(cat "$W/gpu.txt" 2>/dev/null | head -n1), torch $(cat "$W/torch.txt" 2>/dev/null)"
	echo "command: OUT=... bash scripts/gpu-check.sh   ($(elapsed) s; steps: ${STEPS[*]})"
	echo
} >"$W/summary.txt"
"$PY" bench/check.py table "$R" --md "$W/summary.md" --json "$OUT/results.json" >>"$W/summary.txt" 2>&1
status=$?
if [ ! -s "$OUT/results.json" ]; then # the table could not be made: show the raw results
	cat "$R"/*.json >>"$W/summary.txt" 2>/dev/null
	status=1
fi
cp "$W/summary.txt" "$OUT/summary.txt"
cp "$W/summary.md" "$OUT/summary.md" 2>/dev/null
on_exit
tar -czf "$OUT/logs.tar.gz" --exclude='*.sock' -C "$(dirname "$W")" "$(basename "$W")" 2>/dev/null
if [ "$(stat -c %s "$OUT/logs.tar.gz" 2>/dev/null || echo 0)" -gt 15000000 ]; then
	# too big to come back from the device: keep the logs, drop the recordings
	tar -czf "$OUT/logs.tar.gz" --exclude='*.sock' --exclude='*.gputop' --exclude='*.pickle' --exclude='*.html' -C "$(dirname "$W")" "$(basename "$W")" 2>/dev/null
fi
echo
cat "$W/summary.txt"
exit $status
