// Command tuiload runs the real TUI over a live session fed the way a
// real one is, without a GPU: device samples at -rate per second moved in
// every sampler.DrainEvery (as the sampler drains its native thread), a
// process list on each of those ticks (as the sampler refreshes it), the
// achieved rate once a second (a sample or two off, as measured). With
// -agent, a training process's agent on the real socket too: a process of
// its own (tuiload again, with -agent-at), writing 100 samples a second
// every 100 ms in one write, as the agent sends them. With -record FILE
// the session records as `gputop record` (-no-tui: without the TUI,
// `gputop record` itself). What it costs is the Go side of the live TUI
// (or of record) but NVML's calls: run it in a terminal (tmux at 160x50)
// and read its CPU time and RSS from /proc, or set GPUTOP_CPUPROFILE=FILE
// for a profile of the run (GPUTOP_MEMPROFILE=FILE: the allocations of the
// run).
//
//	go build -o bin/tuiload ./bench/cmd/tuiload
//	tmux new -d -x 160 -y 50 bin/tuiload -rate 1000 -agent
//	bin/tuiload -rate 1000 -record /tmp/r.gputop -no-tui
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/sampler"
	"github.com/gputop/gputop/session"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/ui"
	"github.com/gputop/gputop/wire"
)

const gib = 1 << 30

func main() {
	rate := flag.Float64("rate", 1000, "device samples per second")
	flat := flag.Bool("flat", false, "every sample the same (an idle GPU)")
	fps := flag.Int("fps", 15, "the TUI's --fps")
	agent := flag.Bool("agent", false, "a training process's agent on the real socket, 100 samples a second")
	canned := flag.String("canned", "", "Bubble Tea alone, without gputop: \"still\" (one frame of gputop's, the model ticked 4 times a second)\nor \"moving\" (4 frames of gputop's, a new one each second, as the TUI draws new values)")
	agentAt := flag.String("agent-at", "", "be only that agent, on this socket (what -agent runs)")
	record := flag.String("record", "", "record the session to this file, as gputop record or --record")
	noTUI := flag.Bool("no-tui", false, "no TUI (with -record: gputop record)")
	secs := flag.Duration("for", 0, "stop after this long (0: at SIGTERM or SIGHUP)")
	flag.Parse()
	if *agentAt != "" {
		agentFeed(*agentAt, *flat)
		return
	}
	if *canned != "" && *canned != "still" && *canned != "moving" {
		fail(fmt.Errorf("-canned %q: want still or moving", *canned))
	}
	// what the live commands set (sources.go's liveRuntime)
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(25)
	}
	if path := os.Getenv("GPUTOP_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fail(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if path := os.Getenv("GPUTOP_MEMPROFILE"); path != "" {
		defer func() {
			if f, err := os.Create(path); err == nil {
				pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP, os.Interrupt)
	defer cancel()
	if *secs > 0 {
		ctx, cancel = context.WithTimeout(ctx, *secs)
		defer cancel()
	}
	opt := session.Options{Tool: "tuiload"}
	dir, err := os.MkdirTemp("", "tuiload-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "gputop.sock")
	if *agent {
		opt.Agents, opt.Socket = true, sock
	}
	if *record != "" {
		opt.Record = &session.Record{Path: *record, Force: true}
	}
	ses, err := session.Start(ctx, opt)
	if err != nil {
		fail(err)
	}
	in := ses.Ingest()
	in.Device(store.Device{Index: 0, UUID: "GPU-fake", Name: "NVIDIA H200", Total: 141 * gib, Source: "nvml"})
	if *canned == "" {
		go feed(ctx, in, *rate, *flat)
	}
	if *agent && *canned == "" {
		args := []string{"-agent-at", sock}
		if *flat {
			args = append(args, "-flat")
		}
		child := exec.Command(os.Args[0], args...)
		child.Stderr = os.Stderr
		if err := child.Start(); err != nil {
			fail(err)
		}
		defer func() { child.Process.Kill(); child.Wait() }()
	}
	switch {
	case *noTUI:
		<-ctx.Done()
	case *canned != "":
		frames := cannedFrames(in, ses, *rate, *flat)
		ses.Stop() // nothing of gputop's runs beside Bubble Tea from here
		if *canned == "still" {
			frames = frames[:1]
		}
		if _, err := tea.NewProgram(cannedModel{frames: frames}, tea.WithContext(ctx), tea.WithFPS(*fps)).Run(); err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, err)
		}
		return
	default:
		m := ui.New(in, ui.Options{Now: time.Now, FPS: *fps, Log: ses.Log()})
		final, err := tea.NewProgram(m, tea.WithContext(ctx), tea.WithFPS(*fps)).Run()
		if err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, err)
		}
		if fm, ok := final.(ui.Model); ok && os.Getenv("GPUTOP_FRAMESTATS") != "" {
			st := fm.Stats()
			fmt.Fprintf(os.Stderr, "tuiload: %d ticks, %d frames\n", st.Ticks, st.Frames)
		}
	}
	ses.Stop()
}

// cannedFrames is 4 frames of the real TUI at 160x50, drawn half a second
// apart from a session given the last 70 s of samples at rate (the chart
// full, as after a minute), each with new values and the chart moved.
func cannedFrames(in *ingest.Ingest, ses *session.Session, rate float64, flat bool) []string {
	m := tea.Model(ui.New(in, ui.Options{Now: time.Now, Log: ses.Log()}))
	period := int64(float64(time.Second) / rate)
	last := time.Now().Add(-70 * time.Second).UnixNano()
	var frames []string
	for range 4 {
		for now := time.Now().UnixNano(); last+period <= now; last += period {
			in.NVML(0, last+period, used(last+period, flat), 1<<30)
		}
		m, _ = m.Update(tea.WindowSizeMsg{Width: 160, Height: 50})
		frames = append(frames, m.View().Content)
		time.Sleep(500 * time.Millisecond)
	}
	return frames
}

// cannedModel is Bubble Tea with gputop's frames and none of its work: a
// tick 4 times a second, as the TUI's, and each second the next frame.
type cannedModel struct {
	frames []string
	ticks  int
}

type cannedTick struct{}

func cannedTickCmd() tea.Cmd {
	return tea.Tick(250*time.Millisecond, func(time.Time) tea.Msg { return cannedTick{} })
}

func (c cannedModel) Init() tea.Cmd { return cannedTickCmd() }

func (c cannedModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if _, ok := msg.(cannedTick); ok {
		c.ticks++
		return c, cannedTickCmd()
	}
	return c, nil
}

func (c cannedModel) View() tea.View {
	v := tea.NewView(c.frames[c.ticks/4%len(c.frames)])
	v.AltScreen = true
	return v
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "tuiload:", err)
	os.Exit(1)
}

// used is a training job's memory rising and falling within each step,
// unless flat.
func used(t int64, flat bool) uint64 {
	u := uint64(60 * gib)
	if !flat {
		u += uint64((1 + math.Sin(float64(t)/1e8)) * 8 * gib)
	}
	return u
}

// feed adds samples until ctx is done.
func feed(ctx context.Context, in *ingest.Ingest, rate float64, flat bool) {
	period := time.Duration(float64(time.Second) / rate)
	tk := time.NewTicker(sampler.DrainEvery)
	defer tk.Stop()
	rates := time.NewTicker(time.Second)
	defer rates.Stop()
	last := time.Now().UnixNano()
	jitter := []float64{0, -1, 1, 0, -2, 1}
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-rates.C:
			in.Rate(0, rate+jitter[i%len(jitter)]*rate/1000)
		case now := <-tk.C:
			// the process list on the same tick, as the sampler refreshes it
			in.Apply(0, wire.Procs{T: now.UnixNano(), Dev: 0, Procs: []wire.Proc{{PID: os.Getpid(), Used: 60 * gib, Name: "python"}}})
			for t := last + int64(period); t <= now.UnixNano(); t += int64(period) {
				in.NVML(0, t, used(t, flat), 1<<30)
				last = t
			}
		}
	}
}

// agentFeed is a training process's agent on the socket: its hello, then
// 100 samples a second, written every 100 ms in one write, as the agent
// writes them, until gputop goes away.
func agentFeed(sock string, flat bool) {
	var c net.Conn
	var err error
	for range 100 {
		if c, err = net.Dial("unix", sock); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		fail(err)
	}
	defer c.Close()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	now := time.Now().UnixNano()
	if err := enc.Encode(wire.Hello{Type: wire.TypeHello, V: wire.Version, PID: os.Getpid(), Argv: []string{"train.py"},
		Devices: []wire.AgentDevice{{Index: 0, UUID: "GPU-fake", Name: "NVIDIA H200", Total: 141 * gib}}, T: now}); err != nil {
		fail(err)
	}
	tk := time.NewTicker(100 * time.Millisecond)
	defer tk.Stop()
	last := now
	for at := range tk.C {
		for t := last + int64(10*time.Millisecond); t <= at.UnixNano(); t += int64(10 * time.Millisecond) {
			a := used(t, flat) - 2*gib
			enc.Encode(wire.Sample{Type: wire.TypeSample, T: t, Dev: 0, Allocated: a, Reserved: a + gib, Peak: 62 * gib})
			last = t
		}
		if _, err := c.Write(buf.Bytes()); err != nil {
			return
		}
		buf.Reset()
	}
}
