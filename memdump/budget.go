package memdump

import (
	"fmt"

	"github.com/gputop/gputop/units"
)

// The reader's budget, in proportion to the file: a pickle can declare
// a length far past its end (100 GiB in 13 bytes), nest a value in each
// byte (a list costs gopickle ~180 bytes, a MARK ~400), or refer to the
// same lists over and over (82 KB of shared references make 4·10¹¹
// blocks). Every declared length is held to what is left of the file
// before anything is allocated; decoding is held to MemoryPerByte bytes
// allocated (gopickle's, estimated opcode by opcode before it runs them:
// opcodes.go) for each byte of the file, plus MemoryBase; summing the
// values up is held to VisitsPerByte values looked at for each byte,
// plus VisitsBase. The real H200 dumps in testdata/memdump take a third
// of the memory budget and a thirtieth of the visits
// (TestRealDumpsWithinBudget); a dump taken with history off, whose
// blocks are small dicts with an empty list each, costs gopickle the most
// for its size: 40 bytes a byte.
const (
	MemoryPerByte = 96
	MemoryBase    = 16 << 20
	VisitsPerByte = 4
	VisitsBase    = 1 << 20
)

func memoryLimit(size int64) int64 { return MemoryPerByte*size + MemoryBase }
func visitLimit(size int64) int64  { return VisitsPerByte*size + VisitsBase }

// BudgetError says that a file would cost the reader more than its
// budget allows, and which budget: "memory" (decoding would allocate more
// than Limit bytes; Offset is the opcode at which the estimate passed
// it) or "visits" (summing it up would look at more than Limit values;
// Offset is -1).
type BudgetError struct {
	Path   string
	Size   int64
	Budget string // "memory" or "visits"
	Limit  int64
	Offset int64
}

func (e *BudgetError) Error() string {
	where := e.Path
	if where == "" {
		where = "dump"
	}
	size := units.Bytes(uint64(max(e.Size, 0)))
	if e.Budget == "memory" {
		return fmt.Sprintf("%s: over the reader's memory budget at byte %d: decoding it would allocate more than %s "+
			"(%d bytes for each of its %s, plus %s), far more than a torch memory dump needs (values nested or repeated by the thousand?)",
			where, e.Offset, units.Bytes(uint64(e.Limit)), MemoryPerByte, size, units.Bytes(MemoryBase))
	}
	return fmt.Sprintf("%s: over the reader's budget of %d visits (%d for each byte of its %s, plus %d): summing it up "+
		"would look at its values far more often than a torch memory dump needs (the same lists and dicts referred to over and over?)",
		where, e.Limit, VisitsPerByte, size, VisitsBase)
}
