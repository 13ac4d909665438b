package agentlink

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestLineReaderLines(t *testing.T) {
	long := strings.Repeat("a", 200_000) // several buffer growths
	in := "one\n\ntwo\r\n" + long + "\nlast\n"
	for name, r := range map[string]io.Reader{
		"whole":    strings.NewReader(in),
		"one byte": iotest.OneByteReader(strings.NewReader(in)),
		"half":     iotest.HalfReader(strings.NewReader(in)),
		"data+EOF": iotest.DataErrReader(strings.NewReader(in)),
	} {
		lr := newLineReader(r, 300_000)
		var got []string
		for {
			line, err := lr.next()
			if err != nil {
				if err != io.EOF {
					t.Fatalf("%s: %v", name, err)
				}
				break
			}
			got = append(got, string(line))
		}
		want := []string{"one", "", "two\r", long, "last"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: got %d lines %.40q", name, len(got), got)
		}
	}
}

func TestLineReaderLimit(t *testing.T) {
	// Exactly the limit is fine, one more byte is not.
	lr := newLineReader(strings.NewReader("12345\n123456\nok\n"), 5)
	if line, err := lr.next(); err != nil || string(line) != "12345" {
		t.Fatalf("line at the limit: %q %v", line, err)
	}
	if _, err := lr.next(); !errors.Is(err, errTooLong) {
		t.Fatalf("line over the limit: %v", err)
	}

	// Too long is reported once limit+1 bytes are in, while the writer is
	// still in the middle of the line and no newline will ever come.
	pr, pw := io.Pipe()
	go pw.Write(bytes.Repeat([]byte("x"), 1000))
	lr = newLineReader(pr, 100)
	done := make(chan error, 1)
	go func() { _, err := lr.next(); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, errTooLong) {
			t.Fatalf("got %v, want errTooLong", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reader waited for the end of an over-long line")
	}
	pr.Close()
}

func TestLineReaderCutOff(t *testing.T) {
	lr := newLineReader(strings.NewReader("whole\nhalf a li"), 100)
	if line, err := lr.next(); err != nil || string(line) != "whole" {
		t.Fatalf("%q %v", line, err)
	}
	if _, err := lr.next(); !errors.Is(err, errCutOff) {
		t.Fatalf("got %v, want errCutOff", err)
	}
}
