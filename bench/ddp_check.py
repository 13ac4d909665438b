#!/usr/bin/env python3
"""Two DDP ranks on two GPUs beside `gputop record --source all`, each rank
shown the other's GPU as cuda:0: gputop must put each rank's rows
and processes on the GPU its UUID names, with that rank's torch values.

    PYTHONPATH=agent python3 bench/ddp_check.py --gputop bin/gputop [--results-dir DIR]

Rank r runs with CUDA_VISIBLE_DEVICES set to the other GPU (rank 0 on GPU 1,
rank 1 on GPU 0, by nvidia-smi's order), so torch's device index and
NVML's disagree for both, as they do under any launcher that hands out GPUs
by environment. The ranks train a small DDP model over NCCL, each holding a
different amount of extra memory, and take snapshots "rank R epoch E". The
check, from the recording and `gputop export`'s CSV:

  * each rank's three rows are on the NVML device whose UUID torch reported
    for that rank (and which nvidia-smi lists for the GPU the rank was given);
  * each row's allocated / reserved / peak equal what snapshot() returned
    and what torch reported right after it, to the byte;
  * each rank's pid is in NVML's process list of its GPU, never of the other;
  * a hello from each rank names its GPU's UUID;
  * each rank's agent reads torch's counters in place (status "direct").

With fewer than two GPUs it records SKIP. NVLink multicast stays off
(NCCL_NVLS_ENABLE=0 and friends): the GPU machines' hosts are shared.
"""
from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import rec as recording  # noqa: E402
from common import check_args, start_gputop, stop_proc, work_dir, write_result  # noqa: E402

RANK = r"""
import json, os, time
import torch, torch.distributed as dist, torch.nn as nn
import gputop
from gputop._backend import normalize_uuid
rank = int(os.environ["RANK"])
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=rank, world_size=2)
gputop.attach()
model = nn.parallel.DistributedDataParallel(
    nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024)).cuda(), device_ids=[0])
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
extra = torch.empty((rank + 1) << 28, dtype=torch.uint8, device="cuda")  # 256 / 512 MiB: ranks differ
x = torch.randn(512, 1024, device="cuda")
t0 = time.time()
while not gputop.status().get("connected") and time.time() - t0 < 5:
    time.sleep(0.05)
rows = []
for epoch in (1, 2, 3):
    for _ in range(50):
        opt.zero_grad(set_to_none=True)
        model(x).pow(2).mean().backward()
        opt.step()
    torch.cuda.synchronize()
    label = f"rank {rank} epoch {epoch}"
    got = gputop.snapshot(label).get(0, {})
    rows.append({"label": label, "snapshot": {k: got.get(k) for k in ("allocated", "reserved", "peak")},
                 "torch": {"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
                           "peak": torch.cuda.max_memory_allocated()}})
    time.sleep(0.3)  # NVML's process list is read 10 times a second
dist.barrier()
uuid = normalize_uuid(getattr(torch.cuda.get_device_properties(0), "uuid", None))
status = gputop.status()
gputop.detach()
dist.destroy_process_group()
print(json.dumps({"rank": rank, "pid": os.getpid(), "uuid": uuid, "rows": rows, "status": status}))
"""


def gpus() -> list[tuple[int, str]]:
    """(index, UUID) of every GPU, in nvidia-smi's order."""
    out = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        return []
    res = []
    for line in out.stdout.splitlines():
        i, _, u = line.partition(",")
        if u.strip():
            res.append((int(i), u.strip()))
    return res


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    a = check_args(__doc__, "70-ddp", "the recording, its CSV and logs")
    try:
        found = gpus()
    except (OSError, subprocess.SubprocessError):
        found = []
    if len(found) < 2:
        write_result(a.results_dir, a.name, "SKIP", f"needs 2 GPUs; nvidia-smi lists {len(found)}")
        return 0
    work = work_dir(a, "ddp")
    sock, rec = os.path.join(work, "ddp.sock"), os.path.join(work, "ddp.gputop")
    with open(os.path.join(work, "record.log"), "w") as log:
        p = start_gputop(a.gputop, rec, sock, "all", log)
    if p is None:
        write_result(a.results_dir, a.name, "FAIL", f"gputop record did not start (see {work}/record.log)")
        return 1
    given = {0: found[1], 1: found[0]}  # rank -> (nvidia-smi index, UUID) it is given
    port = str(free_port())
    ranks, logs = [], []
    try:
        for r in (0, 1):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                       CUDA_VISIBLE_DEVICES=str(given[r][0]), GPUTOP_SOCKET=sock, PYTHONUNBUFFERED="1",
                       PYTHONPATH=os.path.join(REPO, "agent") + os.pathsep + os.environ.get("PYTHONPATH", ""),
                       NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
            logs.append(open(os.path.join(work, f"rank{r}.log"), "w"))
            ranks.append(subprocess.Popen([sys.executable, "-c", RANK], env=env, stdout=subprocess.PIPE,
                                          stderr=logs[-1], text=True))
        outs = []
        for r, rp in enumerate(ranks):
            try:
                out, _ = rp.communicate(timeout=180)
            except subprocess.TimeoutExpired:
                rp.kill()
                out, _ = rp.communicate()
            outs.append(out)
    finally:
        for rp in ranks:
            if rp.poll() is None:
                rp.kill()
        for fh in logs:
            fh.close()
        stop_proc(p)
    got = {}
    for r, out in enumerate(outs):
        try:
            got[r] = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            write_result(a.results_dir, a.name, "FAIL",
                         f"rank {r} failed (rc {ranks[r].returncode}; see {work}/rank{r}.log)")
            return 1

    problems = []
    data = recording.load(rec)
    csv_path = os.path.join(work, "ddp.csv")
    ex = subprocess.run([a.gputop, "export", rec, "--csv", csv_path], capture_output=True, text=True)
    rows = []
    if ex.returncode == 0:
        with open(csv_path, newline="") as fh:
            rows = list(csv.DictReader(fh))
    else:
        problems.append(f"gputop export failed: {ex.stderr.strip()[-200:]}")
    placed = []
    for r, g in got.items():
        idx, uuid = given[r]
        if g["uuid"] != uuid:
            problems.append(f"rank {r}: torch's cuda:0 is {g['uuid']}, nvidia-smi's GPU {idx} is {uuid}")
        dev = data.device_for_uuid(uuid)
        if dev is None:
            problems.append(f"rank {r}: no NVML device with UUID {uuid} in the recording")
            continue
        other = data.device_for_uuid(given[1 - r][1])
        if not any(d.get("uuid") == uuid for h in data.hellos if h.get("pid") == g["pid"]
                   for d in h.get("devices", [])):
            problems.append(f"rank {r}: no hello from pid {g['pid']} naming {uuid}")
        snaps = {s["label"]: s for s in data.snapshots if s.get("pid") == g["pid"]}
        csv_rows = {x["label"]: x for x in rows if x.get("pid") == str(g["pid"])}
        for want in g["rows"]:
            s, c = snaps.get(want["label"]), csv_rows.get(want["label"])
            if s is None or c is None:
                problems.append(f"rank {r}: {want['label']!r} missing (recording: {s is not None}, "
                                f"CSV: {c is not None})")
                continue
            vals = {k: s.get(k) for k in ("allocated", "reserved", "peak")}
            if s.get("dev") != dev or c.get("device") != str(dev):
                problems.append(f"rank {r}: {want['label']!r} on device {s.get('dev')} (CSV {c.get('device')}), "
                                f"want {dev}")
            if not (vals == want["snapshot"] == want["torch"]):
                problems.append(f"rank {r}: {want['label']!r}: gputop {vals}, snapshot() "
                                f"{want['snapshot']}, torch {want['torch']}")
            if [c.get(f"{k}_bytes") for k in ("allocated", "reserved", "peak")] != \
                    [str(want["torch"][k]) for k in ("allocated", "reserved", "peak")]:
                problems.append(f"rank {r}: {want['label']!r}: CSV bytes differ from torch's")
            if not c.get("nvml_used_bytes"):
                problems.append(f"rank {r}: {want['label']!r} has no NVML used")
        seen = {f.get("dev") for f in data.procs
                if any(x.get("pid") == g["pid"] for x in (f.get("procs") or []))}
        if dev not in seen:
            problems.append(f"rank {r}: pid {g['pid']} never in NVML's process list of device {dev}")
        if other is not None and other in seen:
            problems.append(f"rank {r}: pid {g['pid']} in NVML's process list of the other GPU ({other})")
        # a rank under DDP and NCCL: its agent reads torch's counters in place
        reading = (g.get("status") or {}).get("reading")
        if reading != "direct":
            problems.append(f"rank {r}: the agent reads through {reading!r}, not in place")
        placed.append(f"rank {r} (pid {g['pid']}, cuda:0 = nvidia-smi GPU {idx}) -> gputop device {dev}, "
                      f"{len(g['rows'])} rows, allocated {g['rows'][-1]['torch']['allocated']} B, "
                      f"reading {reading}")
    txt = "; ".join(placed) + (f"; {len(problems)} problems" if problems else "; rows, values and processes "
                                                                              "on the right GPU")
    write_result(a.results_dir, a.name, "FAIL" if problems else "PASS", txt, problems=problems,
                 ranks=got, gpus=found)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
