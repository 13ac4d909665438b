package e2e

import (
	"testing"

	"github.com/gputop/gputop/ingest"
	"github.com/gputop/gputop/recording"
	"github.com/gputop/gputop/store"
	"github.com/gputop/gputop/wire"
)

// testRecording starts a real recording at path, written by the real
// writer through an Ingest as gputop's own are, sampled at rateHz, with one
// NVML device ("Test GPU", uuid, total bytes). What is applied to in lands
// in the file; done closes it.
func testRecording(t *testing.T, path string, rateHz int, uuid string, total uint64) (in *ingest.Ingest, done func()) {
	t.Helper()
	w, err := recording.Create(path, wire.Recording{Type: wire.TypeRecording, V: wire.Version, Start: base, Tool: "test", RateHz: rateHz})
	if err != nil {
		t.Fatal(err)
	}
	in = ingest.New(store.New(store.DefaultOptions()))
	in.SetTap(w)
	in.Device(store.Device{Index: 0, UUID: uuid, Name: "Test GPU", Total: total, Source: "nvml"})
	return in, func() {
		t.Helper()
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
