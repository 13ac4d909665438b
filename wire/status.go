// The status report: `gputop status` asks a running gputop for it with a
// status frame (Status, frames.go), and gputop answers with a reply that
// holds it. Without a
// running gputop the command makes one from a single NVML reading. Its
// JSON is `gputop status --json`'s output, documented in docs/status.md
// and docs/status.schema.json (a test holds the schema to these structs).

package wire

// StatusVersion is the version of the status report's form, its
// "version": a field added keeps it, one renamed, removed or given
// another meaning changes it.
const StatusVersion = 1

// Where a status report comes from (StatusReport.Source).
const (
	StatusFromGputop = "gputop" // the running gputop, through its socket
	StatusFromNVML   = "nvml"   // one NVML reading: no agents, rows or OOMs
)

// Bounds on a status report: the newest rows and OOMs it lists, the
// agents (connected ones first, then the most recently ended) and the
// devices of each, the processes of NVML's lists across all devices.
// What is past a bound is counted in its *LeftOut field. With
// store.MaxDevices devices, a full report stays well under
// MaxStatusBytes (a test builds one).
const (
	MaxStatusRows         = 64
	MaxStatusOOMs         = 16
	MaxStatusAgents       = 64
	MaxStatusAgentDevices = 16
	MaxStatusProcesses    = 1024
	// MaxStatusBytes bounds the reply line `gputop status` reads from the
	// socket (a reply longer than MaxFrameBytes is only ever a status
	// report), and what gputop sends.
	MaxStatusBytes = 8 << 20
)

// StatusReport is what gputop knows now: its devices with NVML's memory
// figures, NVML's processes on them, each agent's allocator counters,
// the newest rows with their verdicts, and the newest OOMs explained. A
// list that is empty says why in its *Why field; a list cut at its bound
// counts what it left out in its *LeftOut field.
type StatusReport struct {
	Version          int             `json:"version"`
	Source           string          `json:"source"` // StatusFromGputop or StatusFromNVML
	T                int64           `json:"t"`      // when it was made (ns since the epoch)
	Socket           string          `json:"socket,omitempty"`
	Devices          []StatusDevice  `json:"devices"`
	DevicesWhy       string          `json:"devices_why,omitempty"`
	Processes        []StatusProcess `json:"processes"`
	ProcessesWhy     string          `json:"processes_why,omitempty"`
	ProcessesLeftOut int             `json:"processes_left_out,omitempty"`
	Agents           []StatusAgent   `json:"agents"`
	AgentsWhy        string          `json:"agents_why,omitempty"`
	AgentsLeftOut    int             `json:"agents_left_out,omitempty"`
	Rows             []StatusRow     `json:"rows"`
	RowsWhy          string          `json:"rows_why,omitempty"`
	RowsLeftOut      int             `json:"rows_left_out,omitempty"`
	OOMs             []StatusOOM     `json:"ooms"`
	OOMsWhy          string          `json:"ooms_why,omitempty"`
	OOMsLeftOut      int             `json:"ooms_left_out,omitempty"`
}

// StatusDevice is one GPU. From says where its figures come from: "nvml"
// (the driver: Total, and Used and Free from its newest sample, at UsedT)
// or "agent" (a device only an agent sees: Total is torch's, when its
// hello said it; no Used or Free).
type StatusDevice struct {
	Index int     `json:"index"`
	UUID  string  `json:"uuid,omitempty"`
	Name  string  `json:"name"`
	Host  string  `json:"host,omitempty"` // a remote host's device (gputop --ssh)
	From  string  `json:"from"`
	Total *uint64 `json:"total,omitempty"`
	Used  *uint64 `json:"used,omitempty"`
	Free  *uint64 `json:"free,omitempty"` // total − used − what the driver reserves
	UsedT int64   `json:"used_t,omitempty"`
	Error string  `json:"error,omitempty"` // NVML's error on the device, while it lasts
}

// StatusProcess is one process of NVML's process list of a device, at T.
// PID is its pid on its own host; Key, where it differs, is how gputop
// names it (a remote host's "node1:1234", a pid namespace's "ns3:1").
// Used is absent where the driver would not say.
type StatusProcess struct {
	Dev   int     `json:"dev"`
	PID   int     `json:"pid"`
	Key   string  `json:"key,omitempty"`
	Name  string  `json:"name,omitempty"`
	Used  *uint64 `json:"used,omitempty"`
	T     int64   `json:"t"`
	Agent bool    `json:"agent,omitempty"` // an agent is attached in it
}

// StatusAgent is one agent process, attached or once attached.
type StatusAgent struct {
	PID       int                 `json:"pid"`
	Key       string              `json:"key,omitempty"`
	Name      string              `json:"name"` // argv[0]'s base name
	Torch     string              `json:"torch,omitempty"`
	Connected bool                `json:"connected"`
	EndedAt   int64               `json:"ended_at,omitempty"`
	EndReason string              `json:"end_reason,omitempty"`
	Devices   []StatusAgentDevice `json:"devices"`
	// devices past MaxStatusAgentDevices (in torch's order), not listed
	DevicesLeftOut int `json:"devices_left_out,omitempty"`
}

// StatusAgentDevice is one agent's allocator on one GPU: torch's counters
// from its newest sample (at T; absent before the first), the most torch
// may hold there (Limit, from the newest row or OOM that carried it), the
// newest layout reading and the newest ledger.
type StatusAgentDevice struct {
	Dev          int           `json:"dev"`       // gputop's device index
	TorchDev     int           `json:"torch_dev"` // the process's torch index of it
	T            int64         `json:"t,omitempty"`
	Allocated    *uint64       `json:"allocated,omitempty"`
	Reserved     *uint64       `json:"reserved,omitempty"`
	Peak         *uint64       `json:"peak,omitempty"`
	Inactive     *uint64       `json:"inactive,omitempty"`
	AllocRetries *uint64       `json:"alloc_retries,omitempty"`
	OOMs         *uint64       `json:"ooms,omitempty"`
	Limit        *uint64       `json:"limit,omitempty"`
	Layout       *StatusLayout `json:"layout,omitempty"`
	Ledger       *StatusLedger `json:"ledger,omitempty"`
}

// StatusLayout is the newest layout reading's figures (Layout's).
type StatusLayout struct {
	T              int64   `json:"t"`
	Segments       int     `json:"segments"`
	Blocks         int     `json:"blocks"`
	Reserved       uint64  `json:"reserved"`
	Allocated      uint64  `json:"allocated"`
	FreeInSegments uint64  `json:"free_in_segments"`
	LargestFree    uint64  `json:"largest_free"`
	Fragmentation  float64 `json:"fragmentation"`
	Expandable     bool    `json:"expandable,omitempty"`
}

// StatusLedger is the ledger of the newest row that has one: its parts
// in the summary's order, each with its bytes, or why gputop cannot tell.
type StatusLedger struct {
	Row   uint64       `json:"row"` // the row's id
	T     int64        `json:"t"`
	Parts []StatusPart `json:"parts"`
}

// StatusPart is one part of a ledger.
type StatusPart struct {
	Name  string  `json:"name"`
	Bytes *uint64 `json:"bytes,omitempty"`
	Why   string  `json:"why,omitempty"` // Bytes absent: why
}

// StatusRow is one row of the summary, with its verdict when it is an end
// row. PID 0: the row of no agent process.
type StatusRow struct {
	ID        uint64         `json:"id"`
	T         int64          `json:"t"`
	Label     string         `json:"label"`
	Dev       int            `json:"dev"`
	PID       int            `json:"pid,omitempty"`
	Key       string         `json:"key,omitempty"`
	Source    string         `json:"source"`
	Kind      string         `json:"kind,omitempty"`
	End       bool           `json:"end,omitempty"`
	Allocated *uint64        `json:"allocated,omitempty"`
	Reserved  *uint64        `json:"reserved,omitempty"`
	Peak      *uint64        `json:"peak,omitempty"`
	NVMLUsed  *uint64        `json:"nvml_used,omitempty"`
	NVMLPeak  *uint64        `json:"nvml_peak,omitempty"`
	Limit     *uint64        `json:"limit,omitempty"`
	Verdict   *StatusVerdict `json:"verdict,omitempty"`
}

// StatusVerdict is an end row's verdict: Status is "released", "held",
// "unknown" or "pending" (the CSV's words), Mark its sign.
type StatusVerdict struct {
	Status   string `json:"status"`
	Mark     string `json:"mark"`
	Text     string `json:"text"`
	Basis    string `json:"basis"`
	Baseline string `json:"baseline,omitempty"`
}

// StatusOOM is a CUDA out-of-memory error of an agent process, with the
// summary's explanation of it. Requested, Free and Limit are absent where
// the agent did not say them.
type StatusOOM struct {
	Row         uint64             `json:"row"` // the id of its row
	T           int64              `json:"t"`
	Dev         int                `json:"dev"`
	PID         int                `json:"pid"`
	Key         string             `json:"key,omitempty"`
	Requested   *uint64            `json:"requested,omitempty"`
	Free        *uint64            `json:"free,omitempty"`
	Limit       *uint64            `json:"limit,omitempty"`
	Allocated   uint64             `json:"allocated"`
	Reserved    uint64             `json:"reserved"`
	Peak        uint64             `json:"peak"`
	Explanation *StatusExplanation `json:"explanation"`
}

// StatusExplanation is an OOM's explanation (the summary's OOMExplanation).
type StatusExplanation struct {
	Asked string `json:"asked,omitempty"`
	Cause string `json:"cause"`
	Fix   string `json:"fix,omitempty"`
	Where string `json:"where"`
}
