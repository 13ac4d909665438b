// Package wire defines the newline-delimited JSON frames that cross the agent
// socket and that make up a recording. One set of types serves both, so a
// recording is the same stream a live gputop saw, plus NVML batches.
//
// Every frame is one JSON object on one line with a "type" field. Times are
// integers: nanoseconds since the Unix epoch. Memory is in bytes. A value that
// is absent (no agent, no NVML) is left out of the object, never written as 0.
package wire

// Version is the protocol and recording version. A peer announcing a different
// major version is refused with a reason.
const Version = 1

// MaxFrameBytes is the longest line accepted from a peer; a recording's
// lines may be longer (recording.MaxLineBytes).
const MaxFrameBytes = 1 << 20

// Frame types.
const (
	// agent -> gputop
	TypeHello   = "hello"   // first frame of an agent connection
	TypeSample  = "sample"  // allocator counters of one device
	TypeMark    = "mark"    // gputop.snapshot(label) / phase boundary / end row from code
	TypeOOM     = "oom"     // CUDA out of memory, with the allocator state then
	TypeHolders = "holders" // answer to a holders request
	TypeBye     = "bye"     // clean end of an agent connection
	TypeLayout  = "layout"  // the caching allocator's structure on one device

	// shell -> gputop (gputop snap LABEL, gputop status); answered with TypeReply
	TypeSnap   = "snap"
	TypeStatus = "status"
	// gputop -> peer
	TypeReply   = "reply"   // answer to snap or status, or a reason before closing
	TypeRequest = "request" // ask the agent for something (e.g. holders)

	// recording only
	TypeRecording = "recording" // first line of a recording file
	TypeDevice    = "device"    // one NVML device
	TypeNVML      = "nvml"      // a batch of NVML device samples, delta-encoded
	TypeSamples   = "samples"   // a batch of one agent device's samples, delta-encoded
	TypeProcs     = "procs"     // NVML per-process usage on one device
	TypeDevError  = "device_error"
	TypeRow       = "snapshot" // a summary row; the string "snapshot" is kept from earlier versions so old recordings load
	TypeEnded     = "ended"    // an agent process disconnected without bye
	TypeRowHeld   = "held"     // an end row's attribution, arrived after the row
	TypeRowEdit   = "row_edit" // a row renamed or deleted by the user
	TypeHost      = "host"     // a remote host of a multi-host view connected or disconnected
)

// Head is decoded first to learn a frame's type.
type Head struct {
	Type string `json:"type"`
	V    int    `json:"v,omitempty"`
}

// AgentDevice is one CUDA device as the agent's torch sees it.
type AgentDevice struct {
	Index int    `json:"index"` // torch device index (after CUDA_VISIBLE_DEVICES)
	UUID  string `json:"uuid"`  // "GPU-..." as NVML reports it; maps index -> NVML device
	Name  string `json:"name"`
	Total uint64 `json:"total,omitempty"`
}

// Hello opens an agent connection. Rank, LocalRank and WorldSize are the
// RANK, LOCAL_RANK and WORLD_SIZE environment variables as the process had
// them (torchrun, Slurm and Accelerate set them), sent as text: gputop reads
// them (Hello.Place), so one rule judges every agent and recording. Job is
// TORCHELASTIC_RUN_ID, else SLURM_JOB_ID.
type Hello struct {
	Type      string        `json:"type"`
	V         int           `json:"v"`
	PID       int           `json:"pid"`
	Host      string        `json:"host,omitempty"`
	Argv      []string      `json:"argv,omitempty"`
	Torch     string        `json:"torch,omitempty"`
	Python    string        `json:"python,omitempty"`
	RateHz    float64       `json:"rate_hz,omitempty"`
	Rank      string        `json:"rank,omitempty"`
	LocalRank string        `json:"local_rank,omitempty"`
	WorldSize string        `json:"world_size,omitempty"`
	Job       string        `json:"job,omitempty"`
	Devices   []AgentDevice `json:"devices"`
	T         int64         `json:"t"`
	// History is torch's allocation history's max_entries while the agent
	// records it (gputop.attach(history=N)); 0: off. HistoryError says why
	// history that was asked for is not on (torch without it, the
	// cudaMallocAsync backend).
	History      int    `json:"history,omitempty"`
	HistoryError string `json:"history_error,omitempty"`
}

// Sample holds torch's own allocator counters for one device at time T:
// allocated_bytes.all.current, reserved_bytes.all.current,
// allocated_bytes.all.peak (peak since torch's last reset_peak_memory_stats).
type Sample struct {
	Type         string `json:"type"`
	PID          int    `json:"pid,omitempty"` // filled in by gputop (recording)
	T            int64  `json:"t"`
	Dev          int    `json:"dev"` // torch device index
	Allocated    uint64 `json:"allocated"`
	Reserved     uint64 `json:"reserved"`
	Peak         uint64 `json:"peak"`
	ReservedPeak uint64 `json:"reserved_peak,omitempty"`
	Inactive     uint64 `json:"inactive,omitempty"` // inactive_split_bytes.all.current
	AllocRetries uint64 `json:"alloc_retries,omitempty"`
	OOMs         uint64 `json:"ooms,omitempty"`
	Dropped      uint64 `json:"dropped,omitempty"` // samples the agent dropped so far (queue full)
}

// Samples is a recording's batch of one agent process's samples of one
// (torch) device, encoded as NVML batches are: T0 is the first sample's time,
// DT each sample's time minus the previous one's (DT[0] = 0); every counter
// list holds the first value, then differences from the previous value
// (wrapping 64-bit arithmetic). The lists of Sample's optional counters are
// left out when every sample had 0 there. Agents send single sample frames;
// only recordings hold batches.
type Samples struct {
	Type         string  `json:"type"`
	PID          int     `json:"pid"`
	Dev          int     `json:"dev"`
	T0           int64   `json:"t0"`
	DT           []int64 `json:"dt"`
	Allocated    []int64 `json:"allocated"`
	Reserved     []int64 `json:"reserved"`
	Peak         []int64 `json:"peak"`
	ReservedPeak []int64 `json:"reserved_peak,omitempty"`
	Inactive     []int64 `json:"inactive,omitempty"`
	AllocRetries []int64 `json:"alloc_retries,omitempty"`
	OOMs         []int64 `json:"ooms,omitempty"`
	Dropped      []int64 `json:"dropped,omitempty"`
}

// Counters lists a sample's counters in Samples' order; SetCounters is its
// inverse.
func (s Sample) Counters() [8]uint64 {
	return [8]uint64{s.Allocated, s.Reserved, s.Peak, s.ReservedPeak, s.Inactive, s.AllocRetries, s.OOMs, s.Dropped}
}

// SetCounters sets the counters from a list in Counters' order.
func (s *Sample) SetCounters(c [8]uint64) {
	s.Allocated, s.Reserved, s.Peak, s.ReservedPeak = c[0], c[1], c[2], c[3]
	s.Inactive, s.AllocRetries, s.OOMs, s.Dropped = c[4], c[5], c[6], c[7]
}

// Lists returns pointers to a batch's counter lists in Counters' order.
func (b *Samples) Lists() [8]*[]int64 {
	return [8]*[]int64{&b.Allocated, &b.Reserved, &b.Peak, &b.ReservedPeak, &b.Inactive,
		&b.AllocRetries, &b.OOMs, &b.Dropped}
}

// DevStats is the allocator state of one device inside a mark or an oom.
// Held is there on an end row's mark: what the agent's holders walk, run
// right after the counters were read, found still allocated.
type DevStats struct {
	Dev       int    `json:"dev"`
	Allocated uint64 `json:"allocated"`
	Reserved  uint64 `json:"reserved"`
	Peak      uint64 `json:"peak"`
	Held      *Held  `json:"held,omitempty"`
	// the allocator's structure read with the counters, when the agent
	// could read it within its bound
	Layout *Layout `json:"layout,omitempty"`
	// what the allocated bytes are made of, when the agent's ledger walk
	// ran for this row
	Ledger *Ledger `json:"ledger,omitempty"`
	// with allocation history on: the blocks live at the highest point
	// since the process's previous row, by the line that allocated them
	PeakLines *PeakLines `json:"peak_lines,omitempty"`
	// the most torch may hold on the device (its total, or less under
	// torch.cuda.set_per_process_memory_fraction), when the agent can
	// tell before an OOM does: a forecast's limit
	Limit uint64 `json:"limit,omitempty"`
	// NoTorch: torch has not initialised this device in the process
	// (a JAX or CuPy device); Allocated, Reserved and Peak are then 0
	// and mean nothing, and its row has no torch figures.
	NoTorch bool `json:"no_torch,omitempty"`
	// Frameworks: the other frameworks' figures on the device at the
	// mark (JAX, CuPy), each in its own names.
	Frameworks []Framework `json:"frameworks,omitempty"`
}

// Held is what one process still had allocated on one device at an end
// row, by what holds it. Each of the caching allocator's live blocks is
// counted once: as owned by a tensor storage the holders walk reached from
// Python, as one of torch's own cuBLAS/cuBLASLt workspaces (found by the
// size torch gives them, and owned by no tensor), or as neither, so
// Allocated = Python + Internal + Unaccounted. When the walk could not run
// or was cut short, Skipped says why and the figures say nothing.
type Held struct {
	T           int64         `json:"t"`                    // when the walk started
	Allocated   uint64        `json:"allocated"`            // bytes in the allocator's live blocks then
	Python      uint64        `json:"python"`               // in blocks of tensors that Python objects hold
	Internal    uint64        `json:"internal"`             // in torch's cuBLAS/cuBLASLt workspaces
	Workspaces  int           `json:"workspaces,omitempty"` // how many workspaces Internal counts
	Unaccounted uint64        `json:"unaccounted"`          // in blocks that neither explains
	Top         []HolderGroup `json:"top,omitempty"`        // the largest holders of Python's share, largest first
	Skipped     string        `json:"skipped,omitempty"`    // why there is no attribution; "" when there is
	TookMS      float64       `json:"took_ms,omitempty"`
}

// Mark kinds.
const (
	MarkSnapshot   = "snapshot"
	MarkPhaseStart = "phase_start"
	MarkPhaseEnd   = "phase_end"
)

// Mark is a labelled moment sent from the training code. End says whether
// its rows end a run and get a verdict (true, false); left out, the label
// decides (IsEndLabel).
type Mark struct {
	Type  string     `json:"type"`
	PID   int        `json:"pid,omitempty"`
	T     int64      `json:"t"`
	Label string     `json:"label"`
	Kind  string     `json:"kind,omitempty"` // MarkSnapshot when empty
	End   *bool      `json:"end,omitempty"`
	Devs  []DevStats `json:"devs"`
	Dump  *Dump      `json:"dump,omitempty"` // the memory dump taken at this moment, when one was asked for
}

// Dump is a memory dump an agent wrote: what torch's
// torch.cuda.memory._snapshot() returns (its allocation history with the
// stacks of every live block), pickled as pytorch.org/memory_viz opens it.
// Error says why none was written (Path empty then). The cost is the
// training process's: TookMS from the call to the file in place (the sum
// of Phases' wall times), GILMS of it with the GIL held (the CPU time of
// the threads that took and pickled it; the write lets the GIL go).
type Dump struct {
	Path    string      `json:"path,omitempty"`
	Bytes   uint64      `json:"bytes,omitempty"`
	TookMS  float64     `json:"took_ms,omitempty"`
	GILMS   float64     `json:"gil_ms,omitempty"`
	Error   string      `json:"error,omitempty"`
	Removed []string    `json:"removed,omitempty"` // older dumps removed to stay within the bounds
	Phases  *DumpPhases `json:"phases,omitempty"`  // where TookMS went; absent from agents before it
}

// DumpPhases is where a dump's time went, in milliseconds, in order: the
// wait for another dump being written, importing what torch's snapshot
// needs (torch._inductor, which its first snapshot with stacks imports
// where the program has not: 0 or absent when nothing was imported),
// torch's _snapshot() (TakeCPUMS of
// it the calling thread's CPU time: a TakeMS far above it is time spent
// waiting, for the GIL or a lock, not torch working), the pickling, the
// write, the fsync, and placing the file (its link, the run's bounds).
type DumpPhases struct {
	WaitMS    float64 `json:"wait_ms"`
	ImportMS  float64 `json:"import_ms,omitempty"`
	TakeMS    float64 `json:"take_ms"`
	TakeCPUMS float64 `json:"take_cpu_ms"`
	PickleMS  float64 `json:"pickle_ms"`
	WriteMS   float64 `json:"write_ms"`
	FsyncMS   float64 `json:"fsync_ms"`
	PlaceMS   float64 `json:"place_ms"`
}

// OOM reports a CUDA out-of-memory error seen by the allocator.
type OOM struct {
	Type      string `json:"type"`
	PID       int    `json:"pid,omitempty"`
	T         int64  `json:"t"`
	Dev       int    `json:"dev"`
	Requested uint64 `json:"requested,omitempty"` // bytes the failed allocation asked for
	Free      uint64 `json:"free,omitempty"`      // device free bytes as torch saw them
	// the most torch may hold on the device: its total memory, or less under
	// torch.cuda.set_per_process_memory_fraction
	Limit     uint64 `json:"limit,omitempty"`
	Allocated uint64 `json:"allocated"`
	Reserved  uint64 `json:"reserved"`
	Peak      uint64 `json:"peak"`
	Dump      *Dump  `json:"dump,omitempty"` // the dump written from torch's OOM observer
	// the allocator's structure read in torch's OOM observer, before the
	// error reached the program: what the failed request did not fit in
	Layout *Layout `json:"layout,omitempty"`
	// Framework, where the OOM was another framework's (FrameworkJAX:
	// XLA's RESOURCE_EXHAUSTED; FrameworkCuPy: its pool's
	// OutOfMemoryError), not torch's: Allocated, Reserved and Peak are
	// then 0 and mean nothing; Error is the framework's message (at most
	// MaxOOMErrorBytes), Frameworks its figures when the error reached the
	// agent.
	Framework  string      `json:"framework,omitempty"`
	Error      string      `json:"error,omitempty"`
	Frameworks []Framework `json:"frameworks,omitempty"`
	// DevUnknown: a framework's error named no device and the process
	// uses the framework on several: Dev (and Frameworks' figures) is
	// the first of them, not known to be the one that ran out
	DevUnknown bool `json:"dev_unknown,omitempty"`
	// Row is the id of the table row the store made of this frame (see
	// Row.ID): filled in by gputop, so that a recording's row_edit of
	// that row names it. An agent's is ignored.
	Row uint64 `json:"row,omitempty"`
	// torch's total memory of the device, from the process's hello: never
	// sent, the store fills it in. A Limit below it is a memory fraction;
	// a Limit equal to it is no limit at all, though it is less than
	// NVML's total (the driver keeps some memory back from CUDA).
	DeviceTotal uint64 `json:"-"`
}

// HolderGroup is one kind of reference keeping CUDA memory alive.
type HolderGroup struct {
	Kind     string   `json:"kind"`  // parameters, optimizer_state, gradients, variable, container, autograd_graph, ipython_history, traceback, torch_internal, other
	Name     string   `json:"name"`  // e.g. "model1", "optimizer (Adam)", "losses"
	Bytes    uint64   `json:"bytes"` // each storage counted once
	Tensors  int      `json:"tensors"`
	Examples []string `json:"examples,omitempty"` // "float32[512, 1000]"
	Hint     string   `json:"hint,omitempty"`
}

// Holders answers a holders request (or is sent by gputop.holders()).
// Held is the same walk's attribution of the device's allocated bytes.
type Holders struct {
	Type    string        `json:"type"`
	PID     int           `json:"pid,omitempty"`
	T       int64         `json:"t"`
	ID      int           `json:"id,omitempty"`
	Dev     int           `json:"dev"`
	Total   uint64        `json:"total"`   // bytes in all groups
	Skipped int           `json:"skipped"` // objects the walk skipped (raised, freed meanwhile)
	Groups  []HolderGroup `json:"groups"`
	TookMS  float64       `json:"took_ms,omitempty"`
	Held    *Held         `json:"held,omitempty"`
	Ledger  *Ledger       `json:"ledger,omitempty"` // the same walk's ledger of the device
	// the frameworks beside torch on the device at the walk (JAX, CuPy):
	// their figures and, in each one's Held, what holds its memory
	// (JAX: its live arrays by the variable holding them, else by shape
	// and dtype)
	Frameworks []Framework `json:"frameworks,omitempty"`
}

// Bye ends an agent connection cleanly.
type Bye struct {
	Type string `json:"type"`
	PID  int    `json:"pid,omitempty"`
	T    int64  `json:"t"`
}

// Snap asks a running gputop for a labelled snapshot (gputop snap LABEL).
// End as in Mark: left out, the label decides.
type Snap struct {
	Type  string `json:"type"`
	V     int    `json:"v"`
	Label string `json:"label"`
	End   *bool  `json:"end,omitempty"`
}

// Status asks a running gputop for its status report (`gputop status`);
// gputop answers with a Reply whose Status holds it, and closes the
// connection.
type Status struct {
	Type string `json:"type"`
	V    int    `json:"v"`
}

// Reply answers a snap or a status frame (Status: the report), or tells
// a peer why it is being disconnected.
type Reply struct {
	Type   string        `json:"type"`
	OK     bool          `json:"ok"`
	Error  string        `json:"error,omitempty"`
	Status *StatusReport `json:"status,omitempty"`
}

// Request asks an agent for something. What is "holders" (answered with
// a Holders frame) or "dump" (a memory dump: answered with a Mark
// labelled LabelDump carrying it); Dev, when set, is the torch device
// index whose allocated bytes a holders answer's held attributes (else the
// process's current device).
type Request struct {
	Type string `json:"type"`
	What string `json:"what"`
	ID   int    `json:"id"`
	Dev  *int   `json:"dev,omitempty"`
}

// Recording is the first line of a recording file.
type Recording struct {
	Type    string `json:"type"`
	V       int    `json:"v"`
	Start   int64  `json:"start"`
	Host    string `json:"host,omitempty"`
	Tool    string `json:"tool,omitempty"`
	RateHz  int    `json:"rate_hz,omitempty"`
	Comment string `json:"comment,omitempty"`
	// Hosts are the remote hosts of a multi-host view (gputop --ssh), in
	// the order of their ids (Host frames): the first is id 1.
	Hosts []string `json:"hosts,omitempty"`
}

// Device describes one NVML device in a recording.
type Device struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	UUID  string `json:"uuid"`
	Name  string `json:"name"`
	Total uint64 `json:"total"`
	Host  string `json:"host,omitempty"` // a remote host's device: the host's name (a Host frame's)
	// Memory says what its NVML figures (total, used) measure: absent for
	// the GPU's own memory, MemorySystem for the system's memory, on a
	// unified-memory GPU whose NVML memory query answers not supported.
	Memory string `json:"memory,omitempty"`
}

// MemorySystem is a Device's Memory when its figures are the system's
// memory (/proc/meminfo: MemTotal, and MemTotal − MemAvailable used), as
// on GH200 or GB10, where the GPU has no memory of its own to report.
const MemorySystem = "system"

// Host is a remote host of a multi-host view (gputop --ssh) connecting or
// disconnecting. Its processes' pids in the frames that follow hold its ID
// (store.HostPID: ID<<22 | the host's pid).
type Host struct {
	Type   string `json:"type"`
	ID     int    `json:"id"`
	Name   string `json:"name"`
	Up     bool   `json:"up"`
	Reason string `json:"reason,omitempty"` // why it disconnected
	// Limited says what the bounds on one host's stream kept out of the
	// view (package remote), e.g. devices past the host's share.
	Limited string `json:"limited,omitempty"`
	T       int64  `json:"t"`
}

// NVML is a batch of device samples. T0 is the first sample's time; DT holds
// each sample's time minus the previous one's (DT[0] = 0). Used and Reserved
// hold the first value, then differences from the previous value, so a
// steady device costs one "0" per sample.
type NVML struct {
	Type     string  `json:"type"`
	Dev      int     `json:"dev"`
	T0       int64   `json:"t0"`
	DT       []int64 `json:"dt"`
	Used     []int64 `json:"used"`
	Reserved []int64 `json:"reserved,omitempty"`
}

// Proc is one process's NVML-reported usage on a device.
type Proc struct {
	PID  int    `json:"pid"`
	Name string `json:"name,omitempty"`
	Used uint64 `json:"used"`
	// UsedUnknown: the driver would not say (e.g. without privileges); Used is then meaningless.
	UsedUnknown bool `json:"used_unknown,omitempty"`
}

// Procs lists the processes using one device at time T.
type Procs struct {
	Type  string `json:"type"`
	T     int64  `json:"t"`
	Dev   int    `json:"dev"`
	Procs []Proc `json:"procs"`
}

// DevError records an NVML error on one device.
type DevError struct {
	Type  string `json:"type"`
	T     int64  `json:"t"`
	Dev   int    `json:"dev"`
	Error string `json:"error"`
}

// Row is one resolved row of the summary table. Allocator fields come from
// the agent (torch's counters) and are absent without one; NVMLUsed and
// NVMLPeak come from the driver.
//
// An end row (End) gets a verdict, from what it carries: Held, the agent's
// attribution of the process's allocated bytes (Awaiting while gputop waits
// for the agent's answer to its request); on a row of no agent process
// (PID 0), Procs, the processes NVML listed on the device then that have no
// agent.
//
// ID is the row's identity, given by the store that made the row and
// unique among its rows: two rows may share time, label, process and
// device. A recording's rows carry it so that its row_edit frames name one
// row; it is a name inside one recording, and a store that loads the row
// gives it an id of its own. 0: none (rows recorded before ids).
type Row struct {
	Type      string  `json:"type"`
	ID        uint64  `json:"id,omitempty"`
	T         int64   `json:"t"`
	Label     string  `json:"label"`
	Dev       int     `json:"dev"`
	PID       int     `json:"pid,omitempty"`
	Source    string  `json:"source"`         // key, agent, cli, oom
	Kind      string  `json:"kind,omitempty"` // marker kind when not a plain snapshot: phase_start, phase_end, oom
	Allocated *uint64 `json:"allocated,omitempty"`
	Reserved  *uint64 `json:"reserved,omitempty"`
	Peak      *uint64 `json:"peak,omitempty"`
	NVMLUsed  *uint64 `json:"nvml_used,omitempty"`
	NVMLPeak  *uint64 `json:"nvml_peak,omitempty"` // highest NVML used since the previous row on this device
	End       bool    `json:"end,omitempty"`
	Held      *Held   `json:"held,omitempty"`
	Awaiting  bool    `json:"awaiting,omitempty"`
	Procs     *[]Proc `json:"procs,omitempty"`
	Dump      *Dump   `json:"dump,omitempty"`   // the memory dump taken with the row
	Layout    *Layout `json:"layout,omitempty"` // the allocator's structure at the row (its own t says when it was read)
	Ledger    *Ledger `json:"ledger,omitempty"` // what the allocated bytes were made of at the row
	// the blocks live at the highest point since the previous row, by
	// allocating line (allocation history on)
	PeakLines *PeakLines `json:"peak_lines,omitempty"`
	Limit     *uint64    `json:"limit,omitempty"` // the most torch may hold on the device then (DevStats.Limit)
	// the other frameworks' figures on the device at the row (JAX, CuPy)
	Frameworks []Framework `json:"frameworks,omitempty"`
	OOM        *OOM        `json:"-"` // on the row of an oom frame (OOMRow): that frame
}

// Requests an agent answers, and the label of the row a dump request makes.
const (
	RequestHolders = "holders"
	RequestDump    = "dump"
	LabelDump      = "dump"
)

// A CUDA out-of-memory error is a row of the summary table and a marker:
// of this source, marker kind and label, made from the oom frame, which it
// carries. It is no frame of its own: a recording holds the oom frame, and
// loading it makes the row again.
const (
	SourceOOM = "oom"
	MarkOOM   = "oom"
	LabelOOM  = "OOM"
)

// OOMRow is the table row of oom frame o (its PID set) on gputop's device
// dev, with the allocator state the frame reported.
func OOMRow(o OOM, dev int) Row {
	al, re, pk := o.Allocated, o.Reserved, o.Peak
	r := Row{Type: TypeRow, T: o.T, Label: LabelOOM, Dev: dev, PID: o.PID, Source: SourceOOM,
		Kind: MarkOOM, Allocated: &al, Reserved: &re, Peak: &pk, Dump: o.Dump, Layout: o.Layout, OOM: &o}
	if o.Framework != "" { // JAX's or CuPy's: no torch figures, its own
		r.Allocated, r.Reserved, r.Peak, r.Frameworks = nil, nil, nil, o.Frameworks
	}
	return r
}

// IsOOMRowOf reports whether s is the row OOMRow makes of pid's oom frame at
// t (as a row read back from elsewhere, without the frame in it).
func (s Row) IsOOMRowOf(pid int, t int64) bool {
	return s.Source == SourceOOM && s.Label == LabelOOM && s.PID == pid && s.T == t
}

// Ended marks an agent process that vanished without saying bye.
type Ended struct {
	Type   string `json:"type"`
	PID    int    `json:"pid"`
	T      int64  `json:"t"`
	Reason string `json:"reason,omitempty"`
}

// RowHeld gives the end row of process PID on (store) device Dev at time T
// its attribution when that came after the row: the agent's answer to
// gputop's request, or why there is none (the request failed, the process
// ended first).
type RowHeld struct {
	Type string `json:"type"`
	PID  int    `json:"pid"`
	T    int64  `json:"t"`
	Dev  int    `json:"dev"`
	Held *Held  `json:"held"`
	// the same walk's ledger, when the agent sent one
	Ledger *Ledger `json:"ledger,omitempty"`
	// the same walk's frameworks (Holders.Frameworks), whose Held an end
	// row of a JAX or CuPy process takes
	Frameworks []Framework `json:"frameworks,omitempty"`
}

// RowEdit is what the user did to a row in the TUI: renamed it
// (Rename, the new label) or deleted it (Delete). The row is the one whose
// ID is ID, which is the row of process PID (0: the row of no agent
// process) on (store) device Dev at time T, labelled Label when edited. A
// recording holds it after the row, so a replay and an export show the
// rows as the user left them. Without an ID (recordings made before rows
// had ids) it names the first row, in time order, that T, Dev, PID and
// Label fit.
type RowEdit struct {
	Type   string `json:"type"`
	ID     uint64 `json:"id,omitempty"`
	T      int64  `json:"t"`
	Dev    int    `json:"dev"`
	PID    int    `json:"pid,omitempty"`
	Label  string `json:"label"`
	Rename string `json:"rename,omitempty"`
	Delete bool   `json:"delete,omitempty"`
}

// Layout is the caching allocator's structure on one device of one
// process: what decides whether the next request fits, where the counters
// only say how much. Read by the agent from torch's memory snapshot
// without traces (segments and their blocks), at T. FreeInSegments is
// reserved − allocated: the bytes torch's cache holds free; LargestFree is
// its largest free block, the most one request can take from the cache
// without new memory from the driver. Fragmentation is 1 − LargestFree ÷
// FreeInSegments (Fragmentation). Pools splits the figures by memory pool
// (the default pool, each CUDA-graph private pool, each torch.cuda.MemPool),
// at most MaxPools, largest reserved first; PoolsCut counts those left out.
type Layout struct {
	T              int64          `json:"t"`
	Segments       int            `json:"segments"`
	Blocks         int            `json:"blocks"`
	Reserved       uint64         `json:"reserved"`
	Allocated      uint64         `json:"allocated"`
	FreeInSegments uint64         `json:"free_in_segments"`
	LargestFree    uint64         `json:"largest_free"`
	Expandable     bool           `json:"expandable,omitempty"` // its segments are expandable
	Pools          []Pool         `json:"pools,omitempty"`
	PoolsCut       int            `json:"pools_cut,omitempty"`
	Settings       *AllocSettings `json:"settings,omitempty"`
	TookMS         float64        `json:"took_ms,omitempty"` // what the reading cost the process
}

// Pool kinds.
const (
	PoolDefault = "default" // the device's default pool, torch's id (0, 0)
	PoolGraph   = "graph"   // a CUDA graph's private pool (torch.cuda.graph, mode="reduce-overhead")
	PoolMemPool = "mempool" // a torch.cuda.MemPool the program made
	PoolPrivate = "private" // a pool other than the default that the agent could not tell apart
)

// Pool is one memory pool's share of a Layout. ID is torch's pool id as
// "A,B" (the default pool "0,0").
type Pool struct {
	Kind        string `json:"kind"`
	ID          string `json:"id"`
	Segments    int    `json:"segments"`
	Reserved    uint64 `json:"reserved"`
	Allocated   uint64 `json:"allocated"`
	LargestFree uint64 `json:"largest_free"`
}

// AllocSettings is the caching allocator's configuration in force in the
// process. From says where it comes from: "torch" (torch reported it)
// or "env" (parsed from the variable Env, which torch did not report:
// what was asked for, not necessarily what is in force). Conf is that
// variable's value as set ("" when unset). Expandable is
// expandable_segments when known; Items the other settings, by torch's
// names, at most MaxSettings.
type AllocSettings struct {
	From       string    `json:"from"`
	Env        string    `json:"env,omitempty"`
	Conf       string    `json:"conf,omitempty"`
	Expandable *bool     `json:"expandable_segments,omitempty"`
	Items      []Setting `json:"items,omitempty"`
}

// Setting is one allocator setting by torch's name, its value as text.
type Setting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// LayoutReading is the frame an agent sends with a Layout of device Dev,
// at its own low rate; Skipped, when set, says why there is no reading
// this time (the reading would have cost more than the agent's bound, the
// torch version has no snapshot, the call raised) and the Layout is empty.
type LayoutReading struct {
	Type    string `json:"type"`
	PID     int    `json:"pid,omitempty"`
	Dev     int    `json:"dev"`
	Skipped string `json:"skipped,omitempty"`
	Layout
}

// Fragmentation is 1 − LargestFree ÷ FreeInSegments as a fraction of 1:
// how much of torch's free cache one request cannot use at once. 0 when
// nothing is free.
func (l Layout) Fragmentation() float64 {
	if l.FreeInSegments == 0 || l.LargestFree >= l.FreeInSegments {
		return 0
	}
	return 1 - float64(l.LargestFree)/float64(l.FreeInSegments)
}

// GraphPoolsBytes is what the pools other than the default one reserve.
func (l Layout) GraphPoolsBytes() uint64 {
	var n uint64
	for _, p := range l.Pools {
		if p.Kind != PoolDefault {
			n += p.Reserved
		}
	}
	return n
}

// Ledger is what one process's memory on one device is made of at a row,
// from the agent's walk of the live CUDA tensors. Each live block of
// torch's caching allocator is counted once (shared storages, views and a
// tensor reached twice count once), in the first part that claims it in
// this order: Params (parameters and buffers of live nn.Modules), Grads
// (their .grad), Optimizer (every torch.optim.Optimizer's state),
// Activations (tensors saved for backward by autograd graphs still
// alive), OtherTensors (every other live CUDA tensor), Workspace (torch's
// cuBLAS/cuBLASLt workspaces, which no tensor owns). Allocated and Reserved
// are torch's counters when the walk ran; what the parts leave of
// Allocated is Unattributed, and Reserved − Allocated is torch's cache
// (CachedFree). What is outside torch (NVML's figure for the process −
// Reserved) is gputop's to add, from the driver. Uncounted says, in a few
// words each, what the walk could not count (tensors freed during it, a
// meta tensor, a module on another device); Skipped why there is no
// ledger at all (the walk would take longer than its bound; the figures
// are then zero).
type Ledger struct {
	T            int64    `json:"t"`
	Allocated    uint64   `json:"allocated"`
	Reserved     uint64   `json:"reserved"`
	Params       uint64   `json:"params"`
	Grads        uint64   `json:"grads"`
	Optimizer    uint64   `json:"optimizer"`
	Activations  uint64   `json:"activations"`
	OtherTensors uint64   `json:"other_tensors"`
	Workspace    uint64   `json:"workspace"`
	Uncounted    []string `json:"uncounted,omitempty"`
	Skipped      string   `json:"skipped,omitempty"`
	TookMS       float64  `json:"took_ms,omitempty"`
}

// PeakLines is, with allocation history on, the highest allocated point
// of torch's trace since the process's previous row (or since the trace's
// first entry) and the blocks live there grouped by the line that
// allocated them: the first frame outside torch and gputop, as dump-info
// puts a block down to its line. The agent replays the trace backwards
// from the blocks live at the row. At most MaxPeakLines lines, the
// largest; the others are summed in More (MoreLines of them); Unknown is
// bytes whose allocation the trace does not hold (before its first
// entry, or no stack). Skipped says why there are none (history off, the
// work over its bound).
type PeakLines struct {
	T         int64      `json:"t"`         // when the peak was (ns): the row's own moment when nothing since rose higher
	Allocated uint64     `json:"allocated"` // bytes in blocks live then
	Lines     []PeakLine `json:"lines"`
	More      uint64     `json:"more,omitempty"`
	MoreLines int        `json:"more_lines,omitempty"`
	Unknown   uint64     `json:"unknown,omitempty"`
	Skipped   string     `json:"skipped,omitempty"`
	TookMS    float64    `json:"took_ms,omitempty"`
}

// PeakLine is the blocks one line allocated, live at the peak.
type PeakLine struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Func   string `json:"func"`
	Bytes  uint64 `json:"bytes"`
	Blocks int    `json:"blocks"`
}

// MaxPeakLines bounds the lines of a PeakLines kept; those past it are
// counted in More and MoreLines.
const MaxPeakLines = 8

// Ledger parts, in the order they are shown and as Prometheus's `part`
// label names them; the CSV's columns are these with "_bytes".
const (
	PartParams       = "params"
	PartGrads        = "grads"
	PartOptimizer    = "optimizer"
	PartActivations  = "activations"
	PartOtherTensors = "other_tensors"
	PartWorkspace    = "workspace"
	PartCachedFree   = "cached_free"
	PartOutsideTorch = "outside_torch"
	PartUnattributed = "unattributed"
)

// Counted is the bytes the tensor parts and the workspaces account for.
func (l Ledger) Counted() uint64 {
	return l.Params + l.Grads + l.Optimizer + l.Activations + l.OtherTensors + l.Workspace
}

// Unattributed is what none of the parts accounts for of Allocated.
func (l Ledger) Unattributed() uint64 { return l.Allocated - min(l.Counted(), l.Allocated) }

// CachedFree is what torch's cache held free: Reserved − Allocated.
func (l Ledger) CachedFree() uint64 { return l.Reserved - min(l.Allocated, l.Reserved) }

// OutsideTorch is what NVML counts for the process beyond torch's
// reserved bytes (CUDA context, NCCL, cuDNN/cuBLAS handles, other
// libraries): false when NVML's figure is below them (it lags the
// allocator by up to a sample) or unknown.
func (l Ledger) OutsideTorch(nvmlProcess uint64) (uint64, bool) {
	if nvmlProcess < l.Reserved {
		return 0, false
	}
	return nvmlProcess - l.Reserved, true
}

// TypeFramework is the frame of another framework's allocator figures
// (JAX's XLA allocator, CuPy's memory pool) on one device, beside torch's
// samples.
const TypeFramework = "framework"

// Frameworks, as an agent names them.
const (
	FrameworkJAX  = "jax"
	FrameworkCuPy = "cupy"
)

// Figures gputop knows a framework's allocator by; a framework maps its
// own counters onto them (JAX's bytes_in_use is the in-use figure) and
// keeps its own name beside each (Figure.Native). A figure the framework
// does not report is absent, never 0.
const (
	FigInUse    = "in_use"   // bytes of live arrays (JAX bytes_in_use, CuPy used_bytes)
	FigReserved = "reserved" // bytes the allocator holds from the device (JAX pool_bytes / bytes_reserved, CuPy total_bytes)
	FigPeak     = "peak"     // the most in use so far (JAX peak_bytes_in_use)
	FigLimit    = "limit"    // the most the allocator may hold (JAX bytes_limit, CuPy get_limit())
)

// Bounds on what an agent may say of its frameworks (wire.Check).
const (
	MaxFrameworks     = 4  // frameworks on one device
	MaxFigures        = 16 // figures of one framework
	MaxFrameworkText  = 64 // bytes of a framework's or a figure's name
	MaxFrameworkHeld  = 16 // holder groups of one framework's end-row attribution
	MaxFrameworkNotes = 8  // settings of one framework
)

// Figure is one of a framework's counters: Of is gputop's figure it
// stands for (FigInUse ...), "" for one only the framework has
// (largest_alloc_size, num_allocs, the pinned pool); Native the
// framework's own name for it.
type Figure struct {
	Of     string `json:"of,omitempty"`
	Native string `json:"native"`
	Value  uint64 `json:"value"`
}

// Framework is one framework's allocator on one device of a process, in
// its own figures. Settings are those of its allocator in force in the
// process (JAX: the XLA_PYTHON_CLIENT_* variables as the process had
// them). Held, on an end row only, is what holds its memory as the
// framework can tell (JAX: its live arrays grouped by shape and dtype,
// or by the variable that holds them; CuPy: its arrays in use).
type Framework struct {
	Name     string        `json:"name"`
	Figures  []Figure      `json:"figures"`
	Settings []Setting     `json:"settings,omitempty"`
	Held     []HolderGroup `json:"held,omitempty"`
}

// FrameworkReading is the frame an agent sends with the figures of each
// framework other than torch on device Dev (torch's index; the device's
// own ordinal where torch has not initialised it), at the agent's send
// interval.
type FrameworkReading struct {
	Type       string      `json:"type"`
	PID        int         `json:"pid,omitempty"`
	T          int64       `json:"t"`
	Dev        int         `json:"dev"`
	Frameworks []Framework `json:"frameworks"`
}
