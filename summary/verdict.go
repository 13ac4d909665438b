package summary

import (
	"fmt"
	"strings"

	"github.com/gputop/gputop/units"
	"github.com/gputop/gputop/wire"
)

// Status is what a verdict concludes.
type Status int

const (
	Released Status = iota // nothing of the user's holds the memory
	Leaked                 // named Python objects still hold some
	Unknown                // gputop cannot tell, and says why
	Pending                // the holders walk has not answered yet
)

// Mark is the verdict's sign on screen and in `gputop export`.
func (s Status) Mark() string { return [...]string{"✓", "✗", "?", "…"}[s] }

// String names the status in the CSV's verdict column.
func (s Status) String() string { return [...]string{"released", "held", "unknown", "pending"}[s] }

// Verdict answers, for one end row, whether its process's GPU memory was
// released and, if not, what holds it. It is based on what the row
// carries (see wire.Row): the agent's attribution of the process's
// allocated bytes, or NVML's process list for processes without an agent;
// the comparison with the process's first row is only a second figure.
type Verdict struct {
	Status Status
	Basis  string // what it rests on: "holders walk", "torch's counters", "NVML"
	Text   string // label first: `After cleanup: nothing of yours holds CUDA memory (...)`
	// the process's first row, when the row is not it: the old
	// baseline comparison, kept as a second figure
	Baseline string
	// from the attribution, when there is one (CSV)
	Held *wire.Held
	Top  string // the largest holder's name
}

// Line is the verdict as one line: sign, text, basis.
func (v Verdict) Line() string {
	return v.Status.Mark() + " " + v.Text + " [" + v.Basis + "]"
}

// Judge gives the verdict of end row r; base is the first row of the same
// device and process (ok false when r is that row).
func Judge(r, base wire.Row, ok bool) Verdict {
	var v Verdict
	if r.PID != 0 && r.Allocated == nil && len(r.Frameworks) > 0 {
		v = withFrameworks(r, v, false) // a JAX or CuPy process: no torch figures
	} else if r.PID != 0 && r.Allocated != nil {
		v = judgeAgent(r)
		if ok && base.Allocated != nil {
			v.Baseline = fmt.Sprintf("vs %q: %s MiB allocated (torch)", base.Label,
				SignedMiB(int64(*r.Allocated)-int64(*base.Allocated)))
		}
		v = withFrameworks(r, v, true) // torch and CuPy together: both said
	} else {
		v = judgeNVML(r)
		if ok && base.NVMLUsed != nil && r.NVMLUsed != nil {
			v.Baseline = fmt.Sprintf("vs %q: %s MiB used on the GPU (NVML)", base.Label,
				SignedMiB(int64(*r.NVMLUsed)-int64(*base.NVMLUsed)))
		}
	}
	v.Text = r.Label + ": " + v.Text
	return v
}

const workspacesNote = "cuBLAS workspaces, not a leak: gputop.cleanup() frees them"

// judgeAgent reads the attribution of a process with an agent.
func judgeAgent(r wire.Row) Verdict {
	alloc := *r.Allocated
	h := r.Held
	switch {
	case h == nil && r.Awaiting:
		return Verdict{Status: Pending, Basis: "holders walk",
			Text: "waiting for its agent's holders walk"}
	case (h == nil || h.Skipped != "") && alloc == 0:
		return Verdict{Status: Released, Basis: "torch's counters",
			Text: "nothing of yours holds CUDA memory (0 B allocated)"}
	case h == nil:
		return Verdict{Status: Unknown, Basis: "torch's counters",
			Text: units.Bytes(alloc) + " allocated (torch), and no holders walk came with this row: gputop cannot tell what holds it"}
	case h.Skipped != "":
		return Verdict{Status: Unknown, Basis: "holders walk", Held: h,
			Text: "could not tell what holds " + units.Bytes(alloc) + ": " + h.Skipped}
	}
	v := Verdict{Basis: "holders walk", Held: h}
	if len(h.Top) > 0 {
		v.Top = h.Top[0].Name
	}
	var extra []string
	if h.Internal > 0 {
		extra = append(extra, units.Bytes(h.Internal)+" "+workspacesNote)
	}
	if h.Unaccounted > 0 {
		extra = append(extra, units.Bytes(h.Unaccounted)+" that nothing accounts for")
	}
	switch {
	case h.Python > 0:
		v.Status = Leaked
		v.Text = units.Bytes(h.Python) + " still held: " + topHolders(h)
		if len(extra) > 0 {
			v.Text += " (and " + strings.Join(extra, "; ") + ")"
		}
	case h.Unaccounted > 0:
		v.Status = Unknown
		v.Text = units.Bytes(h.Unaccounted) + " allocated that gputop cannot account for: no Python object reaches it " +
			"and it is no cuBLAS workspace (native code, a CUDA graph's pool, or a tensor only C++ holds)"
		if h.Internal > 0 {
			v.Text += "; " + units.Bytes(h.Internal) + " " + workspacesNote
		}
	default:
		v.Status = Released
		v.Text = "nothing of yours holds CUDA memory"
		if h.Internal > 0 {
			v.Text += " (" + units.Bytes(h.Internal) + " " + workspacesNote + ")"
		} else {
			v.Text += " (" + units.Bytes(h.Allocated) + " allocated)"
		}
	}
	if h.Allocated != alloc {
		v.Text += fmt.Sprintf("; at the walk %s was allocated, %s at the row", units.Bytes(h.Allocated), units.Bytes(alloc))
	}
	return v
}

// topHolders names the largest holders of Python's share, with the fix of
// the largest: `kept (1 tensor float32[1024]): del kept`.
func topHolders(h *wire.Held) string {
	if len(h.Top) == 0 {
		return "by tensors the walk could not name"
	}
	var names []string
	for i, g := range h.Top {
		if i == 3 {
			break
		}
		n := g.Name
		what := plural(g.Tensors, "tensor")
		if len(g.Examples) > 0 {
			what += " " + g.Examples[0]
		}
		n += " (" + what + ")"
		if len(h.Top) > 1 {
			n += " " + units.Bytes(g.Bytes)
		}
		names = append(names, n)
	}
	s := strings.Join(names, ", ")
	if h.Top[0].Hint != "" {
		s += ": " + h.Top[0].Hint
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// judgeNVML gives a verdict on the processes without an agent, from the
// processes NVML listed on the device at the row.
func judgeNVML(r wire.Row) Verdict {
	v := Verdict{Basis: "NVML"}
	switch {
	case r.Procs == nil:
		v.Status = Unknown
		v.Text = "no agent, and NVML's process list of that moment is not known: gputop cannot tell what holds memory"
	case len(*r.Procs) == 0:
		v.Status = Released
		v.Text = "no process uses memory on this GPU (NVML)"
	default:
		v.Status = Unknown
		var ps []string
		for _, p := range *r.Procs {
			used := units.Bytes(p.Used)
			if p.UsedUnknown {
				used = "an amount the driver does not tell"
			}
			name := ""
			if p.Name != "" {
				name = " (" + p.Name + ")"
			}
			ps = append(ps, fmt.Sprintf("pid %d%s %s", p.PID, name, used))
		}
		verb := "uses"
		if len(ps) > 1 {
			verb = "use"
		}
		v.Text = strings.Join(ps, ", ") + " still " + verb + " this GPU (NVML, CUDA context included); " +
			"without gputop's agent in it, gputop cannot tell what holds the memory"
	}
	return v
}
