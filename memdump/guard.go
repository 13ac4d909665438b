package memdump

import (
	"bufio"
	"context"
	"fmt"
	"strconv"

	"github.com/gputop/gputop/units"
)

// guard is the reader gopickle reads the file through. gopickle allocates
// what a length in the file declares before it reads a byte of it, and
// runs a FRAME's opcodes from a buffer it filled at once; so the guard
// reads each opcode, in the order of the file, as it hands its bytes
// over, and refuses to hand over the byte that would make gopickle
// allocate more than the budget allows: the last byte of a length that
// runs past the end of the file, the opcode that takes the estimated
// allocation past memoryLimit, an opcode no torch dump holds. A
// frame's opcodes are read when the frame is, before gopickle runs one of
// them.
//
// To estimate what gopickle allocates the guard follows the stack and the
// memo as gopickle keeps them, without their values: each slot is a list
// or dict the guard follows (an index into ctrs) or none (-1), so that an
// APPENDS or SETITEMS is charged what growing that very list or dict
// costs.
type guard struct {
	r    *bufio.Reader
	ctx  context.Context
	size int64 // the file's size
	off  int64 // bytes handed over: the offset of the next byte
	err  error // the first refusal: every later read returns it
	done bool  // past STOP: gopickle reads no further opcodes

	// the opcode being read
	st    state
	op    *opcode
	opAt  int64  // its offset
	need  int64  // bytes of its argument to come: fixed, a length, a payload
	arg   uint64 // a fixed argument or a length, read so far
	shift uint
	lines int    // lines to come
	line  []byte // a memo index's line (GET, PUT)
	lineN int64  // bytes of the current line

	// gopickle's stack, memo and containers, as the guard follows them
	slots    []int32       // every stack's values, the current MARK's last
	base     int           // where the current MARK's values start in slots
	capacity int           // the capacity of gopickle's slice for them
	marks    []mark        // the stacks below each MARK
	metaCap  int           // the capacity of gopickle's slice of those
	memo     map[int]int32 // the memo: keys as gopickle's, values as slots
	ctrs     []container   // the lists and dicts followed
	own      [3]int        // the capacities of slots, marks and ctrs: the guard's own, charged as they grow
	cost     int64         // allocation estimated so far
	limit    int64
	next     int64 // the offset at which ctx is checked next
}

type state uint8

const (
	stOp      state = iota // the next byte is an opcode
	stFixed                // a fixed argument
	stLen                  // a length
	stPayload              // what the length said
	stLine                 // a line
)

type mark struct{ base, capacity int }

// container is a list or dict as gopickle grows it: its length, its
// slice's capacity, the bytes of one element.
type container struct {
	n, capacity int
	elem        int64
}

// ctxEvery is how often (in bytes) the guard looks for a cancellation.
const ctxEvery = 64 << 10

func newGuard(ctx context.Context, r *bufio.Reader, size int64) *guard {
	// gopickle's Load starts with a 16-slot stack and a 16-slot meta
	// stack; NewUnpickler makes a memo for 384 (all three constant, in
	// MemoryBase)
	return &guard{r: r, ctx: ctx, size: size, capacity: 16, metaCap: 16, memo: map[int]int32{},
		limit: memoryLimit(size)}
}

func (g *guard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if g.off >= g.next {
		if err := g.ctx.Err(); err != nil {
			g.err = err
			return 0, err
		}
		g.next = g.off + ctxEvery
	}
	n, err := g.r.Read(p)
	for i := 0; i < n; {
		if g.done || g.st == stPayload {
			k := int64(n - i)
			if !g.done {
				k = min(k, g.need)
				if g.need -= k; g.need == 0 {
					g.st = stOp
				}
			}
			i += int(k)
			g.off += k
			continue
		}
		if e := g.step(p[i]); e != nil {
			g.err = e
			return i, e
		}
		i++
		g.off++
	}
	return n, err
}

func (g *guard) ReadByte() (byte, error) {
	if g.err != nil {
		return 0, g.err
	}
	b, err := g.r.ReadByte()
	if err != nil {
		return 0, err
	}
	if !g.done {
		if e := g.step(b); e != nil {
			g.err = e
			return 0, e
		}
	}
	g.off++
	return b, nil
}

// step reads byte b, at g.off, of the opcode stream.
func (g *guard) step(b byte) error {
	if g.off >= g.next {
		if err := g.ctx.Err(); err != nil {
			return err
		}
		g.next = g.off + ctxEvery
	}
	switch g.st {
	case stOp:
		return g.opcode(b)
	case stFixed:
		g.arg |= uint64(b) << g.shift
		g.shift += 8
		if g.need--; g.need == 0 {
			g.st = stOp
			return g.apply()
		}
	case stLen:
		g.arg |= uint64(b) << g.shift
		g.shift += 8
		if g.need--; g.need == 0 {
			return g.lengthRead()
		}
	case stPayload:
		if g.need--; g.need == 0 {
			g.st = stOp
		}
	case stLine:
		return g.lineByte(b)
	}
	return nil
}

func (g *guard) opcode(b byte) error {
	op := opcodes[b]
	g.op, g.opAt = op, g.off
	if op == nil {
		return g.malformed(fmt.Errorf("unknown opcode: %#x", b))
	}
	if op.eff == effRefused {
		return g.malformed(fmt.Errorf("%s %s: a torch memory dump holds plain dicts, lists, strings and numbers only", op.name, op.refusing))
	}
	if err := g.charge(op.cost); err != nil {
		return err
	}
	g.arg, g.shift = 0, 0
	switch op.arg {
	case argNone:
		return g.apply()
	case argFixed:
		g.st, g.need = stFixed, int64(op.n)
	case argLen, argFrame:
		g.st, g.need = stLen, int64(op.n)
	case argLines:
		g.st, g.lines, g.lineN, g.line = stLine, op.n, 0, g.line[:0]
	}
	return nil
}

func (g *guard) lineByte(b byte) error {
	op := g.op
	g.lineN++
	if op.maxArg > 0 && g.lineN > op.maxArg+1 {
		what := "a memo index"
		if op.eff == effPush {
			what = "an integer"
		}
		return g.malformed(fmt.Errorf("%s with %s of more than %d characters", op.name, what, op.maxArg))
	}
	if err := g.charge(op.perByte); err != nil {
		return err
	}
	if op.eff == effGet || op.eff == effPut {
		g.line = append(g.line, b)
	}
	if b != '\n' {
		return nil
	}
	g.lineN = 0
	if g.lines--; g.lines > 0 {
		return nil
	}
	g.st = stOp
	if op.eff == effGet || op.eff == effPut {
		// gopickle's strconv.Atoi of the line
		i, err := strconv.Atoi(string(g.line[:len(g.line)-1]))
		if err != nil || (op.eff == effPut && i < 0) {
			return g.malformed(fmt.Errorf("%s with a memo index that is not one: %q", op.name, g.line))
		}
		g.arg = uint64(i)
	}
	return g.apply()
}

// lengthRead checks a length just read against what is left of the file,
// before gopickle sees its last byte and allocates it.
func (g *guard) lengthRead() error {
	op := g.op
	n := g.arg
	if op.signed && int32(uint32(n)) < 0 {
		return g.malformed(fmt.Errorf("%s with a negative length", op.name))
	}
	left := g.size - g.off - 1
	if n > uint64(left) {
		return &ReadError{Offset: g.size, Size: g.size, Truncated: true, Err: &overrun{op.name, g.opAt, n, left}}
	}
	if op.maxArg > 0 && int64(n) > op.maxArg {
		return g.malformed(fmt.Errorf("%s of %d bytes: a torch memory dump's integers fit in 64 bits", op.name, n))
	}
	c := alloc(int64(n))
	switch {
	case op.integer && n > 8:
		c += 256 + 16*int64(n) // a big.Int, shifted a byte at a time
	case op.integer:
		c += 8
	case op.strCopy:
		c += alloc(int64(n)) + 16
	}
	if op.n > 1 {
		c += 8 // the length's own buffer
	}
	if err := g.charge(c); err != nil {
		return err
	}
	g.st, g.need = stPayload, int64(n)
	if op.arg == argFrame || n == 0 {
		g.st = stOp // a frame's bytes are opcodes
	}
	return g.apply()
}

// overrun is a length that runs past the end of the file.
type overrun struct {
	op       string
	at       int64
	declared uint64
	left     int64
}

func (o *overrun) Error() string {
	n := fmt.Sprintf("%d bytes", o.declared)
	if o.declared >= 1024 {
		n += " (" + units.Bytes(o.declared) + ")"
	}
	return fmt.Sprintf("%s at byte %d declares %s, %d are left in the file", o.op, o.at, n, o.left)
}

// apply does what the opcode just read does to the stack and the memo,
// and charges what that costs.
func (g *guard) apply() error {
	op := g.op
	depth := len(g.slots) - g.base
	switch op.eff {
	case effPush:
		return g.push(-1)
	case effPop:
		if depth < op.pop {
			return g.underflow(op.pop)
		}
		g.slots = g.slots[:len(g.slots)-op.pop]
		return g.push(-1)
	case effNewList, effNewDict:
		elem := int64(slot)
		if op.eff == effNewDict {
			elem = entry
		}
		id, err := g.container(0, 4, elem)
		if err != nil {
			return err
		}
		return g.push(id)
	case effDup:
		if depth < 1 {
			return g.underflow(1)
		}
		return g.push(g.slots[len(g.slots)-1])
	case effGet:
		id, ok := g.memo[int(g.arg)]
		if !ok {
			id = -1 // gopickle pushes nil
		}
		return g.push(id)
	case effPut, effMemoize:
		if depth < 1 {
			return g.underflow(1)
		}
		k := int(g.arg)
		if op.eff == effMemoize {
			k = len(g.memo)
		}
		if _, ok := g.memo[k]; !ok {
			if err := g.charge(memoEntry); err != nil {
				return err
			}
		}
		g.memo[k] = g.slots[len(g.slots)-1]
	case effAppend, effSetItem:
		want, per := 2, unknownAppend
		if op.eff == effSetItem {
			want, per = 3, unknownSet
		}
		if depth < want {
			return g.underflow(want)
		}
		if err := g.add(g.slots[len(g.slots)-want], 1, int64(per)); err != nil {
			return err
		}
		g.slots = g.slots[:len(g.slots)-want+1]
	case effList, effTuple, effDict:
		items, capacity := depth, g.capacity
		if err := g.popMark(); err != nil {
			return err
		}
		var id int32 = -1
		var err error
		switch op.eff {
		case effList: // the MARK's slice becomes the list
			id, err = g.container(items, capacity, slot)
		case effDict: // a new dict, their pairs set into it
			if id, err = g.container(0, 4, entry); err == nil {
				err = g.add(id, items/2, unknownSet)
			}
		}
		if err != nil {
			return err
		}
		return g.push(id)
	case effAppends, effSetItems:
		items := depth
		if err := g.popMark(); err != nil {
			return err
		}
		if len(g.slots)-g.base < 1 {
			return g.underflow(1)
		}
		n, per := items, int64(unknownAppend)
		if op.eff == effSetItems {
			n, per = items/2, unknownSet
		}
		return g.add(g.slots[len(g.slots)-1], n, per)
	case effMark:
		g.marks = append(g.marks, mark{g.base, g.capacity})
		if err := g.grown(1, cap(g.marks), 16); err != nil {
			return err
		}
		if len(g.marks) > g.metaCap {
			g.metaCap = nextCap(len(g.marks), g.metaCap)
			if err := g.charge(alloc(int64(g.metaCap) * 24)); err != nil {
				return err
			}
		}
		g.base, g.capacity = len(g.slots), 16
	case effPopMark:
		return g.popMark()
	case effPopAny:
		if depth == 0 {
			return g.popMark()
		}
		g.slots = g.slots[:len(g.slots)-1]
	case effStop:
		if depth < 1 {
			return g.underflow(1)
		}
		g.done = true
	}
	return nil
}

// push adds a value to the current MARK's slice, charging its growth.
func (g *guard) push(id int32) error {
	if len(g.slots)-g.base >= g.capacity {
		g.capacity = nextCap(len(g.slots)-g.base+1, g.capacity)
		if err := g.charge(alloc(int64(g.capacity) * slot)); err != nil {
			return err
		}
	}
	g.slots = append(g.slots, id)
	return g.grown(0, cap(g.slots), 4)
}

// container starts following a new list or dict.
func (g *guard) container(n, capacity int, elem int64) (int32, error) {
	g.ctrs = append(g.ctrs, container{n, capacity, elem})
	return int32(len(g.ctrs) - 1), g.grown(2, cap(g.ctrs), 24)
}

// add appends n elements to container id, charging each growth of its
// slice as append makes it; one the guard does not follow (not a list or
// dict: gopickle refuses to append to it) is charged per each.
func (g *guard) add(id int32, n int, per int64) error {
	if id < 0 {
		return g.charge(int64(n) * per)
	}
	c := &g.ctrs[id]
	for c.n += n; c.n > c.capacity; {
		c.capacity = nextCap(c.capacity+1, c.capacity)
		if err := g.charge(alloc(int64(c.capacity) * c.elem)); err != nil {
			return err
		}
	}
	return nil
}

func (g *guard) popMark() error {
	if len(g.marks) == 0 {
		return g.malformed(fmt.Errorf("%s without a MARK before it", g.op.name))
	}
	m := g.marks[len(g.marks)-1]
	g.marks = g.marks[:len(g.marks)-1]
	g.slots = g.slots[:g.base]
	g.base, g.capacity = m.base, m.capacity
	return nil
}

// nextCap is the capacity append gives a slice of capacity old that must
// hold n (runtime.nextslicecap; size classes round it up further, which
// alloc's margin covers).
func nextCap(n, old int) int {
	if n > 2*old {
		return n
	}
	if old < 256 {
		return 2 * old
	}
	c := old
	for c < n {
		c += (c + 3*256) / 4
	}
	return c
}

// grown charges the guard's own slice (own[i]) when append has grown it.
func (g *guard) grown(i, capacity int, elem int64) error {
	if capacity == g.own[i] {
		return nil
	}
	g.own[i] = capacity
	return g.charge(alloc(int64(capacity) * elem))
}

func (g *guard) underflow(want int) error {
	return g.malformed(fmt.Errorf("%s needs %d value(s) on the stack, it has %d", g.op.name, want, len(g.slots)-g.base))
}

func (g *guard) charge(n int64) error {
	if g.cost += n; g.cost > g.limit {
		return &BudgetError{Size: g.size, Budget: "memory", Limit: g.limit, Offset: g.opAt}
	}
	return nil
}

func (g *guard) malformed(err error) error {
	return &ReadError{Offset: g.opAt, Size: g.size, Err: err}
}
