"""Make pools.pickle and structure.json (python3 make_structure.py, here; no torch needed).

pools.pickle is a snapshot as torch.cuda.memory._snapshot() returns it, built by hand
since this machine has no GPU: every segment and block has the keys torch 2.11 writes
(checked against labelled.pickle's below), with what the real dumps lack: a private
pool beside the default one (a CUDA graph's (1, 0), a torch.cuda.MemPool's (0, 1),
expandable), free blocks in pieces, a block waiting on another stream
(active_pending_free), two devices, and allocator_settings as if
PYTORCH_CUDA_ALLOC_CONF had been set.

structure.json is each dump's structure (pools.pickle and the real H200 dumps beside
it), worked out here from the unpickled dicts: what memdump's tests compare its
reading with.
"""
import json
import os
import pickle

here = os.path.dirname(os.path.abspath(__file__))
MiB, KiB = 1 << 20, 1 << 10


def segment(device, address, pool, kind, blocks, expandable=False):
    """A segment of torch's snapshot; blocks are (state, size)."""
    bl, at = [], address
    for state, size in blocks:
        bl.append({"address": at, "size": size, "requested_size": size if state != "inactive" else 0,
                   "state": state, "frames": []})
        at += size
    total = sum(s for _, s in blocks)
    return {"device": device, "address": address, "total_size": total,
            "allocated_size": sum(s for st, s in blocks if st == "active_allocated"),
            "active_size": sum(s for st, s in blocks if st.startswith("active")),
            "requested_size": sum(b["requested_size"] for b in bl), "stream": 0,
            "segment_type": kind, "segment_pool_id": pool, "is_expandable": expandable,
            "frames": [], "blocks": bl}


A, I, P = "active_allocated", "inactive", "active_pending_free"
snap = {
    "segments": [
        segment(0, 0x7f0000000000, (0, 0), "large", [(A, 4 * MiB), (I, 2 * MiB), (A, 6 * MiB), (I, 8 * MiB)]),
        segment(0, 0x7f0002000000, (0, 0), "large", [(A, 2 * MiB), (I, 3 * MiB), (A, 15 * MiB)]),
        segment(0, 0x7f0004000000, (0, 0), "small", [(A, 512 * KiB), (I, 512 * KiB), (A, 512 * KiB), (I, 512 * KiB)]),
        segment(0, 0x7f0006000000, (1, 0), "large", [(A, 3 * MiB), (P, 1 * MiB), (I, 6 * MiB)]),
        segment(0, 0x7f0008000000, (0, 1), "large", [(A, 32 * MiB), (I, 20 * MiB), (A, 4 * MiB), (I, 8 * MiB)],
                expandable=True),
        segment(1, 0x7f1000000000, (0, 0), "large", [(A, 2 * MiB)]),
    ],
    "device_traces": [[], []],
    "allocator_settings": {
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,garbage_collection_threshold:0.6",
        "max_split_size": -1, "garbage_collection_threshold": 0.6, "expandable_segments": True,
        "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
        "pinned_use_cuda_host_register": False, "graph_capture_record_stream_reuse": False,
        "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)},
    },
    "external_annotations": [],
}

# the same keys as torch 2.11's own snapshot
real = pickle.load(open(os.path.join(here, "labelled.pickle"), "rb"))
assert set(snap) == set(real), (set(snap), set(real))
assert set(snap["allocator_settings"]) == set(real["allocator_settings"])
for s in snap["segments"]:
    assert set(s) == set(real["segments"][0]), set(s) ^ set(real["segments"][0])
    for b in s["blocks"]:
        assert set(b) == set(real["segments"][0]["blocks"][0])
with open(os.path.join(here, "pools.pickle"), "wb") as f:
    pickle.dump(snap, f)


def structure(snap):
    """Per device: the figures gputop shows of torch's cache."""
    out = {}
    for s in snap["segments"]:
        d = out.setdefault(str(s["device"]), {"segments": 0, "expandable": 0, "blocks": 0, "reserved": 0,
                                              "allocated": 0, "largest_free": 0, "pending_free": 0, "pools": {}})
        free = [b["size"] for b in s["blocks"] if b["state"] == "inactive"]
        d["segments"] += 1
        d["expandable"] += bool(s.get("is_expandable"))
        d["blocks"] += len(s["blocks"])
        d["reserved"] += s["total_size"]
        d["allocated"] += s["allocated_size"]
        d["pending_free"] += sum(b["size"] for b in s["blocks"] if b["state"] == "active_pending_free")
        d["largest_free"] = max([d["largest_free"]] + free)
        pid = tuple(s["segment_pool_id"])
        p = d["pools"].setdefault(f"{pid} {s['segment_type']}", {
            "kind": "default" if pid == (0, 0) else "private", "id": list(pid), "type": s["segment_type"],
            "segments": 0, "reserved": 0, "allocated": 0, "largest_free": 0})
        p["segments"] += 1
        p["reserved"] += s["total_size"]
        p["allocated"] += s["allocated_size"]
        p["largest_free"] = max([p["largest_free"]] + free)
    for d in out.values():
        d["free"] = d["reserved"] - d["allocated"]
        d["fragmentation"] = 1 - d["largest_free"] / d["free"] if d["free"] else 0.0
    return out


figures = {"pools.pickle": structure(snap)}
for name in ("plain.pickle", "labelled.pickle", "oom.pickle"):
    figures[name] = structure(pickle.load(open(os.path.join(here, name), "rb")))
with open(os.path.join(here, "structure.json"), "w") as f:
    json.dump(figures, f, indent=1, sort_keys=True)
    f.write("\n")
print(json.dumps(figures["pools.pickle"], indent=1))
