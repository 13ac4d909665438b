package memdump

// The pickle opcodes as the guard (guard.go) sees them: how each one's
// argument is laid out, what it does to the unpickler's stack and memo,
// and what gopickle allocates for it. The layouts are Python's
// (pickletools); the effects and the costs are gopickle v0.2.0's
// (pickle/pickle.go), measured: a cost is cumulative bytes allocated, Go's
// size classes included, so that the sum over a file bounds what decoding
// it allocates (FuzzRead holds them to that).

// argKind is how an opcode's argument is laid out after it.
type argKind uint8

const (
	argNone  argKind = iota
	argFixed         // n little-endian bytes
	argLen           // an n-byte little-endian length, then that many bytes
	argLines         // n lines, each ending in '\n'
	argFrame         // FRAME: the 8-byte length of the frame that follows
)

// effect is what an opcode does to the stack (the values since the last
// MARK: gopickle keeps each MARK's values in a slice of their own) and
// the memo, once its argument is read.
type effect uint8

const (
	effNone     effect = iota
	effPush            // a value that is no list or dict
	effPop             // pops pop values, pushes one that is no list or dict
	effNewList         // EMPTY_LIST
	effNewDict         // EMPTY_DICT
	effDup             // DUP
	effGet             // GET, BINGET, LONG_BINGET: the memo's value at the argument
	effPut             // PUT, BINPUT, LONG_BINPUT: the top value into the memo at the argument
	effMemoize         // MEMOIZE: the top value into the memo at its length
	effAppend          // APPEND: the top value into the list below it
	effSetItem         // SETITEM: the top two into the dict below them
	effList            // LIST: the values since the MARK become a list
	effTuple           // TUPLE: ... a tuple
	effDict            // DICT: ... a dict of their pairs
	effAppends         // APPENDS: the values since the MARK into the list below it
	effSetItems        // SETITEMS: their pairs into the dict below it
	effMark            // MARK: a new, empty stack
	effPopMark         // POP_MARK: back to the stack before the MARK
	effPopAny          // POP: the top value, or the MARK when the stack is empty
	effStop            // STOP: the result
	effRefused         // none of a torch dump's: refused
)

type opcode struct {
	name     string
	arg      argKind
	n        int  // the argument's size, its length's width, or its lines
	signed   bool // a length that gopickle reads as signed (BINSTRING, LONG4)
	eff      effect
	pop      int   // effPop
	cost     int64 // allocated whatever its argument
	strCopy  bool  // argLen: the bytes are copied again into a string
	integer  bool  // LONG1, LONG4: bytes of an integer (decodeLong)
	perByte  int64 // argLines: per byte of the lines
	maxArg   int64 // argLen, argLines: longer is refused (0: only the file bounds it)
	refusing string
}

// What values cost gopickle beyond their opcode's own cost.
const (
	slot      = 16  // a value in a stack or list slice: an interface
	entry     = 32  // a dict entry: two interfaces
	memoEntry = 224 // a new key in gopickle's memo map and in the guard's, just after both doubled
	// a value appended to a list (or dict entry set) the guard cannot
	// follow: append's growth copies each slot ~5 times past 256, and
	// size classes round up; gopickle refuses such appends (only lists
	// and dicts take them), so this is a bound never met
	unknownAppend = 8 * slot
	unknownSet    = 8 * entry
	maxIntBytes   = 32 // LONG1/LONG4 longer than this are refused (decodeLong is quadratic)
	maxIntLine    = 80 // LONG's decimal digits: the same bound (math/big's parsing is quadratic too)
	maxMemoLine   = 32 // GET/PUT's decimal memo index
)

// alloc is what gopickle's make of n bytes costs with Go's size classes:
// at most a quarter more, and 16 bytes.
func alloc(n int64) int64 { return n + n/4 + 16 }

var opcodes [256]*opcode

func init() {
	op := func(c byte, name string, arg argKind, n int, eff effect, cost int64) *opcode {
		o := &opcode{name: name, arg: arg, n: n, eff: eff, cost: cost}
		opcodes[c] = o
		return o
	}
	str := func(c byte, name string, width int, signed, copied bool) {
		o := op(c, name, argLen, width, effPush, 32)
		o.signed, o.strCopy = signed, copied
	}
	lines := func(c byte, name string, n int, eff effect, cost, maxArg int64) {
		// readLine appends to a 32-byte slice (growing it: at most four
		// times the line), and the line is copied into a string
		o := op(c, name, argLines, n, eff, cost+int64(n)*64)
		o.perByte, o.maxArg = 6, maxArg
	}
	refuse := func(c byte, name, why string) { op(c, name, argNone, 0, effRefused, 0).refusing = why }

	// the stack and the memo
	op('(', "MARK", argNone, 0, effMark, 256) // a 16-slot stack
	op('.', "STOP", argNone, 0, effStop, 0)
	op('0', "POP", argNone, 0, effPopAny, 0)
	op('1', "POP_MARK", argNone, 0, effPopMark, 0)
	op('2', "DUP", argNone, 0, effDup, 0)
	op('h', "BINGET", argFixed, 1, effGet, 0)
	op('j', "LONG_BINGET", argFixed, 4, effGet, 16)
	lines('g', "GET", 1, effGet, 16, maxMemoLine)
	op('q', "BINPUT", argFixed, 1, effPut, 0)
	op('r', "LONG_BINPUT", argFixed, 4, effPut, 16)
	lines('p', "PUT", 1, effPut, 0, maxMemoLine)
	op('\x94', "MEMOIZE", argNone, 0, effMemoize, 0)
	op('\x80', "PROTO", argFixed, 1, effNone, 0)
	op('\x95', "FRAME", argFrame, 8, effNone, 16+48) // its length's buffer, a bytes.Reader

	// numbers (an int past 255 or a float is boxed: 8 bytes; a read of
	// 2 to 8 bytes: a buffer of 8)
	op('N', "NONE", argNone, 0, effPush, 0)
	op('\x88', "NEWTRUE", argNone, 0, effPush, 0)
	op('\x89', "NEWFALSE", argNone, 0, effPush, 0)
	op('K', "BININT1", argFixed, 1, effPush, 0)
	op('M', "BININT2", argFixed, 2, effPush, 16)
	op('J', "BININT", argFixed, 4, effPush, 16)
	op('G', "BINFLOAT", argFixed, 8, effPush, 16)
	lines('I', "INT", 1, effPush, 16, 0)
	lines('F', "FLOAT", 1, effPush, 16, 0)
	lines('L', "LONG", 1, effPush, 16+32*maxIntLine, maxIntLine)
	long1 := op('\x8a', "LONG1", argLen, 1, effPush, 0)
	long4 := op('\x8b', "LONG4", argLen, 4, effPush, 0)
	long1.integer, long1.maxArg = true, maxIntBytes
	long4.integer, long4.maxArg, long4.signed = true, maxIntBytes, true

	// strings and bytes: read into a buffer; a string copies it again
	str('U', "SHORT_BINSTRING", 1, false, true)
	str('T', "BINSTRING", 4, true, true)
	str('\x8c', "SHORT_BINUNICODE", 1, false, true)
	str('X', "BINUNICODE", 4, false, true)
	str('\x8d', "BINUNICODE8", 8, false, true)
	str('C', "SHORT_BINBYTES", 1, false, false)
	str('B', "BINBYTES", 4, false, false)
	str('\x8e', "BINBYTES8", 8, false, false)
	str('\x96', "BYTEARRAY8", 8, false, false)
	opcodes['\x96'].cost = 64
	lines('S', "STRING", 1, effPush, 16, 0)
	lines('V', "UNICODE", 1, effPush, 16, 0)

	// containers: a list starts with 4 slots, a dict with 4 entries
	op(']', "EMPTY_LIST", argNone, 0, effNewList, 24+4*slot)
	op('}', "EMPTY_DICT", argNone, 0, effNewDict, 24+4*entry)
	op(')', "EMPTY_TUPLE", argNone, 0, effPush, 32)
	op('a', "APPEND", argNone, 0, effAppend, 0)
	op('s', "SETITEM", argNone, 0, effSetItem, 0)
	op('\x85', "TUPLE1", argNone, 0, effPop, 24+1*slot+8).pop = 1
	op('\x86', "TUPLE2", argNone, 0, effPop, 24+2*slot+8).pop = 2
	op('\x87', "TUPLE3", argNone, 0, effPop, 24+3*slot+8).pop = 3
	op('l', "LIST", argNone, 0, effList, 32)
	op('t', "TUPLE", argNone, 0, effTuple, 32)
	op('d', "DICT", argNone, 0, effDict, 24+4*entry)
	op('e', "APPENDS", argNone, 0, effAppends, 0)
	op('u', "SETITEMS", argNone, 0, effSetItems, 0)

	// a class by name: gopickle asks findClass, which refuses every one
	// but the three gopickle makes itself (inert without the opcodes
	// refused below)
	lines('c', "GLOBAL", 2, effPush, 64, 0)
	op('\x93', "STACK_GLOBAL", argNone, 0, effPop, 64).pop = 2

	const objects = "builds an object"
	refuse('R', "REDUCE", objects)
	refuse('b', "BUILD", objects)
	refuse('i', "INST", objects)
	refuse('o', "OBJ", objects)
	refuse('\x81', "NEWOBJ", objects)
	refuse('\x92', "NEWOBJ_EX", objects)
	const sets = "makes a set (hashing each of its values)"
	refuse('\x8f', "EMPTY_SET", sets)
	refuse('\x90', "ADDITEMS", sets)
	refuse('\x91', "FROZENSET", sets)
	const outside = "names something outside the file"
	refuse('P', "PERSID", outside)
	refuse('Q', "BINPERSID", outside)
	refuse('\x82', "EXT1", outside)
	refuse('\x83', "EXT2", outside)
	refuse('\x84', "EXT4", outside)
	refuse('\x97', "NEXT_BUFFER", outside)
	refuse('\x98', "READONLY_BUFFER", outside)
}
