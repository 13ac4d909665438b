"""Reading the caching allocator's counters where they live.

``torch._C._cuda_memoryStats(i)`` copies one device's counters (a
``DeviceStats``: a plain struct of int64s inside the allocator's per-device
object) under the allocator's lock, then builds a nested dict of some 250
Python objects from them: about 22 µs on an H200, with the GIL held, at
every tick. The counters gputop streams are 496 bytes of that struct, and
the struct stays where it is for the life of the process. Once found and
checked word for word against a stats call, a tick copies them with one
``memoryview.tobytes()`` (tens of nanoseconds) and no dict is built.

Finding them. ``c10::cuda::CUDACachingAllocator::allocator``, exported by
libc10_cuda.so, points to the native allocator object; that object holds a
``std::vector`` of pointers to the per-device allocators, and each of those
holds its ``DeviceStats``. Nothing is assumed about these objects' layouts:
the vector is recognised by its length (the device count) and the counters
by their values. Only ``DeviceStats``' own order is relied on, from
``allocated_bytes`` to ``num_ooms`` (as in torch 2.11), and it is checked
against the stats call before use. While searching, memory is read
through /proc/self/mem, which fails cleanly where a pointer leads nowhere.

The reading is trusted only while it agrees with the stats call: once a
second it is compared again, word for word, and three disagreements in a
row, or another allocator installed, send the agent back to the stats call
for good. ``GPUTOP_DIRECT=0`` keeps it on the stats call from the start.
"""

from __future__ import annotations

import os
import struct
from typing import Any, Callable, Mapping, Sequence

from . import _env

SYMBOL = "_ZN3c104cuda20CUDACachingAllocator9allocatorE"

_POOLS = ("all", "small_pool", "large_pool")  # StatType order
_FIELDS = ("current", "peak", "allocated", "freed")  # Stat's members, in order
# DeviceStats from allocated_bytes on: each a StatArray of 3 Stats of 4 int64s
_ARRAYS = ("allocated_bytes", "reserved_bytes", "active_bytes", "inactive_split_bytes",
           "requested_bytes")
_ARRAY = 12 * 8
WORDS = len(_ARRAYS) * 12 + 2  # ... then num_alloc_retries, num_ooms
SIZE = WORDS * 8
_BLOCK = struct.Struct(f"<{WORDS}q")
# allocated current, peak | reserved current, peak | inactive_split_bytes
# current | num_alloc_retries, num_ooms
_PICK = struct.Struct("<2q80x2q176xq184x2q")
_TRIPLE = struct.Struct("<3Q")

PAGE = 4096
# The native allocator object: its sharded mutexes and block maps come before
# the vector (about 7 KiB in torch 2.x).
ROOT_SPAN = 1 << 15
# A per-device allocator object, far enough to cover its counters (a few
# hundred bytes in).
OBJECT_SPAN = 1 << 14
# Reads around one stats call until nothing changed during it: while
# searching, and in the once-a-second check (where a check that cannot tell
# is simply skipped).
TRIES = 50
CHECK_TRIES = 3
LOCATE_ATTEMPTS = 5  # searches that found nothing before giving up
DISAGREEMENTS = 3  # checks in a row that disagree before giving up

# why a search found nothing: only NOT_FOUND counts towards giving up
NOTHING_YET = "no device has reserved memory yet"
UNSTABLE = "the allocator kept changing while it was read"
NOT_FOUND = "the per-device counters were not found"


def words(stats: Mapping[str, Any]) -> tuple[int, ...]:
    """The counters of a stats call, in DeviceStats' memory order."""
    out: list[int] = []
    for name in _ARRAYS:
        arr = stats[name]
        for pool in _POOLS:
            s = arr[pool]
            out.extend(int(s[f]) for f in _FIELDS)
    out.append(int(stats["num_alloc_retries"]))
    out.append(int(stats["num_ooms"]))
    return tuple(out)


def block(stats: Mapping[str, Any]) -> bytes:
    """The bytes the counters of a stats call occupy in the allocator."""
    return _BLOCK.pack(*words(stats))


def counters(raw: bytes) -> tuple[int, int, int, int, int, int, int]:
    """gputop's counters (in _backend.Counters' order) out of a copy of the block."""
    a, ap, r, rp, inactive, retries, ooms = _PICK.unpack(raw)
    # Copied without the allocator's lock: a Stat's peak is updated just
    # after its current, so a copy made between the two is mended here.
    return a, r, ap if ap > a else a, rp if rp > r else r, inactive, retries, ooms


class Memory:
    """This process's memory, read through /proc/self/mem: an unmapped
    address gives a short read instead of a crash."""

    def __init__(self) -> None:
        self._fd = os.open("/proc/self/mem", os.O_RDONLY | os.O_CLOEXEC)

    def read(self, addr: int, n: int) -> bytes:
        """Up to n bytes from addr, stopping at the first unreadable page."""
        out = bytearray()
        while n > 0 and 0 < addr < 1 << 63:
            step = min(n, PAGE - addr % PAGE)
            try:
                b = os.pread(self._fd, step, addr)
            except OSError:
                break
            if not b:
                break
            out += b
            addr += len(b)
            n -= len(b)
        return bytes(out)

    def close(self) -> None:
        try:
            os.close(self._fd)
        except OSError:
            pass


def agrees(read: Callable[[], bytes], stats: Callable[[], Mapping[str, Any]],
           tries: int = TRIES) -> bool | None:
    """Whether memory read around a stats call holds that call's counters:
    True or False once the memory did not change during a call, None when
    it changed every time."""
    for _ in range(tries):
        before = read()
        want = block(stats())
        after = read()
        if len(before) != SIZE:
            return False
        if before == after:
            return before == want
    return None


def locate(read: Callable[[int, int], bytes], root: int, count: int,
           stats: Callable[[int], Mapping[str, Any]], used: Sequence[int]) -> list[int] | str:
    """The counters' addresses for devices 0..count-1, or why not found.

    read(addr, n): memory, short where unreadable. root: the native
    allocator object. stats(i): a stats call. used: devices whose allocator
    has reserved memory at some point, whose counters can be recognised.
    """
    if not used:
        return NOTHING_YET
    region = read(root, ROOT_SPAN)
    span = 8 * count
    unstable = False
    for off in range(0, len(region) - _TRIPLE.size + 1, 8):
        begin, end, cap = _TRIPLE.unpack_from(region, off)
        if begin == 0 or begin % 8 or end - begin != span or cap < end:
            continue
        table = read(begin, span)
        if len(table) != span:
            continue
        ptrs = list(struct.unpack(f"<{count}Q", table))
        if any(p == 0 or p % 8 for p in ptrs):
            continue
        found = _counters_in(read, ptrs, stats, used)
        if type(found) is int:  # not a bool: False and None say why not
            return [p + found for p in ptrs]
        unstable = unstable or found is None
    return UNSTABLE if unstable else NOT_FOUND


def _counters_in(read: Callable[[int, int], bytes], ptrs: Sequence[int],
                 stats: Callable[[int], Mapping[str, Any]], used: Sequence[int]) -> int | bool | None:
    """The counters' offset in the per-device objects ptrs, once every used
    device agrees there; False when not there, None when never still."""
    first = used[0]
    obj = read(ptrs[first], OBJECT_SPAN)
    # reserved_bytes only changes when the allocator takes memory from the
    # driver or gives it back, so it is the part to search for
    reserved = block(stats(first))[_ARRAY:2 * _ARRAY]
    k = obj.find(reserved)
    while k != -1 and (k % 8 or k < _ARRAY):
        k = obj.find(reserved, k + 1)
    if k == -1:
        return False
    base = k - _ARRAY
    for d in used:
        addr = ptrs[d] + base
        ok = agrees(lambda: read(addr, SIZE), lambda: stats(d))
        if not ok:
            return ok
    return base


class Unavailable(Exception):
    """This torch has no native allocator counters to read in place."""


def torch_root(torch: Any) -> Callable[[], int | None]:
    """What `allocator` points to now, in this process's torch: a function
    that raises on its first call when it cannot tell."""
    cell: list[Any] = []

    def root() -> int | None:
        if not cell:
            backend = torch.cuda.get_allocator_backend()
            if backend != "native":
                raise Unavailable(f"the {backend} allocator keeps no such counters")
            import ctypes  # noqa: PLC0415 - only in the agent thread, once

            lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libc10_cuda.so")
            # RTLD_NOLOAD: the library torch loaded, or an error; never a second copy
            try:
                handle = ctypes.CDLL(lib, mode=os.RTLD_NOW | os.RTLD_NOLOAD)
            except OSError:
                raise Unavailable(f"{lib} is not loaded") from None
            cell.append(ctypes.c_void_p.in_dll(handle, SYMBOL))
        return cell[0].value

    return root


class Direct:
    """The agent's direct reading of one process's allocator.

    maintain() runs in the agent thread once a second: it searches until
    the counters are found, then checks them. views maps a device index to
    a memoryview over its counters while the reading is trusted.
    """

    def __init__(self, root: Callable[[], int | None], count: Callable[[], int],
                 stats: Callable[[int], Mapping[str, Any]]) -> None:
        self._root = root
        self._count = count
        self._stats = stats
        self.views: dict[int, memoryview] = {}
        self.off = ""  # why the stats call is used for good, once it is
        self.tried = ""  # why the last search found nothing
        self._at: int | None = None  # root when the counters were found
        self._attempts = 0
        self._disagree = 0
        self._next = 0  # the device the next check looks at
        if not _env.direct():
            self.stop("turned off by GPUTOP_DIRECT=0")

    @property
    def state(self) -> str:
        if self.off:
            return f"stats call: {self.off}"
        if self.views:
            return "direct"
        return f"stats call: searching ({self.tried})" if self.tried else "stats call: searching"

    def stop(self, why: str) -> None:
        self.off = why
        self.views = {}

    def maintain(self, devs: Sequence[int]) -> None:
        if self.off:
            return
        try:
            root = self._root()
            if self.views:
                if root != self._at:
                    self.stop("another allocator was installed")
                else:
                    self._check(devs)
            elif root:
                self._locate(root, devs)
        except Unavailable as e:
            self.stop(str(e))
        except Exception as e:  # a surprise here is a reason to stop, never to raise
            self.stop(f"{type(e).__name__}: {e}")

    def _locate(self, root: int, devs: Sequence[int]) -> None:
        # devices whose allocator ever took memory (reserved_bytes.all.allocated)
        used = [d for d in devs if words(self._stats(d))[12 + 2] > 0]
        count = self._count()
        mem = Memory()
        try:
            found = locate(mem.read, root, count, self._stats, used)
        finally:
            mem.close()
        if isinstance(found, str):
            self.tried = found
            if found == NOT_FOUND:
                self._attempts += 1
                if self._attempts >= LOCATE_ATTEMPTS:
                    self.stop(found)
            return
        import ctypes  # noqa: PLC0415 - only once the counters are found

        self.views = {i: memoryview((ctypes.c_char * SIZE).from_address(a)) for i, a in enumerate(found)}
        self._at = root

    def _check(self, devs: Sequence[int]) -> None:
        ds = [d for d in devs if d in self.views]
        if not ds:
            return
        d = ds[self._next % len(ds)]
        self._next += 1
        ok = agrees(self.views[d].tobytes, lambda: self._stats(d), CHECK_TRIES)
        if ok is False:
            self._disagree += 1
            if self._disagree >= DISAGREEMENTS:
                self.stop(f"it disagreed with the stats call on cuda:{d}")
        elif ok:
            self._disagree = 0

    def read(self, index: int) -> tuple[int, ...] | None:
        """Counters of a device, when its counters held still across two
        copies (then they are the allocator's state at one instant)."""
        v = self.views.get(index)
        if v is None:
            return None
        a = v.tobytes()
        if a != v.tobytes():
            return None
        return counters(a)
