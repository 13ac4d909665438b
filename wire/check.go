package wire

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Check reports what makes a frame unusable, naming the field; nil when it
// can be used. The agent socket checks every frame a peer sends with it and
// the recording loader every frame it reads, so both refuse the same
// things in the same words. Each frame type's checks are its entry's in
// the table (Frames); frame types with nothing to check pass.
func Check(f Frame) error {
	s, ok := byType[f.FrameType()]
	if !ok || s.check == nil {
		return nil
	}
	return s.check(f)
}

func checkHolders(v *Holders) error {
	if v.ID < 0 {
		return fmt.Errorf(`"id" must be >= 0, got %d`, v.ID)
	}
	return firstErr(checkTime(v.T), checkDev("dev", v.Dev), checkLedger("ledger", v.Ledger), checkFrameworks("frameworks", v.Frameworks))
}

func checkSnap(v *Snap) error {
	if err := checkVersion(v.V); err != nil {
		return err
	}
	if strings.TrimSpace(v.Label) == "" {
		return errors.New(`"label" is empty`)
	}
	return nil
}

func checkRequest(v *Request) error {
	if v.What == "" {
		return errors.New(`"what" is empty`)
	}
	if v.ID <= 0 {
		return fmt.Errorf(`"id" must be > 0, got %d`, v.ID)
	}
	return nil
}

func checkVersion(v int) error {
	if v == 0 {
		return errors.New(`"v" (protocol version) is missing`)
	}
	if v != Version {
		return fmt.Errorf("protocol version %d is not supported (this gputop speaks version %d)", v, Version)
	}
	return nil
}

func checkTime(t int64) error {
	if t <= 0 {
		return fmt.Errorf(`"t" must be > 0 (ns since the epoch), got %d`, t)
	}
	return nil
}

func checkDev(field string, dev int) error {
	if dev < 0 {
		return fmt.Errorf("%q must be a torch device index >= 0, got %d", field, dev)
	}
	return nil
}

func checkDevice(d *Device) error {
	if d.Memory != "" && d.Memory != MemorySystem {
		return fmt.Errorf(`"memory" must be absent or %q, got %q`, MemorySystem, d.Memory)
	}
	return nil
}

func checkHello(h *Hello) error {
	if err := checkVersion(h.V); err != nil {
		return err
	}
	if h.PID <= 0 {
		return fmt.Errorf(`"pid" must be > 0, got %d`, h.PID)
	}
	if err := checkTime(h.T); err != nil {
		return err
	}
	if h.RateHz < 0 {
		return fmt.Errorf(`"rate_hz" must be >= 0, got %g`, h.RateHz)
	}
	if h.History < 0 {
		return fmt.Errorf(`"history" must be >= 0 (max_entries; 0: off), got %d`, h.History)
	}
	seen := map[int]bool{}
	uuids := map[string]int{}
	for i, d := range h.Devices {
		if d.Index < 0 {
			return fmt.Errorf("devices[%d]: \"index\" must be >= 0, got %d", i, d.Index)
		}
		if d.UUID == "" {
			// Without a UUID the torch index cannot be tied to an NVML device,
			// and CUDA_VISIBLE_DEVICES would silently mislabel it.
			return fmt.Errorf("devices[%d] (cuda:%d) has no \"uuid\"", i, d.Index)
		}
		if seen[d.Index] {
			return fmt.Errorf("cuda:%d is listed twice in \"devices\"", d.Index)
		}
		seen[d.Index] = true
		// two torch devices cannot be one GPU; their samples would mix in
		// one series in an order a recording could not keep
		if j, dup := uuids[d.UUID]; dup {
			return fmt.Errorf("cuda:%d and cuda:%d have the same \"uuid\" %q", j, d.Index, Clip(d.UUID, 60))
		}
		uuids[d.UUID] = d.Index
	}
	return nil
}

func checkMark(m *Mark) error {
	if err := checkTime(m.T); err != nil {
		return err
	}
	if strings.TrimSpace(m.Label) == "" {
		return errors.New(`"label" is empty`)
	}
	switch m.Kind {
	case "", MarkSnapshot, MarkPhaseStart, MarkPhaseEnd:
	default:
		return fmt.Errorf("unknown kind %q (want %q, %q or %q)", Clip(m.Kind, 40),
			MarkSnapshot, MarkPhaseStart, MarkPhaseEnd)
	}
	for i, d := range m.Devs {
		if err := checkDev(fmt.Sprintf("devs[%d].dev", i), d.Dev); err != nil {
			return err
		}
		if err := checkLayout(fmt.Sprintf("devs[%d].layout", i), d.Layout); err != nil {
			return err
		}
		if err := checkLedger(fmt.Sprintf("devs[%d].ledger", i), d.Ledger); err != nil {
			return err
		}
		if err := checkFrameworks(fmt.Sprintf("devs[%d].frameworks", i), d.Frameworks); err != nil {
			return err
		}
		if d.NoTorch && (d.Allocated != 0 || d.Reserved != 0 || d.Peak != 0) {
			return fmt.Errorf("devs[%d]: %w", i, errNoTorchFigures)
		}
	}
	return checkDump(m.Dump)
}

func checkOOM(v *OOM) error {
	return firstErr(checkTime(v.T), checkDev("dev", v.Dev), checkDump(v.Dump), checkLayout("layout", v.Layout), checkFrameworkOOM(v))
}

func checkLayoutReading(v *LayoutReading) error {
	if err := firstErr(checkTime(v.T), checkDev("dev", v.Dev)); err != nil {
		return err
	}
	if len(v.Skipped) > MaxSettingBytes {
		return fmt.Errorf(`"skipped" is %d bytes, more than %d`, len(v.Skipped), MaxSettingBytes)
	}
	return checkLayout("", &v.Layout)
}

// checkLayout: a layout's figures fit inside each other (the largest free
// block inside the free bytes, those inside what is reserved), and its
// lists and texts keep to their bounds. field prefixes the names in the
// error ("" for a layout frame's own fields).
func checkLayout(field string, l *Layout) error {
	if l == nil {
		return nil
	}
	name := func(f string) string {
		if field == "" {
			return f
		}
		return field + "." + f
	}
	switch {
	case l.Segments < 0 || l.Blocks < 0 || l.PoolsCut < 0:
		return fmt.Errorf("%q, %q and %q must be >= 0", name("segments"), name("blocks"), name("pools_cut"))
	case l.Allocated > l.Reserved:
		return fmt.Errorf("%q (%d) is more than %q (%d)", name("allocated"), l.Allocated, name("reserved"), l.Reserved)
	case l.FreeInSegments > l.Reserved:
		return fmt.Errorf("%q (%d) is more than %q (%d)", name("free_in_segments"), l.FreeInSegments, name("reserved"), l.Reserved)
	case l.LargestFree > l.FreeInSegments:
		return fmt.Errorf("%q (%d) is more than %q (%d)", name("largest_free"), l.LargestFree, name("free_in_segments"), l.FreeInSegments)
	case len(l.Pools) > MaxPools:
		return fmt.Errorf("%q lists %d pools, more than %d (the rest belong in %q)", name("pools"), len(l.Pools), MaxPools, name("pools_cut"))
	}
	for i, p := range l.Pools {
		pf := fmt.Sprintf("pools[%d]", i)
		switch {
		case p.Kind != PoolDefault && p.Kind != PoolGraph && p.Kind != PoolMemPool && p.Kind != PoolPrivate:
			return fmt.Errorf("%q is %q (want %q, %q, %q or %q)", name(pf+".kind"), Clip(p.Kind, 40),
				PoolDefault, PoolGraph, PoolMemPool, PoolPrivate)
		case p.ID == "" || len(p.ID) > MaxPoolIDBytes:
			return fmt.Errorf("%q must be 1 to %d bytes, got %d", name(pf+".id"), MaxPoolIDBytes, len(p.ID))
		case p.Segments < 0:
			return fmt.Errorf("%q must be >= 0", name(pf+".segments"))
		case p.Allocated > p.Reserved || p.LargestFree > p.Reserved:
			return fmt.Errorf("%q: allocated and largest_free must be at most reserved", name(pf))
		}
	}
	if st := l.Settings; st != nil {
		switch {
		case st.From != "torch" && st.From != "env":
			return fmt.Errorf("%q is %q (want \"torch\" or \"env\")", name("settings.from"), Clip(st.From, 40))
		case len(st.Items) > MaxSettings:
			return fmt.Errorf("%q lists %d settings, more than %d", name("settings.items"), len(st.Items), MaxSettings)
		case len(st.Conf) > MaxSettingBytes || len(st.Env) > MaxSettingBytes:
			return fmt.Errorf("%q or %q is longer than %d bytes", name("settings.conf"), name("settings.env"), MaxSettingBytes)
		}
		for i, it := range st.Items {
			if it.Name == "" || len(it.Name) > MaxSettingBytes || len(it.Value) > MaxSettingBytes {
				return fmt.Errorf("%q: a name of 1 to %d bytes and a value of at most %d", name(fmt.Sprintf("settings.items[%d]", i)), MaxSettingBytes, MaxSettingBytes)
			}
		}
	}
	return nil
}

// checkDump: a dump names its file or says why there is none; its times
// are not negative.
func checkDump(d *Dump) error {
	if d == nil {
		return nil
	}
	if d.Path == "" && d.Error == "" {
		return errors.New(`"dump" has neither a "path" nor an "error"`)
	}
	if d.TookMS < 0 || d.GILMS < 0 {
		return errors.New(`"dump": "took_ms" and "gil_ms" must be >= 0`)
	}
	if p := d.Phases; p != nil {
		for _, v := range []float64{p.WaitMS, p.ImportMS, p.TakeMS, p.TakeCPUMS, p.PickleMS, p.WriteMS, p.FsyncMS, p.PlaceMS} {
			if v < 0 {
				return errors.New(`"dump.phases": every time must be >= 0`)
			}
		}
	}
	return nil
}

func checkRowEdit(e *RowEdit) error {
	if err := checkTime(e.T); err != nil {
		return err
	}
	if e.Dev < 0 {
		return fmt.Errorf(`"dev" must be a device index >= 0, got %d`, e.Dev)
	}
	if e.PID < 0 {
		return fmt.Errorf(`"pid" must be >= 0, got %d`, e.PID)
	}
	switch {
	case e.Delete && e.Rename != "":
		return errors.New(`"rename" and "delete" both given: an edit does one`)
	case !e.Delete && strings.TrimSpace(e.Rename) == "":
		return errors.New(`neither "rename" (a new label) nor "delete" given`)
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// Clip keeps a peer-chosen string short enough for a message.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// CheckPlace returns h with the rank fields that cannot be used left out,
// and a message for each, naming the field and the value. A bad RANK is no
// reason to stop watching a process, so these are not Check's refusals:
// the process is watched without the field, and the log says why.
func CheckPlace(h Hello) (Hello, []string) {
	var problems []string
	num := func(field, env string, v *string, least int) int {
		if *v == "" {
			return -1
		}
		n, err := strconv.Atoi(*v)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%q (%s) is %q, not a whole number; left out", field, env, Clip(*v, 40)))
		case n < least || n > MaxWorldSize:
			problems = append(problems, fmt.Sprintf("%q (%s) is %d, want %d..%d; left out", field, env, n, least, MaxWorldSize))
		default:
			return n
		}
		*v = ""
		return -1
	}
	rank := num("rank", "RANK", &h.Rank, 0)
	local := num("local_rank", "LOCAL_RANK", &h.LocalRank, 0)
	world := num("world_size", "WORLD_SIZE", &h.WorldSize, 1)
	if world >= 0 && rank >= world {
		// either may be the wrong one: neither is shown
		problems = append(problems, fmt.Sprintf(`"rank" %d is not below "world_size" %d; both left out`, rank, world))
		h.Rank, h.WorldSize, world = "", "", -1
	}
	if world >= 0 && local >= world {
		problems = append(problems, fmt.Sprintf(`"local_rank" %d is not below "world_size" %d; left out`, local, world))
		h.LocalRank = ""
	}
	if len(h.Job) > MaxJobBytes {
		problems = append(problems, fmt.Sprintf(`"job" is %d bytes, more than %d; left out`, len(h.Job), MaxJobBytes))
		h.Job = ""
	}
	return h, problems
}

// checkLedger: the parts fit inside the allocated bytes, those inside the
// reserved, and the texts keep to their bounds.
func checkLedger(field string, l *Ledger) error {
	if l == nil {
		return nil
	}
	switch {
	case l.Allocated > l.Reserved:
		return fmt.Errorf("%q (%d) is more than %q (%d)", field+".allocated", l.Allocated, field+".reserved", l.Reserved)
	case !partsFit(l):
		return fmt.Errorf("%q: the parts add up to more than %q (%d)", field, field+".allocated", l.Allocated)
	case len(l.Uncounted) > MaxUncounted:
		return fmt.Errorf("%q lists %d entries, more than %d", field+".uncounted", len(l.Uncounted), MaxUncounted)
	case len(l.Skipped) > MaxSettingBytes:
		return fmt.Errorf("%q is %d bytes, more than %d", field+".skipped", len(l.Skipped), MaxSettingBytes)
	}
	for i, u := range l.Uncounted {
		if len(u) > MaxSettingBytes {
			return fmt.Errorf("%q is %d bytes, more than %d", fmt.Sprintf("%s.uncounted[%d]", field, i), len(u), MaxSettingBytes)
		}
	}
	return nil
}

// partsFit: the ledger's parts add up to at most its allocated bytes,
// without the sum wrapping.
func partsFit(l *Ledger) bool {
	left := l.Allocated
	for _, p := range []uint64{l.Params, l.Grads, l.Optimizer, l.Activations, l.OtherTensors, l.Workspace} {
		if p > left {
			return false
		}
		left -= p
	}
	return true
}
