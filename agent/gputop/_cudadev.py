"""A GPU's UUID, name and total memory from the CUDA driver (libcuda), by
CUDA ordinal, for the frameworks that do not say them (JAX's devices have
no UUID): gputop maps an agent's devices to NVML's by UUID. cuInit and
the device queries create no context, so nothing is taken from the GPU."""

from __future__ import annotations

import ctypes
import threading
from typing import Any

_lock = threading.Lock()
_lib: Any = None
_tried = False
_cache: dict[int, dict[str, Any]] = {}


def _driver() -> Any:
    global _lib, _tried
    with _lock:
        if not _tried:
            _tried = True
            try:
                lib = ctypes.CDLL("libcuda.so.1")
                if lib.cuInit(0) == 0:
                    _lib = lib
            except OSError:
                _lib = None
        return _lib


def _uuid(raw: bytes) -> str:
    h = raw.hex()
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def describe(index: int) -> dict[str, Any]:
    """{index, uuid, name, total} of CUDA device index; where the driver
    cannot say, uuid "unknown-cuda:INDEX" and total 0 (gputop then shows
    it as a device of its own, which every process on this ordinal shares)."""
    got = _cache.get(index)
    if got is not None:
        return dict(got)
    out: dict[str, Any] = {"index": index, "uuid": f"unknown-cuda:{index}", "name": f"cuda:{index}", "total": 0}
    lib = _driver()
    if lib is not None:
        dev = ctypes.c_int()
        if lib.cuDeviceGet(ctypes.byref(dev), index) == 0:
            buf = ctypes.create_string_buffer(16)
            get_uuid = getattr(lib, "cuDeviceGetUuid_v2", None) or getattr(lib, "cuDeviceGetUuid", None)
            if get_uuid is not None and get_uuid(buf, dev) == 0:
                out["uuid"] = _uuid(buf.raw)
            name = ctypes.create_string_buffer(256)
            if lib.cuDeviceGetName(name, 256, dev) == 0:
                out["name"] = name.value.decode("utf-8", "replace")
            total = ctypes.c_size_t()
            if lib.cuDeviceTotalMem_v2(ctypes.byref(total), dev) == 0:
                out["total"] = total.value
    _cache[index] = out
    return dict(out)
