"""A pretend CUDA caching allocator for tests: it keeps torch's counters the
way torch does (peaks, reserved rounded to 2 MiB segments, empty_cache,
reset_peak_memory_stats) and stands behind the agent's backend interface
(FakeBackend, installed with gputop._backend.install) as torch's allocator
would, so everything above the stats call runs for real on a machine
without a GPU.

It also keeps live blocks, as torch's torch.cuda.memory._snapshot() lists them: a CPU
tensor stands for a CUDA tensor by giving its storage a block
(tensor_block), cuBLAS workspaces are blocks of their own size
(workspace, freed by clear_workspaces), and whatever else was allocated is
one block that nothing owns. With GPUTOP_HOLDERS_DEVICE=cpu the holders
walk finds those CPU tensors, so an end row's attribution runs for real.

With in_memory=True it also keeps them where torch keeps them: in memory
laid out as the native allocator (AllocatorMemory), whose stats call copies
them from there, so the agent's direct reading runs for real too.

Its ``memory`` (FakeMemory) stands for torch.cuda.memory: allocation history
(_record_memory_history, _set_memory_metadata), and _snapshot() shaped as
torch's (segments of blocks with the Python frames that allocated them,
device_traces of alloc / free / oom entries), from the blocks above. Other
torches: backend="cudaMallocAsync", or history=False (no
_record_memory_history at all).

With layout=API it also has the allocator's layout as torch shows it
(FakeLayout: segments of blocks in pools, settings, counts; torch's
memory snapshot that raises, costs per block or lists a million blocks),
read through _torch.layout_reader over a torch of the API's age
(torch_like): "torch" (memory_snapshot takes include_traces;
allocator_settings in it; MemPool), "getter" (only
_accelerator_getAllocatorSettings), "env" (no settings from torch),
"nomempool" (no MemPool), "traces" (no include_traces: _snapshot(), with
the history), "none" (no memory snapshot at all). Without it the backend has no layout and says nothing."""

from __future__ import annotations

import ctypes
import struct
import sys
import threading
import time
import types
from typing import Any, Callable, Mapping, Sequence

from gputop import _backend, _direct, _torch, _torchlayout

MiB = 1 << 20
SEGMENT = 2 * MiB
CUBLAS_WORKSPACE = 32 * MiB  # torch's cuBLAS workspace on a Hopper GPU
CUBLASLT_WORKSPACE = 1 * MiB
TOTAL = 150754820096  # an H200's bytes, as torch reports them
CONTEXT = 512 * MiB  # what the CUDA context takes of the device

UUIDS = [
    # as torch reports them in some versions: no "GPU-" prefix
    "6b8e2f1c-3a4d-4e5f-8a9b-0c1d2e3f4a5b",
    "d1e2f3a4-b5c6-4d7e-8f90-a1b2c3d4e5f6",
]


POOLS = ("all", "small_pool", "large_pool")
FIELDS = ("current", "peak", "allocated", "freed")
# DeviceStats from allocated_bytes to requested_bytes, as the direct reading expects them
ARRAYS = ("allocated_bytes", "reserved_bytes", "active_bytes", "inactive_split_bytes",
          "requested_bytes")
WORDS = len(ARRAYS) * 12 + 2


class AllocatorMemory:
    """Memory laid out as torch's native caching allocator: an object whose
    std::vector (begin, end, capacity) points to per-device objects, each
    holding its DeviceStats after a mutex and four count StatArrays. Before
    the vector, a decoy of the same length whose pointers lead nowhere."""

    DECOY_AT = 64
    VECTOR_AT = 7104
    STATS_AT = 40 + 4 * 96  # where allocated_bytes starts in a per-device object

    def __init__(self, ndev: int) -> None:
        self.objects = [ctypes.create_string_buffer(2048) for _ in range(ndev)]
        self.table = (ctypes.c_uint64 * ndev)(*(ctypes.addressof(o) for o in self.objects))
        self.decoy = (ctypes.c_uint64 * ndev)(*([0x1000] * ndev))  # never mapped
        self.root = ctypes.create_string_buffer(8192)
        for at, arr in ((self.DECOY_AT, self.decoy), (self.VECTOR_AT, self.table)):
            a = ctypes.addressof(arr)
            struct.pack_into("<3Q", self.root, at, a, a + 8 * ndev, a + 8 * ndev)
        self.stats_at = self.STATS_AT

    @property
    def address(self) -> int:
        return ctypes.addressof(self.root)

    def counters_address(self, dev: int) -> int:
        return ctypes.addressof(self.objects[dev]) + self.stats_at

    def write(self, dev: int, words: list[int]) -> None:
        struct.pack_into(f"<{WORDS}q", self.objects[dev], self.stats_at, *words)

    def read(self, dev: int) -> tuple[int, ...]:
        return struct.unpack_from(f"<{WORDS}q", self.objects[dev], self.stats_at)


class FakeMemory:
    """torch.cuda.memory's history and snapshot functions over a FakeGPU's
    blocks, with torch's names, arguments and dict layout."""

    def __init__(self, gpu: "FakeGPU", backend: str = "native") -> None:
        self.gpu = gpu
        self.backend = backend
        self.calls: list[dict[str, Any]] = []  # _record_memory_history's arguments
        self.max_entries = 0  # recording while > 0
        self.stacks = ""
        self.traces: list[list[dict[str, Any]]] = [[] for _ in range(gpu.ndev)]
        self.frames: dict[tuple[int, int], list[dict[str, Any]]] = {}  # (dev, addr) -> frames
        self.snapshots = 0
        self._meta = threading.local()

    def _record_memory_history(self, enabled: Any = "all", context: Any = "all", stacks: str = "all",
                               max_entries: int = sys.maxsize, **kw: Any) -> None:
        self.calls.append(dict(enabled=enabled, context=context, stacks=stacks, max_entries=max_entries, **kw))
        if enabled is None:
            self.max_entries = 0
        else:
            self.max_entries, self.stacks = max_entries, stacks

    def _set_memory_metadata(self, metadata: str) -> None:
        self._meta.value = metadata

    def _get_memory_metadata(self) -> str:
        return getattr(self._meta, "value", "")

    def _memory_metadata_supported(self) -> bool:
        return self.backend == "native"

    def get_allocator_backend(self) -> str:
        return self.backend

    def event(self, dev: int, action: str, addr: int | None, size: int, **extra: Any) -> None:
        """A trace entry, as torch records it while history is on: the
        Python frames of the calling thread, innermost first."""
        if not self.max_entries:
            return
        frames = []
        f = sys._getframe(1)
        while f is not None:
            if f.f_code.co_filename != __file__:
                frames.append({"name": f.f_code.co_name, "filename": f.f_code.co_filename,
                               "line": f.f_lineno})
            f = f.f_back
        e: dict[str, Any] = {"action": action}
        if addr is not None:
            e["addr"] = addr
        e.update(size=size, stream=0, time_us=time.time_ns() // 1000, compile_context="N/A",
                 user_metadata=self._get_memory_metadata(), frames=frames, **extra)
        tr = self.traces[dev]
        tr.append(e)
        del tr[:-self.max_entries]
        if action == "alloc" and addr is not None:
            self.frames[(dev, addr)] = frames

    def _snapshot(self, device: Any = None, augment_with_fx_traces: bool = False) -> dict[str, Any]:
        """Every live block in a segment of its own, rounded up to 2 MiB
        (the rest an inactive block), as torch._C._cuda_memorySnapshot."""
        self.snapshots += 1
        segs = []
        for dev in range(self.gpu.ndev):
            for addr, size, asked in self.gpu.live_blocks(dev):
                total = -(-size // SEGMENT) * SEGMENT
                blocks = [{"address": addr, "size": size, "requested_size": max(asked, 0),
                           "state": "active_allocated", "frames": self.frames.get((dev, addr), [])}]
                if total > size:
                    blocks.append({"address": addr + size, "size": total - size, "requested_size": 0,
                                   "state": "inactive", "frames": []})
                segs.append({"device": dev, "address": addr, "total_size": total, "allocated_size": size,
                             "active_size": size, "requested_size": max(asked, 0), "stream": 0,
                             "segment_type": "large" if total > MiB else "small",
                             "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
                             "blocks": blocks})
        return {"segments": segs, "device_traces": [list(t) for t in self.traces],
                "allocator_settings": {}, "external_annotations": []}


def segment(blocks: Sequence[tuple[int, str]], pool: tuple[int, int] = (0, 0), expandable: bool = False,
            device: int = 0, address: int = 0x7E00_0000_0000) -> dict[str, Any]:
    """A segment as torch's memory snapshot lists it, made of blocks
    (size, state: "active_allocated", "active_pending_free", "inactive")."""
    out, addr = [], address
    for size, state in blocks:
        out.append({"address": addr, "size": size, "requested_size": size if state != "inactive" else 0,
                    "state": state})
        addr += size
    total = sum(s for s, _ in blocks)
    alloc = sum(s for s, st in blocks if st == "active_allocated")
    active = sum(s for s, st in blocks if st != "inactive")
    return {"device": device, "address": address, "total_size": total, "allocated_size": alloc,
            "active_size": active, "requested_size": alloc, "stream": 0,
            "segment_type": "large" if total > MiB else "small", "segment_pool_id": pool,
            "is_expandable": expandable, "frames": [], "blocks": out}


class FakeLayout:
    """The allocator's structure on each device, as torch's memory snapshot
    shows it, for the layout readings: segments the test sets (else one
    per live block, as FakeMemory's), settings, and how a reading goes."""

    API = ("torch", "getter", "env", "nomempool", "traces", "none")

    def __init__(self, gpu: "FakeGPU", api: str) -> None:
        assert api in self.API, api
        self.gpu = gpu
        self.api = api
        self.segments: dict[int, list[dict[str, Any]]] = {}  # by device; else from the live blocks
        # torch 2.15's allocator_settings, as a CPU build reports them
        self.settings: dict[str, Any] = {
            "PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
            "expandable_segments": False, "pinned_num_register_threads": 1,
            "release_lock_on_cudamalloc": False, "roundup_power2_divisions": {"1": 0, "2": 0}}
        self.conf = ""  # what _accelerator_getAllocatorSettings returns
        self.error: BaseException | None = None  # the snapshot raises it
        self.cost_per_block = 0.0  # CPU seconds a snapshot burns per block
        self.counts: dict[int, tuple[int, int, int]] = {}  # dev -> (segments, active, inactive_split) told
        self.calls = 0  # readings of torch's memory snapshot
        self.args: list[Any] = []  # what each was called with

    def of(self, dev: int) -> list[dict[str, Any]]:
        segs = self.segments.get(dev)
        if segs is not None:
            return segs
        out = []
        for addr, size, _ in self.gpu.live_blocks(dev):
            total = -(-size // SEGMENT) * SEGMENT
            blocks = [(size, "active_allocated")] + ([(total - size, "inactive")] if total > size else [])
            out.append(segment(blocks, device=dev, address=addr))
        return out

    def count(self, dev: int) -> tuple[int, int, int]:
        """torch's segment, active and inactive_split counters of dev."""
        if dev in self.counts:
            return self.counts[dev]
        segs = self.of(dev)
        active = sum(1 for s in segs for b in s["blocks"] if b["state"] != "inactive")
        split = sum(1 for s in segs if len(s["blocks"]) > 1 for b in s["blocks"] if b["state"] == "inactive")
        return len(segs), active, split

    def memory_snapshot(self, arg: Any = None) -> dict[str, Any]:
        """torch._C._cuda_memorySnapshot: every device's segments."""
        self.calls += 1
        self.args.append(arg)
        if self.error is not None:
            raise self.error
        segs = [s for d in range(self.gpu.ndev) for s in self.of(d)]
        if self.cost_per_block:
            n = sum(len(s["blocks"]) for s in segs)
            end = time.thread_time() + self.cost_per_block * n
            while time.thread_time() < end:
                pass
        out = {"segments": segs, "device_traces": [[] for _ in range(self.gpu.ndev)]}
        if self.api == "torch" or self.api == "nomempool":
            out["allocator_settings"] = dict(self.settings)
        return out

    def torch_like(self) -> Any:
        """A torch of this API's age, with what _torch.layout_reader looks for."""
        gpu = self.gpu
        C = types.SimpleNamespace()
        memory = types.SimpleNamespace(get_allocator_backend=lambda: gpu.memory.backend
                                       if isinstance(gpu.memory, FakeMemory) else "native")
        if self.api == "traces":  # memory_snapshot() takes no include_traces: _snapshot()
            C._cuda_memorySnapshot = self.memory_snapshot
            memory.memory_snapshot = lambda: self.memory_snapshot(None)["segments"]
            memory._snapshot = lambda device=None: self.memory_snapshot(None)
        elif self.api != "none":
            C._cuda_memorySnapshot = self.memory_snapshot

            def memory_snapshot(mempool_id: Any = None, include_traces: bool = True) -> Any:
                return self.memory_snapshot((0, 0, include_traces))["segments"]

            memory.memory_snapshot = memory_snapshot
        if self.api in ("torch", "getter"):
            C._accelerator_getAllocatorSettings = lambda: self.conf
        if self.api != "nomempool":
            C._MemPool = object
        return types.SimpleNamespace(_C=C, cuda=types.SimpleNamespace(memory=memory))


class OldTorchMemory:
    """torch.cuda.memory of a torch without allocation history."""

    def _snapshot(self) -> dict[str, Any]:
        return {"segments": [], "device_traces": []}


class FakeBackend(_backend.Backend):
    """The agent's backend for a stats function shaped as torch's
    _cuda_memoryStats(i) and a device list: torch's backend as a process
    without a GPU can have it, made of _torch's own ways (counters, the
    direct reading, cleanup's steps, the history, the holders walk) over
    calls the test gives.

    devices lists {index, uuid, name, total} (or is a callable returning such
    a list, to simulate devices being initialised later). Keyword calls:
    synchronize(i), empty_cache(), reset_peak(i), ipc_collect(),
    clear_workspaces(), blocks(i) (live blocks: (address, size, asked)),
    workspace_sizes(i); version; memory (what stands for torch.cuda.memory:
    _record_memory_history, _snapshot, ...); allocator_root(): the
    address of an object laid out as torch's native allocator, for the
    direct reading (_direct); memory_info(i) ((free, total)) and
    cap_memory(i, cap) (set_per_process_memory_fraction's cap).
    """

    # CPU tensors stand for CUDA ones (GPUTOP_HOLDERS_DEVICE=cpu)
    tensor_device_types = frozenset({"cuda", "cpu"})
    counters = staticmethod(_torch.counters)

    def __init__(self, stats: Callable[[int], Mapping[str, Any]],
                 devices: Sequence[Mapping[str, Any]] | Callable[[], Sequence[Mapping[str, Any]]], *,
                 synchronize: Callable[[int], None] | None = None,
                 empty_cache: Callable[[], None] | None = None,
                 reset_peak: Callable[[int], None] | None = None,
                 ipc_collect: Callable[[], None] | None = None,
                 version: str = "",
                 allocator_root: Callable[[], int | None] | None = None,
                 clear_workspaces: Callable[[], None] | None = None,
                 blocks: Callable[[int], list[tuple[int, int, int]] | None] | None = None,
                 workspace_sizes: Callable[[int], set[int]] | None = None,
                 memory: Any = None, layout_torch: Any = None,
                 memory_info: Callable[[int], tuple[int, int]] | None = None,
                 cap_memory: Callable[[int, int], None] | None = None) -> None:
        self._stats = stats
        self._memory_info = memory_info
        self._cap_memory = cap_memory
        self._devices = devices
        self._calls = {"synchronize": synchronize, "empty_cache": empty_cache,
                       "reset_peak": reset_peak, "ipc_collect": ipc_collect}
        self._clear_workspaces = clear_workspaces
        self._blocks = blocks
        self._workspace_sizes = workspace_sizes
        self._version = version
        self._memory = memory
        self._layout_torch = layout_torch  # a torch for _torch.layout_reader; None: no layout
        self.limits: dict[int, int] = {}  # by device: what limit() says (set_per_process_memory_fraction's cap)
        self.held_back = ""  # what snapshot_imports() says: a test sets it
        self.snapshot_modules: tuple[str, ...] = ()  # what a dump's snapshot imports: a test sets it
        self._layout: _torchlayout.Reader | None = None
        self.oom_callbacks: list[Callable[[int, int, int, int], None]] = []
        self.init_calls: list[Callable[[], None]] = []  # at_init's, until FakeGPU.init_cuda
        # the direct reading, over memory the test laid out as torch's
        self.direct = (_direct.Direct(allocator_root, lambda: len(self._list()), stats)
                       if allocator_root is not None else None)

    def _list(self) -> list[dict[str, Any]]:
        d = self._devices() if callable(self._devices) else self._devices
        return [dict(x) for x in d]

    def available(self, import_module: bool = True) -> bool:
        return True

    def devices(self) -> list[int]:
        return [int(d["index"]) for d in self._list()]

    def info(self, index: int) -> dict[str, Any]:
        for d in self._list():
            if int(d["index"]) == index:
                return {"index": index, "uuid": _backend.normalize_uuid(d.get("uuid")),
                        "name": str(d.get("name", "")), "total": int(d.get("total", 0))}
        raise KeyError(f"no device {index}")

    def read_raw(self, index: int) -> Mapping[str, Any]:
        return self._stats(index)

    def read(self, index: int) -> _backend.Counters:
        return _torch.read(self.direct, self.read_raw, index)

    def tick_readers(self, devs: Sequence[int]) -> tuple[tuple[int, _backend.Reader], ...]:
        return _torch.tick_readers(self.direct, self.read_raw, devs)

    def maintain(self, devs: Sequence[int]) -> None:
        if self.direct is not None:
            self.direct.maintain(devs)

    def reading(self) -> str:
        return _torch.reading(self.direct)

    def version(self) -> str:
        return self._version

    def _call(self, name: str, *args: Any) -> None:
        h = self._calls[name]
        if h is not None:
            h(*args)

    def synchronize(self, index: int) -> None:
        self._call("synchronize", index)

    def empty_cache(self) -> None:
        self._call("empty_cache")

    def reset_peak(self, index: int) -> None:
        self._call("reset_peak", index)

    def ipc_collect(self) -> None:
        self._call("ipc_collect")

    def clear_workspaces(self) -> bool:
        if self._clear_workspaces is None:
            return False
        self._clear_workspaces()
        return True

    def cleanup_steps(self, devs: Sequence[int], reset_peak: bool) -> list[_backend.Step]:
        return _torch.cleanup_steps(self, devs, reset_peak)

    def blocks(self, index: int) -> list[tuple[int, int, int]] | None:
        if self.held_back:
            return None  # as torch's: no snapshot, no blocks
        return self._blocks(index) if self._blocks is not None else None

    def snapshot_imports(self) -> str:
        return self.held_back

    def workspace_sizes(self, index: int) -> set[int]:
        return self._workspace_sizes(index) if self._workspace_sizes is not None else set()

    def watch_ooms(self, cb: Callable[[int, int, int, int], None], initialising: bool = False) -> bool:
        self.oom_callbacks.append(cb)
        return True

    def at_init(self, fn: Callable[[], None]) -> str:
        """As torch's: now when the devices are up, else queued for
        FakeGPU.init_cuda (torch's lazy init) to run before the first
        allocation."""
        if self._list():
            fn()
        else:
            self.init_calls.append(fn)
        return ""

    def history(self, initialising: bool = False) -> _backend.History | None:
        if self._memory is None or not (initialising or self._list()):
            return None
        return _torch.TorchHistory(self._memory, self.snapshot_modules)

    def held_at(self, dev: int) -> dict[str, Any] | None:
        return _torch.held_at(dev)

    def row_walk(self, devs: Sequence[int], held: bool, ledger: bool) -> dict[int, dict[str, Any]] | None:
        return _torch.row_walk(devs, held, ledger)

    def holders_report(self, dev: int | None) -> dict[str, Any] | None:
        return _torch.holders_report(dev)

    def limit(self, index: int) -> int | None:
        return self.limits.get(index)

    def layout_size(self, index: int) -> tuple[int, int] | None:
        return _torchlayout.size(self._stats(index)) if self._layout_torch is not None else None

    def layouts(self, devs: Sequence[int], state: Any = None) -> dict[int, dict[str, Any]] | None:
        if self._layout_torch is None:
            return None
        if self._layout is None:
            self._layout = _torch.layout_reader(self._layout_torch)
        return self._layout.read(devs) if state is None else self._layout.read(devs, state)

    def layout_note(self) -> str:
        return self._layout.note if self._layout is not None else ""

    def memory_info(self, index: int) -> tuple[int, int]:
        if self._memory_info is None:
            return super().memory_info(index)
        return self._memory_info(index)

    def cap_memory(self, index: int, cap: int, total: int) -> None:
        if self._cap_memory is None:
            super().cap_memory(index, cap, total)
        else:
            self._cap_memory(index, cap)

    def oom(self, device: int, alloc: int, device_limit: int, device_free: int) -> None:
        """Call the registered observers as torch's allocator would on OOM."""
        for cb in list(self.oom_callbacks):
            cb(device, alloc, device_limit, device_free)


def install(stats: Callable[[int], Mapping[str, Any]],
            devices: Sequence[Mapping[str, Any]] | Callable[[], Sequence[Mapping[str, Any]]] = (),
            **calls: Any) -> FakeBackend:
    """A FakeBackend over stats and devices (see it for calls), in torch's place."""
    return _backend.install(FakeBackend(stats, devices, **calls))  # type: ignore[return-value]


class FakeGPU:
    def __init__(self, ndev: int = 1, initialised: int | None = None,
                 in_memory: bool = False, backend: str = "native", history: bool = True,
                 layout: str | None = None) -> None:
        self.lock = threading.Lock()
        self.ndev = ndev
        self.initialised = ndev if initialised is None else initialised
        self.c = [dict(allocated=0, reserved=0, peak=0, reserved_peak=0, inactive=0,
                       retries=0, ooms=0, alloc_total=0, free_total=0, segments_total=0)
                  for _ in range(ndev)]
        self.mem = AllocatorMemory(ndev) if in_memory else None
        # live blocks by device: address -> (size, size asked for)
        self.blocks: list[dict[int, tuple[int, int]]] = [{} for _ in range(ndev)]
        self.workspaces: list[set[int]] = [set() for _ in range(ndev)]
        self._next_addr = 0x7F00_0000_0000
        self.calls = 0
        self.log: list[str] = []
        self.source: Any = None
        self.memory: Any = FakeMemory(self, backend) if history else OldTorchMemory()
        self.layout = FakeLayout(self, layout) if layout is not None else None
        self.gone: set[int] = set()  # devices whose stats call fails (a device lost)
        # set_per_process_memory_fraction's cap by device: an allocation past
        # it fails as torch's does (alloc raises torch.OutOfMemoryError)
        self.caps: dict[int, int] = {}

    # ---- the allocator ----

    def alloc(self, dev: int, n: int) -> None:
        cap = self.caps.get(dev)
        if cap is not None:
            with self.lock:
                need = -(-(self.c[dev]["allocated"] + n) // SEGMENT) * SEGMENT
            if need > cap:
                self.oom(dev, n, cap)
                import torch

                raise torch.OutOfMemoryError(
                    f"CUDA out of memory. Tried to allocate {n / MiB:.2f} MiB. GPU {dev} has a total capacity of "
                    f"{TOTAL / (1 << 30):.2f} GiB, of which this process may use {cap / MiB:.2f} MiB")
        with self.lock:
            c = self.c[dev]
            c["allocated"] += n
            c["alloc_total"] += n
            need = -(-c["allocated"] // SEGMENT) * SEGMENT
            if need > c["reserved"]:
                c["segments_total"] += need - c["reserved"]
                c["reserved"] = need
            c["inactive"] = c["reserved"] - c["allocated"]
            c["peak"] = max(c["peak"], c["allocated"])
            c["reserved_peak"] = max(c["reserved_peak"], c["reserved"])
            self._store(dev)

    def free(self, dev: int, n: int) -> None:
        with self.lock:
            c = self.c[dev]
            c["allocated"] -= n
            c["free_total"] += n
            c["inactive"] = c["reserved"] - c["allocated"]
            self._store(dev)

    def tensor_block(self, dev: int, t: Any) -> int:
        """Allocate the block of a (CPU) tensor's storage, standing for a
        CUDA tensor there; returns its address."""
        st = t.untyped_storage()
        addr, n = st.data_ptr(), st.nbytes()
        size = -(-n // 512) * 512
        self.alloc(dev, size)
        with self.lock:
            self.blocks[dev][addr] = (size, n)
        self._event(dev, "alloc", addr, size)
        return addr

    def block(self, dev: int, size: int) -> int:
        """Allocate a block of size bytes (the caller's frames recorded
        while history is on); returns its address."""
        with self.lock:
            addr = self._next_addr
            self._next_addr += -(-size // SEGMENT) * SEGMENT + SEGMENT
        self.alloc(dev, size)
        with self.lock:
            self.blocks[dev][addr] = (size, size)
        self._event(dev, "alloc", addr, size)
        return addr

    def _event(self, dev: int, action: str, addr: int | None, size: int, **extra: Any) -> None:
        if isinstance(self.memory, FakeMemory):
            self.memory.event(dev, action, addr, size, **extra)

    def workspace(self, dev: int, size: int = CUBLAS_WORKSPACE) -> int:
        """Allocate a cuBLAS workspace, as the first matmul of a thread does."""
        with self.lock:
            addr = self._next_addr
            self._next_addr += size + SEGMENT
        self.alloc(dev, size)
        with self.lock:
            self.blocks[dev][addr] = (size, size)
            self.workspaces[dev].add(addr)
        return addr

    def free_block(self, dev: int, addr: int) -> None:
        with self.lock:
            size, _ = self.blocks[dev].pop(addr)
            self.workspaces[dev].discard(addr)
        self.free(dev, size)
        self._event(dev, "free_requested", addr, size)
        self._event(dev, "free_completed", addr, size)

    def clear_workspaces(self) -> None:
        """torch._C._cuda_clearCublasWorkspaces: every workspace freed."""
        with self.lock:
            self.log.append("clear_workspaces")
            todo = [(d, a) for d, ws in enumerate(self.workspaces) for a in ws]
        for d, a in todo:
            self.free_block(d, a)

    def live_blocks(self, dev: int) -> list[tuple[int, int, int]]:
        """(address, size, asked) of each live block, as torch's snapshot;
        what was allocated without a block is one block nothing owns."""
        with self.lock:
            out = [(a, s, r) for a, (s, r) in self.blocks[dev].items()]
            rest = self.c[dev]["allocated"] - sum(s for _, s, _ in out)
        if rest > 0:
            out.append((0x10_0000_0000 + dev * (1 << 36), rest, -1))
        return sorted(out)

    def set(self, dev: int, **kw: int) -> None:
        with self.lock:
            self.c[dev].update(kw)
            self._store(dev)

    def _store(self, dev: int) -> None:
        """The counters into the allocator's memory, as torch keeps them."""
        if self.mem is None:
            return
        c = self.c[dev]

        def arr(cur: int, peak: int, total: int, freed: int) -> list[int]:
            # all, small_pool (unused here), large_pool
            return [cur, peak, total, freed, 0, 0, 0, 0, cur, peak, total, freed]

        words = (arr(c["allocated"], c["peak"], c["alloc_total"], c["free_total"])
                 + arr(c["reserved"], c["reserved_peak"], c["segments_total"],
                       c["segments_total"] - c["reserved"])
                 + arr(c["allocated"], c["peak"], c["alloc_total"], c["free_total"])
                 + arr(c["inactive"], c["inactive"], 0, 0)
                 + arr(c["allocated"], c["peak"], c["alloc_total"], c["free_total"])
                 + [c["retries"], c["ooms"]])
        self.mem.write(dev, words)

    # ---- what torch offers ----

    def stats(self, i: int) -> dict[str, Any]:
        """Shaped like torch._C._cuda_memoryStats(i)."""
        if i in self.gone:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        with self.lock:
            self.calls += 1
            c = dict(self.c[i])
            words = self.mem.read(i) if self.mem is not None else None
        if words is not None:
            return self._counted(i, self._copied(words))

        def stat(cur: int, peak: int) -> dict[str, Any]:
            return {"all": {"current": cur, "peak": peak, "allocated": 0, "freed": 0},
                    "small_pool": {"current": 0, "peak": 0, "allocated": 0, "freed": 0},
                    "large_pool": {"current": cur, "peak": peak, "allocated": 0, "freed": 0}}

        return self._counted(i, {
            "allocated_bytes": stat(c["allocated"], c["peak"]),
            "reserved_bytes": stat(c["reserved"], c["reserved_peak"]),
            "inactive_split_bytes": stat(c["inactive"], c["inactive"]),
            "active_bytes": stat(c["allocated"], c["peak"]),
            "num_alloc_retries": c["retries"],
            "num_ooms": c["ooms"],
            "num_device_alloc": 0,
        })

    def _counted(self, i: int, stats: dict[str, Any]) -> dict[str, Any]:
        """With a layout: torch's segment / active / inactive_split counts."""
        if self.layout is not None:
            for name, n in zip(("segment", "active", "inactive_split"), self.layout.count(i)):
                stats[name] = {"all": {"current": n, "peak": n, "allocated": 0, "freed": 0}}
        return stats

    @staticmethod
    def _copied(words: tuple[int, ...]) -> dict[str, Any]:
        """The whole nested dict, built from the counters in memory."""
        out: dict[str, Any] = {}
        for k, name in enumerate(ARRAYS):
            w = words[12 * k:12 * k + 12]
            out[name] = {p: dict(zip(FIELDS, w[4 * j:4 * j + 4])) for j, p in enumerate(POOLS)}
        out["num_alloc_retries"], out["num_ooms"] = words[-2], words[-1]
        out["num_device_alloc"] = 0
        return out

    def devices(self) -> list[dict[str, Any]]:
        return [{"index": i, "uuid": UUIDS[i % len(UUIDS)], "name": "Fake H200",
                 "total": TOTAL} for i in range(self.initialised)]

    def memory_info(self, i: int) -> tuple[int, int]:
        """(free, total), as cudaMemGetInfo: what this process reserved is
        not free, nor is the CUDA context's 512 MiB."""
        with self.lock:
            return TOTAL - CONTEXT - self.c[i]["reserved"], TOTAL

    def cap_memory(self, i: int, cap: int) -> None:
        """set_per_process_memory_fraction: at most cap bytes reserved on device i."""
        with self.lock:
            self.log.append(f"cap {i} {cap}")
            self.caps[i] = cap

    def empty_cache(self) -> None:
        with self.lock:
            self.log.append("empty_cache")
            for dev, c in enumerate(self.c):
                c["reserved"] = -(-c["allocated"] // SEGMENT) * SEGMENT
                c["inactive"] = c["reserved"] - c["allocated"]
                self._store(dev)

    def reset_peak(self, i: int) -> None:
        with self.lock:
            self.log.append(f"reset_peak {i}")
            c = self.c[i]
            c["peak"], c["reserved_peak"] = c["allocated"], c["reserved"]
            self._store(i)

    def synchronize(self, i: int) -> None:
        with self.lock:
            self.log.append(f"synchronize {i}")

    def ipc_collect(self) -> None:
        with self.lock:
            self.log.append("ipc_collect")

    def install(self) -> Any:
        self.source = install(
            self.stats, self.devices, synchronize=self.synchronize,
            empty_cache=self.empty_cache, reset_peak=self.reset_peak,
            ipc_collect=self.ipc_collect, version="2.11.0+fake",
            allocator_root=(lambda: self.mem.address) if self.mem is not None else None,
            clear_workspaces=self.clear_workspaces, blocks=self.live_blocks,
            workspace_sizes=lambda dev: {CUBLAS_WORKSPACE, CUBLASLT_WORKSPACE},
            memory=self.memory, layout_torch=self.layout.torch_like() if self.layout is not None else None,
            memory_info=self.memory_info, cap_memory=self.cap_memory)
        return self.source

    def init_cuda(self) -> None:
        """What torch.cuda._lazy_init does once CUDA is up, before the first
        allocation: run the calls queued with torch.cuda._lazy_call (a real
        torch, CPU-only here, keeps them queued for ever), and those queued
        with the fake backend's at_init meanwhile; then the devices are
        listed (a FakeGPU made with initialised=0 lists none before, as
        torch's backend lists none inside its lazy init)."""
        import torch

        cuda = torch.cuda
        cuda._tls.is_initializing = True
        try:
            for call, _ in list(cuda._queued_calls):
                call()
            queued = self.source.init_calls if self.source is not None else []
            while queued:
                queued.pop(0)()
        finally:
            del cuda._tls.is_initializing
        if not self.initialised:
            self.initialised = self.ndev

    def oom(self, dev: int, requested: int, limit: int = TOTAL) -> None:
        """What torch does when an allocation fails: count it, call observers
        with the most it may hold on the device (its total, or less under
        set_per_process_memory_fraction)."""
        with self.lock:
            self.c[dev]["ooms"] += 1
            self._store(dev)
            free = 1 * MiB
        self._event(dev, "oom", None, requested, device_free=free)
        self.source.oom(dev, requested, limit, free)
