// Command peakcheck prints, for each row of a recording, the peak of the
// interval before it as gputop works it out (summary.IntervalPeak): exact
// or a bound, its bytes, the persistent parts from the ledger and the rest
// (activations and temporaries), one JSON object per row, for
// bench/peak_check.py to hold against what the workload counted.
//
//	go build -o bin/peakcheck ./bench/cmd/peakcheck
//	bin/peakcheck FILE
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/summary"
)

type peak struct {
	Label      string  `json:"label"`
	PID        int     `json:"pid"`
	Dev        int     `json:"dev"`
	From       string  `json:"from"`
	Exact      bool    `json:"exact"`
	Reached    bool    `json:"reached"`
	Reset      bool    `json:"reset"`
	Coarse     bool    `json:"coarse"`
	Bytes      uint64  `json:"bytes"`
	AtMost     *uint64 `json:"at_most"`
	Persistent *uint64 `json:"persistent"`
	LedgerOf   string  `json:"ledger_of"`
	RestLo     *uint64 `json:"rest_lo"`
	RestHi     *uint64 `json:"rest_hi"`
	Text       string  `json:"text"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: peakcheck FILE")
		os.Exit(2)
	}
	opt := store.DefaultOptions()
	opt.KeepGone, opt.KeepEnded = 0, 0 // a recording is read whole
	st := store.New(opt)
	if _, err := recording.Load(os.Args[1], st); err != nil {
		fmt.Fprintln(os.Stderr, "peakcheck:", err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, r := range summary.RowsOf(st, st.Rows(), st.Devices()) {
		k := r.IntervalPeak
		if k == nil {
			continue
		}
		p := peak{Label: r.Label, PID: r.PID, Dev: r.Dev, From: k.FromLabel, Exact: k.Exact, Reached: k.Reached,
			Reset: k.Reset, Coarse: k.Coarse, Bytes: k.Bytes, AtMost: k.AtMost, Text: summary.PeakText(*k)}
		if k.Persistent != nil {
			s := k.Persistent.Sum()
			p.Persistent, p.LedgerOf = &s, k.Persistent.Label
		}
		if lo, hi, ok := k.Rest(); ok {
			p.RestLo, p.RestHi = &lo, hi
		}
		if err := enc.Encode(p); err != nil {
			fmt.Fprintln(os.Stderr, "peakcheck:", err)
			os.Exit(1)
		}
	}
}
