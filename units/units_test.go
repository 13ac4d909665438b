package units

import "testing"

func TestBytes(t *testing.T) {
	for b, want := range map[uint64]string{
		0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 5 << 20: "5.0 MiB", 1 << 30: "1.00 GiB",
		1288490189: "1.20 GiB", 100 << 30: "100.0 GiB", 150_000_000_000: "139.7 GiB",
	} {
		if got := Bytes(b); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", b, got, want)
		}
	}
}
