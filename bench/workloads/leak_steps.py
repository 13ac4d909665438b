"""A training loop with a "Step N" row every --every steps, for gputop's
forecast (bench/cmd/forecastcheck reads the recording):

    leak    the loop also keeps --leak-mib MiB a step in a list (`losses`)
            under torch.cuda.set_per_process_memory_fraction(--fraction),
            until the CUDA out-of-memory error, which it catches and
            reports (its step) before it exits 0;
    stable  the same loop without the leak, for --seconds.

Run under `gputop run` (the agent injected); --out writes what happened
as JSON: the mode, the cap, the step of the OOM, the steps run.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

import gputop


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", nargs="?", default="leak", choices=["leak", "stable"])
    p.add_argument("--fraction", type=float, default=0.1, help="leak: the per-process memory fraction")
    p.add_argument("--leak-mib", type=int, default=64, help="leak: MiB kept a step")
    p.add_argument("--seconds", type=float, default=120, help="stable: how long to run")
    p.add_argument("--every", type=int, default=1, help="a Step row every N steps")
    p.add_argument("--out", help="write what happened as JSON here")
    p.add_argument("--dry-run", action="store_true", help="8 small steps on the CPU: the script's own check")
    a = p.parse_args()

    dry = a.dry_run
    dev = torch.device("cpu") if dry else torch.device("cuda", 0)
    total = 0 if dry else torch.cuda.get_device_properties(0).total_memory
    if a.mode == "leak" and not dry:
        torch.cuda.set_per_process_memory_fraction(a.fraction, 0)
    width = 64 if dry else 4096
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width)).to(dev)
    opt = torch.optim.Adam(model.parameters())
    losses: list[torch.Tensor] = []
    step, oom_step, t0 = 0, None, time.monotonic()
    try:
        while True:
            step += 1
            x = torch.randn(width, width, device=dev)
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if a.mode == "leak":
                losses.append(torch.empty((a.leak_mib << 20) if not dry else 1024, dtype=torch.uint8, device=dev))
            if not dry:
                torch.cuda.synchronize()
            if step % a.every == 0:
                gputop.snapshot(f"Step {step}")
            time.sleep(0.05)  # a step of about 60 ms: time for the samples between rows
            if (a.mode == "stable" and time.monotonic() - t0 >= a.seconds) or (dry and step == 8):
                break
    except torch.cuda.OutOfMemoryError:
        oom_step = step
    res = {"mode": a.mode, "total": total, "cap": int(total * a.fraction) if a.mode == "leak" else None,
           "leak_mib": a.leak_mib if a.mode == "leak" else 0, "oom_step": oom_step, "steps": step,
           "seconds": round(time.monotonic() - t0, 1)}
    print(json.dumps(res))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f)


if __name__ == "__main__":
    main()
