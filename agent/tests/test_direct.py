"""The direct reading of the allocator's counters (gputop._direct), over
memory laid out as torch's native allocator (fakegpu.AllocatorMemory) and
read for real through /proc/self/mem and ctypes."""

from __future__ import annotations

import ctypes
import struct

import pytest
from conftest import LineServer
from fakegpu import FakeBackend, FakeGPU, MiB, install
from test_agent import frames, of_type

import gputop
from gputop import _direct
from gputop._torch import counters


def installed(ndev: int = 1, **kw) -> tuple[FakeGPU, FakeBackend]:
    gpu = FakeGPU(ndev, in_memory=True, **kw)
    return gpu, gpu.install()


def test_block_is_the_fake_allocators_memory():
    # the fake lays its counters out as torch does; the stats call's dict,
    # put back in that order, is those very bytes
    gpu = FakeGPU(1, in_memory=True)
    gpu.alloc(0, 5 * MiB)
    gpu.free(0, 1 * MiB)
    raw = ctypes.string_at(gpu.mem.counters_address(0), _direct.SIZE)
    assert _direct.block(gpu.stats(0)) == raw
    assert counters(raw) == counters(gpu.stats(0))
    assert counters(raw)[:3] == (4 * MiB, 6 * MiB, 5 * MiB)


def test_locate_finds_every_devices_counters_past_a_decoy():
    gpu = FakeGPU(3, in_memory=True)
    gpu.alloc(1, 3 * MiB)
    mem = _direct.Memory()
    try:
        found = _direct.locate(mem.read, gpu.mem.address, 3, gpu.stats, [1])
    finally:
        mem.close()
    assert found == [gpu.mem.counters_address(d) for d in range(3)]


def test_locate_says_why_not():
    gpu = FakeGPU(1, in_memory=True)
    mem = _direct.Memory()
    try:
        assert _direct.locate(mem.read, gpu.mem.address, 1, gpu.stats, []) == \
            "no device has reserved memory yet"
        gpu.alloc(0, MiB)
        # the wrong device count: no vector of that length
        assert _direct.locate(mem.read, gpu.mem.address, 2, gpu.stats, [0]) == \
            "the per-device counters were not found"
        # a root that leads nowhere readable
        assert _direct.locate(mem.read, 0x1000, 1, gpu.stats, [0]) == \
            "the per-device counters were not found"
    finally:
        mem.close()


def test_memory_read_stops_where_memory_ends():
    buf = ctypes.create_string_buffer(b"counters", 8)
    mem = _direct.Memory()
    try:
        assert mem.read(ctypes.addressof(buf), 8) == b"counters"
        assert mem.read(0x1000, 64) == b""  # below mmap_min_addr: never mapped
        assert mem.read(0, 8) == b""
    finally:
        mem.close()


def test_ticks_read_in_place_without_a_stats_call():
    gpu, src = installed(2)
    assert src.reading() == "stats call: searching"
    src.maintain([0, 1])
    # nothing reserved yet: nothing to recognise, keep searching
    for _ in range(_direct.LOCATE_ATTEMPTS):  # however long that takes
        src.maintain([0, 1])
    assert src.reading() == "stats call: searching (no device has reserved memory yet)"
    gpu.alloc(0, 7 * MiB)
    src.maintain([0, 1])
    assert src.reading() == "direct"
    readers = dict(src.tick_readers([0, 1]))
    calls = gpu.calls
    raw = readers[0]()
    assert isinstance(raw, bytes) and gpu.calls == calls
    assert counters(raw)[:3] == (7 * MiB, 8 * MiB, 7 * MiB)
    # the same reader follows the allocator
    gpu.alloc(1, 3 * MiB)
    gpu.free(0, 7 * MiB)
    assert counters(readers[0]())[:3] == (0, 8 * MiB, 7 * MiB)
    assert counters(readers[1]())[:3] == (3 * MiB, 4 * MiB, 3 * MiB)
    # snapshot()'s reading too
    assert src.read(1)[:2] == (3 * MiB, 4 * MiB)
    assert gpu.calls == calls


def test_a_copy_between_current_and_peak_is_mended():
    # torch raises a Stat's current, then its peak: a copy in between
    words = [0] * _direct.WORDS
    words[0], words[1] = 9 * MiB, 8 * MiB  # allocated current past its peak
    words[12], words[13] = 10 * MiB, 10 * MiB
    c = counters(struct.pack(f"<{_direct.WORDS}q", *words))
    assert (c.allocated, c.peak, c.reserved, c.reserved_peak) == (9 * MiB, 9 * MiB, 10 * MiB, 10 * MiB)


def test_disagreeing_with_the_stats_call_goes_back_to_it():
    gpu, src = installed(1)
    gpu.alloc(0, 3 * MiB)
    src.maintain([0])
    assert src.reading() == "direct"
    # the counters move elsewhere: what was found is stale from now on
    gpu.mem.stats_at += 8
    gpu.alloc(0, 2 * MiB)
    for _ in range(_direct.DISAGREEMENTS - 1):
        src.maintain([0])
        assert src.reading() == "direct"
    src.maintain([0])
    assert src.reading() == "stats call: it disagreed with the stats call on cuda:0"
    (d, read), = src.tick_readers([0])
    assert counters(read()).allocated == 5 * MiB
    assert src.read(0).allocated == 5 * MiB
    gpu.alloc(0, MiB)
    src.maintain([0])  # for good
    assert src.reading().startswith("stats call: it disagreed")


def test_one_agreeing_check_clears_earlier_disagreements():
    gpu, src = installed(1)
    gpu.alloc(0, 3 * MiB)
    src.maintain([0])
    for _ in range(_direct.DISAGREEMENTS - 1):
        gpu.mem.stats_at += 8
        gpu.alloc(0, MiB)
        src.maintain([0])
        gpu.mem.stats_at -= 8
        gpu.alloc(0, MiB)
    src.maintain([0])  # agrees
    gpu.mem.stats_at += 8
    gpu.alloc(0, MiB)
    src.maintain([0])
    assert src.reading() == "direct"


def test_another_allocator_installed_goes_back_to_the_stats_call():
    gpu = FakeGPU(1, in_memory=True)
    root = [gpu.mem.address]
    src = install(gpu.stats, gpu.devices, allocator_root=lambda: root[0])
    gpu.alloc(0, MiB)
    src.maintain([0])
    assert src.reading() == "direct"
    root[0] += 4096
    src.maintain([0])
    assert src.reading() == "stats call: another allocator was installed"
    assert dict(src.tick_readers([0]))[0]() == gpu.stats(0)


def test_search_gives_up_after_a_few_tries():
    gpu = FakeGPU(1, in_memory=True)
    nothing = ctypes.create_string_buffer(2 * _direct.ROOT_SPAN)  # all it searches, and zeros
    src = install(gpu.stats, gpu.devices,
                            allocator_root=lambda: ctypes.addressof(nothing))
    gpu.alloc(0, MiB)
    for _ in range(_direct.LOCATE_ATTEMPTS - 1):
        src.maintain([0])
        assert src.reading() == "stats call: searching (the per-device counters were not found)"
    src.maintain([0])
    assert src.reading() == "stats call: the per-device counters were not found"


@pytest.mark.parametrize("error, why", [
    (_direct.Unavailable("the cudaMallocAsync allocator keeps no such counters"),
     "the cudaMallocAsync allocator keeps no such counters"),
    (KeyError("reserved_bytes"), "KeyError: 'reserved_bytes'"),
])
def test_an_error_while_searching_is_a_reason_not_an_exception(error, why):
    gpu = FakeGPU(1, in_memory=True)

    def root() -> int:
        raise error

    src = install(gpu.stats, gpu.devices, allocator_root=root)
    src.maintain([0])
    assert src.reading() == f"stats call: {why}"


def test_torch_root_names_what_is_missing(tmp_path):
    class Cuda:
        backend = "native"

        def get_allocator_backend(self) -> str:
            return self.backend

    class Torch:
        __file__ = str(tmp_path / "torch" / "__init__.py")
        cuda = Cuda()

    t = Torch()
    t.cuda.backend = "cudaMallocAsync"
    with pytest.raises(_direct.Unavailable, match="the cudaMallocAsync allocator keeps no such counters"):
        _direct.torch_root(t)()
    t.cuda.backend = "native"
    with pytest.raises(_direct.Unavailable, match=r"torch/lib/libc10_cuda.so is not loaded"):
        _direct.torch_root(t)()


def test_gputop_direct_0_keeps_the_stats_call(monkeypatch):
    monkeypatch.setenv("GPUTOP_DIRECT", "0")
    gpu, src = installed(1)
    gpu.alloc(0, MiB)
    src.maintain([0])
    assert src.reading() == "stats call: turned off by GPUTOP_DIRECT=0"


@pytest.mark.parametrize("direct", [True, False])
def test_agent_streams_the_same_counters_either_way(server: LineServer, monkeypatch, direct):
    if not direct:
        monkeypatch.setenv("GPUTOP_DIRECT", "0")
    gpu, _ = installed(2)
    gpu.alloc(0, 3 * MiB)
    gpu.alloc(1, 5 * MiB)
    h = gputop.attach(rate_hz=200)
    want = "direct" if direct else "stats call: turned off by GPUTOP_DIRECT=0"
    assert server.wait(lambda: h.status()["reading"] == want)
    n = len(of_type(server.lines(), "sample"))
    assert server.wait(lambda: len(of_type(server.lines(), "sample")) >= n + 40)
    gpu.free(0, 3 * MiB)
    assert server.wait(lambda: of_type(server.lines(), "sample")[-2]["allocated"] == 0
                       or of_type(server.lines(), "sample")[-1]["allocated"] == 0)
    h.detach()
    assert server.wait(lambda: frames(server.lines(0))[-1]["type"] == "bye")
    samples = of_type(server.lines(), "sample")
    last = {s["dev"]: s for s in samples}
    assert (last[0]["allocated"], last[0]["reserved"], last[0]["peak"]) == (0, 4 * MiB, 3 * MiB)
    assert (last[1]["allocated"], last[1]["reserved"], last[1]["peak"]) == (5 * MiB, 6 * MiB, 5 * MiB)
    if direct:
        # stats calls to find the counters and for the once-a-second check,
        # never one per sample
        assert gpu.calls < len(samples) / 4
    else:
        assert gpu.calls >= len(samples)
