// The other frameworks' figures on a row (JAX, CuPy): the CSV's
// framework cell and what an end row's verdict says of them.

package summary

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gputop/gputop/units"
	"github.com/gputop/gputop/wire"
)

// FrameworksText is a row's frameworks in one cell, each in its own
// names, exact bytes: `jax bytes_in_use=1024 pool_bytes=2048; cupy used_bytes=0`.
func FrameworksText(fs []wire.Framework) string {
	var parts []string
	for _, f := range fs {
		s := f.Name
		for _, g := range f.Figures {
			s += " " + g.Native + "=" + strconv.FormatUint(g.Value, 10)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// CuPyCleanup is what returns CuPy's free pool to the device.
const CuPyCleanup = "cupy.get_default_memory_pool().free_all_blocks()"

// judgeFramework says whether framework f still holds memory at an end
// row, from its own figures and what it could tell of its holders.
func judgeFramework(f wire.Framework) Verdict {
	v := Verdict{Basis: f.Name + "'s allocator"}
	inUse, ok := f.Get(wire.FigInUse)
	if !ok {
		v.Status = Unknown
		v.Text = f.Name + " gave no in-use figure: gputop cannot tell what holds its memory"
		return v
	}
	pool, hasPool := f.Get(wire.FigReserved)
	free := uint64(0)
	if hasPool && pool.Value > inUse.Value {
		free = pool.Value - inUse.Value
	}
	switch {
	case inUse.Value == 0:
		v.Status = Released
		v.Text = fmt.Sprintf("nothing of yours holds %s memory (%s 0 B)", f.Name, inUse.Native)
		if free > 0 {
			v.Text += "; " + poolNote(f, pool, free)
		}
		return v
	case len(f.Held) > 0:
		v.Status = Leaked
		v.Top = f.Held[0].Name
		v.Text = fmt.Sprintf("%s still in use (%s): %s", units.Bytes(inUse.Value), inUse.Native, frameworkHolders(f))
	default:
		v.Status = Unknown
		v.Text = fmt.Sprintf("%s still in use (%s) that no live array of %s accounts for", units.Bytes(inUse.Value), inUse.Native, f.Name)
	}
	if f.Name == wire.FrameworkCuPy {
		v.Text += "; del them, then " + CuPyCleanup + " returns the pool"
	} else if free > 0 {
		v.Text += "; " + poolNote(f, pool, free)
	}
	return v
}

func poolNote(f wire.Framework, pool wire.Figure, free uint64) string {
	if f.Name == wire.FrameworkCuPy {
		return fmt.Sprintf("%s free in CuPy's pool (%s %s): %s returns it to the device", units.Bytes(free), pool.Native, units.Bytes(pool.Value), CuPyCleanup)
	}
	return fmt.Sprintf("%s's pool keeps %s free (%s %s)", f.Name, units.Bytes(free), pool.Native, units.Bytes(pool.Value))
}

// frameworkHolders names the largest groups of a framework's holders.
func frameworkHolders(f wire.Framework) string {
	var names []string
	for i, g := range f.Held {
		if i == 3 {
			break
		}
		what := plural(g.Tensors, "array")
		if len(g.Examples) > 0 && g.Examples[0] != g.Name {
			what += " " + g.Examples[0]
		}
		names = append(names, fmt.Sprintf("%s (%s) %s", g.Name, what, units.Bytes(g.Bytes)))
	}
	s := strings.Join(names, ", ")
	if h := f.Held[0].Hint; h != "" {
		s += ": " + h
	}
	return s
}

// withFrameworks adds the verdicts of row r's frameworks to v (the
// torch or NVML verdict; none when ok is false): the worst status wins,
// each framework's text follows.
func withFrameworks(r wire.Row, v Verdict, ok bool) Verdict {
	if r.Awaiting && r.Held == nil && len(r.Frameworks) > 0 {
		// the walk asked for (a key's end row) names the holders of
		// torch's memory and of the frameworks' alike: wait for it
		if ok {
			return v
		}
		return Verdict{Status: Pending, Basis: "holders walk", Text: "waiting for its agent's holders walk"}
	}
	for _, f := range r.Frameworks {
		fv := judgeFramework(f)
		if !ok {
			v, ok = fv, true
			continue
		}
		if worse(fv.Status, v.Status) {
			v.Status = fv.Status
		}
		if v.Top == "" {
			v.Top = fv.Top
		}
		v.Basis += ", " + fv.Basis
		v.Text += "; " + f.Name + ": " + fv.Text
	}
	return v
}

// worse orders statuses: held, then unknown, then released.
func worse(a, b Status) bool {
	rank := func(s Status) int { return [...]int{0, 3, 2, 1}[s] }
	return rank(a) > rank(b)
}

// The XLA settings a JAX process's preallocation follows.
const (
	XLAPreallocate = "XLA_PYTHON_CLIENT_PREALLOCATE"
	XLAMemFraction = "XLA_PYTHON_CLIENT_MEM_FRACTION"
	XLAAllocator   = "XLA_PYTHON_CLIENT_ALLOCATOR"
)

// FrameworkText is a framework's figures on one device in words, each by
// the framework's own name: for JAX, its in-use beside the pool XLA
// preallocated and which XLA settings decide it; for CuPy, its pool's
// used and free and what returns the free part.
func FrameworkText(f wire.Framework) string {
	var parts []string
	inUse, hasIn := f.Get(wire.FigInUse)
	pool, hasPool := f.Get(wire.FigReserved)
	if s := inUseText(f); s != "" {
		parts = append(parts, s)
	}
	for _, of := range []string{wire.FigPeak, wire.FigLimit} {
		if g, ok := f.Get(of); ok {
			parts = append(parts, g.Native+" "+units.Bytes(g.Value))
		}
	}
	s := f.Name + ": " + strings.Join(parts, ", ")
	switch f.Name {
	case wire.FrameworkJAX:
		s += "; " + XLASettingsText(f)
	case wire.FrameworkCuPy:
		if hasIn && hasPool && pool.Value > inUse.Value {
			s += fmt.Sprintf("; %s free in the pool until %s", units.Bytes(pool.Value-inUse.Value), CuPyCleanup)
		}
	}
	return s
}

// XLASettingsText says which XLA allocator settings a JAX process has
// and what they make of its memory: why NVML counts a JAX process at 75%
// of the GPU whatever it does.
func XLASettingsText(f wire.Framework) string {
	pre, _ := f.Setting(XLAPreallocate)
	frac, _ := f.Setting(XLAMemFraction)
	alloc, _ := f.Setting(XLAAllocator)
	var set []string
	for _, n := range []string{XLAPreallocate, XLAMemFraction, XLAAllocator} {
		if v, ok := f.Setting(n); ok && v != "" {
			set = append(set, n+"="+v)
		}
	}
	in := "XLA settings: none set"
	if len(set) > 0 {
		in = "XLA settings: " + strings.Join(set, " ")
	}
	if len(f.Settings) == 0 {
		return "XLA settings not reported"
	}
	share := "75%"
	if frac != "" {
		share = frac + " of the GPU"
	}
	switch strings.ToLower(alloc) {
	case "platform":
		return in + ": no pool, each array allocated and freed on its own (slow; NVML's figure is what is in use)"
	case "cuda_async":
		return in + ": CUDA's stream-ordered allocator"
	}
	switch strings.ToLower(pre) {
	case "false", "0":
		return in + ": no preallocation, the pool grows as arrays need it (and keeps what it took)"
	}
	return in + ": XLA preallocated " + share + " at its start, which NVML counts as used; " +
		XLAPreallocate + "=false grows the pool as needed, " + XLAMemFraction + " sets its size"
}

// explainFrameworkOOM explains an OOM of a framework other than torch
// (oom frame o, its row r, on a device of total bytes): JAX's XLA
// (RESOURCE_EXHAUSTED: the pool it preallocated, or its limit, full) or
// CuPy's pool (OutOfMemoryError), from the figures it sent with it.
func explainFrameworkOOM(r Row, o wire.OOM, total uint64) OOMExplanation {
	var e OOMExplanation
	what := o.Framework + "'s allocator"
	switch o.Framework {
	case wire.FrameworkJAX:
		what = "XLA (JAX): RESOURCE_EXHAUSTED"
	case wire.FrameworkCuPy:
		what = "CuPy's memory pool: cupy.cuda.memory.OutOfMemoryError"
	}
	e.Asked = what
	if o.Requested > 0 {
		e.Asked += ", asked for " + units.Bytes(o.Requested)
	}
	e.Asked += "."
	if o.DevUnknown {
		e.Asked += fmt.Sprintf(" The error names no GPU and the process uses %s on several: which one ran out is unknown (shown on GPU %d, its first, with that GPU's figures).", o.Framework, r.Dev)
	}
	var f *wire.Framework
	for i := range o.Frameworks {
		if o.Frameworks[i].Name == o.Framework {
			f = &o.Frameworks[i]
		}
	}
	if f == nil {
		e.Cause = "The process sent no figures of " + o.Framework + " with the error"
		if o.Error != "" {
			e.Cause += ": " + clip(o.Error)
		}
		e.Cause += "."
		return e
	}
	e.Where = FrameworkText(*f) + "."
	inUse, _ := f.Get(wire.FigInUse)
	limit, hasLimit := f.Get(wire.FigLimit)
	pool, hasPool := f.Get(wire.FigReserved)
	switch {
	case total > 0 && o.Requested > total:
		e.Cause = "That is more than the whole GPU (" + units.Bytes(total) + "): the size itself is wrong, or the work must be split."
	case o.Framework == wire.FrameworkJAX && hasLimit && inUse.Value+o.Requested > limit.Value:
		e.Cause = fmt.Sprintf("%s in use (%s) and the %s asked pass XLA's limit, %s %s.",
			units.Bytes(inUse.Value), inUse.Native, units.Bytes(o.Requested), limit.Native, units.Bytes(limit.Value))
		frac, _ := f.Setting(XLAMemFraction)
		pre, _ := f.Setting(XLAPreallocate)
		if frac == "" && !strings.EqualFold(pre, "false") {
			e.Fix = "Suggestion: XLA takes 75% of the GPU by default; " + XLAMemFraction + "=.9 gives it more, or live arrays (jax.live_arrays()) can be dropped."
		} else {
			e.Fix = "Suggestion: " + XLAMemFraction + " sets the limit; or drop live arrays (jax.live_arrays() lists them), or use a smaller batch."
		}
	case o.Framework == wire.FrameworkJAX:
		e.Cause = fmt.Sprintf("XLA's pool had %s in use (%s) and could not find %s: its free memory is in pieces, or the GPU's memory outside the pool is held by other processes.",
			units.Bytes(inUse.Value), inUse.Native, units.Bytes(o.Requested))
		e.Fix = "Suggestion: the process pane names who else holds the GPU; " + XLAPreallocate + "=false leaves the rest of the GPU to them."
	case o.Framework == wire.FrameworkCuPy && hasLimit && inUse.Value+o.Requested > limit.Value:
		e.Cause = fmt.Sprintf("The pool's limit (%s %s) is below %s in use (%s) plus the %s asked.",
			limit.Native, units.Bytes(limit.Value), units.Bytes(inUse.Value), inUse.Native, units.Bytes(o.Requested))
		e.Fix = "Suggestion: raise cupy.get_default_memory_pool().set_limit(), or free arrays."
	case o.Framework == wire.FrameworkCuPy && hasPool && pool.Value > inUse.Value:
		e.Cause = fmt.Sprintf("CuPy's pool held %s free (%s − %s) in blocks it keeps for reuse, which the device could not give back for this request.",
			units.Bytes(pool.Value-inUse.Value), pool.Native, inUse.Native)
		e.Fix = "Suggestion: " + CuPyCleanup + " before the large allocation returns the pool's free blocks to the device."
	default:
		e.Cause = fmt.Sprintf("Live arrays fill the GPU: %s in use (%s).", units.Bytes(inUse.Value), inUse.Native)
		e.Fix = "Suggestion: free arrays, or a smaller batch."
	}
	return e
}

// inUseText is a framework's in-use beside what it holds, by its own
// names ("" without an in-use figure).
func inUseText(f wire.Framework) string {
	inUse, hasIn := f.Get(wire.FigInUse)
	pool, hasPool := f.Get(wire.FigReserved)
	switch {
	case hasIn && hasPool && pool.Value > 0:
		return fmt.Sprintf("%s %s in use of the %s %s it holds (%.0f%%)",
			inUse.Native, units.Bytes(inUse.Value), pool.Native, units.Bytes(pool.Value), 100*float64(inUse.Value)/float64(pool.Value))
	case hasIn:
		return inUse.Native + " " + units.Bytes(inUse.Value) + " in use"
	}
	return ""
}

// FrameworkHoldersText is a framework's line in a holders report: its
// in-use beside what it holds, and what holds it as the framework can
// tell (JAX: its live arrays, listed in Held; CuPy: its pool's used and
// free, and what returns the free part).
func FrameworkHoldersText(f wire.Framework) string {
	parts := []string{}
	if s := inUseText(f); s != "" {
		parts = append(parts, s)
	}
	var n int
	var b uint64
	for _, g := range f.Held {
		n += g.Tensors
		b += g.Bytes
	}
	inUse, hasIn := f.Get(wire.FigInUse)
	pool, hasPool := f.Get(wire.FigReserved)
	switch {
	case f.Name == wire.FrameworkJAX && len(f.Held) > 0:
		parts = append(parts, fmt.Sprintf("jax.live_arrays(): %s, %s in %s", plural(n, "array"), units.Bytes(b), plural(len(f.Held), "group")))
	case f.Name == wire.FrameworkJAX:
		parts = append(parts, "jax.live_arrays(): none")
	case f.Name == wire.FrameworkCuPy && hasIn && hasPool && pool.Value > inUse.Value:
		parts = append(parts, fmt.Sprintf("%s free: %s returns it", units.Bytes(pool.Value-inUse.Value), CuPyCleanup))
	}
	return f.Name + ": " + strings.Join(parts, "; ")
}
