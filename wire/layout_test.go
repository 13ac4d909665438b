package wire

import (
	"strings"
	"testing"
)

func TestLayoutChecks(t *testing.T) {
	good := LayoutReading{Dev: 0, Layout: Layout{T: 1, Segments: 2, Blocks: 5, Reserved: 100, Allocated: 40,
		FreeInSegments: 60, LargestFree: 30, Pools: []Pool{{Kind: PoolDefault, ID: "0,0", Segments: 2, Reserved: 100, Allocated: 40, LargestFree: 30}},
		Settings: &AllocSettings{From: "torch", Items: []Setting{{Name: "max_split_size", Value: "none"}}}}}
	if err := Check(good); err != nil {
		t.Fatalf("a consistent layout refused: %v", err)
	}
	if f := good.Fragmentation(); f != 0.5 {
		t.Fatalf("fragmentation %v, want 1 - 30/60 = 0.5", f)
	}
	bad := map[string]func(*LayoutReading){
		`"largest_free" (70) is more than "free_in_segments" (60)`: func(l *LayoutReading) { l.LargestFree = 70 },
		`"allocated" (200) is more than "reserved" (100)`:          func(l *LayoutReading) { l.Allocated = 200 },
		`"pools[0].kind" is "cache"`:                               func(l *LayoutReading) { l.Pools[0].Kind = "cache" },
		`"pools[0].id" must be 1 to 48 bytes`:                      func(l *LayoutReading) { l.Pools[0].ID = strings.Repeat("9", 49) },
		`lists 33 pools, more than 32`: func(l *LayoutReading) {
			l.Pools = make([]Pool, MaxPools+1)
		},
		`"settings.from" is "guess"`: func(l *LayoutReading) { l.Settings.From = "guess" },
		`"skipped" is 300 bytes`:     func(l *LayoutReading) { l.Skipped = strings.Repeat("x", 300) },
	}
	for want, spoil := range bad {
		l := good
		l.Pools = append([]Pool(nil), good.Pools...)
		s := *good.Settings
		l.Settings = &s
		spoil(&l)
		err := Check(l)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("spoiled layout: got %v, want an error containing %s", err, want)
		}
	}
	m := Mark{T: 1, Label: "x", Devs: []DevStats{{Dev: 0, Layout: &Layout{Reserved: 1, Allocated: 2}}}}
	if err := Check(m); err == nil || !strings.Contains(err.Error(), `"devs[0].layout.allocated"`) {
		t.Errorf("a mark's bad layout: got %v, want it named as devs[0].layout.allocated", err)
	}
	o := OOM{T: 1, Layout: &Layout{Reserved: 10, FreeInSegments: 20}}
	if err := Check(o); err == nil || !strings.Contains(err.Error(), `"layout.free_in_segments"`) {
		t.Errorf("an oom's bad layout: got %v", err)
	}
}

func TestLedgerChecks(t *testing.T) {
	ok := Ledger{T: 1, Allocated: 100, Reserved: 150, Params: 40, Grads: 20, Optimizer: 30, Workspace: 5}
	m := Mark{T: 1, Label: "x", Devs: []DevStats{{Dev: 0, Ledger: &ok}}}
	if err := Check(m); err != nil {
		t.Fatalf("a consistent ledger refused: %v", err)
	}
	if ok.Unattributed() != 5 || ok.CachedFree() != 50 {
		t.Fatalf("unattributed %d (want 5), cached free %d (want 50)", ok.Unattributed(), ok.CachedFree())
	}
	if o, known := ok.OutsideTorch(500); !known || o != 350 {
		t.Fatalf("outside torch %d %v, want 350", o, known)
	}
	if _, known := ok.OutsideTorch(100); known {
		t.Fatal("NVML below reserved gave an outside-torch figure")
	}
	for want, l := range map[string]Ledger{
		`"devs[0].ledger": the parts add up to more than`:               {Allocated: 100, Reserved: 100, Params: 60, Grads: 50},
		`the parts add up to more than "devs[0].ledger.allocated" (10)`: {Allocated: 10, Reserved: 10, Params: 1 << 63, Grads: 1 << 63},
		`"devs[0].ledger.allocated" (200) is more than`:                 {Allocated: 200, Reserved: 100},
		`"devs[0].ledger.uncounted" lists 9 entries`:                    {Uncounted: make([]string, 9)},
	} {
		m.Devs[0].Ledger = &l
		if err := Check(m); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error containing %s", err, want)
		}
	}
}
