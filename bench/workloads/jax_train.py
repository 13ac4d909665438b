#!/usr/bin/env python3
"""A JAX training loop (flax/optax: an MLP on random data, Adam, jit) for
frameworks_check.py; with gputop in it unless --no-agent.

    python3 bench/workloads/jax_train.py [--steps N] [--row-every K] [--no-agent]
    python3 bench/workloads/jax_train.py --abba BLOCKS [--block-steps K]
    python3 bench/workloads/jax_train.py --dry-run      (no GPU: the fake jax of agent/tests)

Rows: every K steps, once the step's arrays are ready
(jax.block_until_ready), Device.memory_stats() of device 0 is read, then
gputop.snapshot("step N"), then memory_stats() again; a line
`WITNESS {"label", "before", "after"}` says both (the check wants them
equal: nothing moved while the row was read). At the end the arrays are
deleted and an "After cleanup" end row is taken the same way.

--abba: the agent's overhead on the loop, in the process: blocks of
--block-steps steps with the agent attached (A) and detached (B) in the
order A B B A ..., each step timed to its result being ready; the last
line `ABBA {"on": [...], "off": [...]}` holds each block's seconds per
step."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def witness_line(label: str, before: dict, after: dict) -> None:
    print("WITNESS " + json.dumps({"label": label, "before": before, "after": after}), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--row-every", type=int, default=10)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--no-agent", action="store_true", help="no gputop in the program (gputop run injects it)")
    ap.add_argument("--abba", type=int, default=0, metavar="BLOCKS", help="overhead mode: this many A/B blocks")
    ap.add_argument("--block-steps", type=int, default=50)
    ap.add_argument("--dry-run", action="store_true", help="the fake jax of agent/tests: no flax, no GPU")
    a = ap.parse_args()
    if a.dry_run:
        sys.path.insert(0, os.path.join(ROOT, "agent", "tests", "fakemodules"))
    import jax

    gputop = None
    if not a.no_agent:
        import gputop  # noqa: F811
        gputop.attach()
    dev = None

    def stats() -> dict:
        return dict(dev.memory_stats() or {})

    if a.dry_run:
        fake = jax.fake
        fake.backend_init()
        dev = jax.local_devices()[0]
        state = [fake.array(0, (a.width, 1024))]

        def step(i: int) -> None:
            x = fake.array(0, (a.batch, a.width))
            fake.delete(x)

        def ready() -> None:
            pass
    else:
        import flax.linen as nn
        import jax.numpy as jnp
        import optax

        class MLP(nn.Module):
            width: int

            @nn.compact
            def __call__(self, x):
                for _ in range(4):
                    x = nn.relu(nn.Dense(self.width)(x))
                return nn.Dense(10)(x)

        model = MLP(a.width)
        key = jax.random.PRNGKey(0)
        params = model.init(key, jnp.ones((1, 1024)))
        tx = optax.adam(1e-3)
        opt_state = tx.init(params)
        x = jax.random.normal(key, (a.batch, 1024))
        y = jax.random.randint(key, (a.batch,), 0, 10)
        dev = jax.local_devices()[0]

        @jax.jit
        def train_step(params, opt_state, x, y):
            def loss_fn(p):
                return optax.softmax_cross_entropy_with_integer_labels(model.apply(p, x), y).mean()
            loss, grads = jax.value_and_grad(loss_fn)(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss

        state = [params, opt_state, None]

        def step(i: int) -> None:
            state[0], state[1], state[2] = train_step(state[0], state[1], x, y)

        def ready() -> None:
            jax.block_until_ready(state)

    def row(label: str, end: bool = False) -> None:
        ready()
        before = stats()
        if gputop is not None:
            gputop.snapshot(label, end=end)
        witness_line(label, before, stats())

    if a.abba:
        if gputop is None:
            print("--abba needs the agent (not --no-agent)", file=sys.stderr)
            return 2
        h = gputop.attach()
        for i in range(a.block_steps):  # warm up: compiled, caches hot
            step(i)
        ready()
        on: list[float] = []
        off: list[float] = []
        for b in range(a.abba):
            agent_on = (b % 4) in (0, 3)  # A B B A
            if agent_on:
                h = gputop.attach()
            else:
                h.detach()
            t0 = time.perf_counter()
            for i in range(a.block_steps):
                step(i)
                ready()
            (on if agent_on else off).append((time.perf_counter() - t0) / a.block_steps)
        print("ABBA " + json.dumps({"on": on, "off": off}), flush=True)
        return 0

    row("Training start")
    for i in range(1, a.steps + 1):
        step(i)
        if i % a.row_every == 0:
            row(f"step {i}")
    state.clear()
    if a.dry_run:
        for arr in list(jax.live_arrays()):
            jax.fake.delete(arr)
    row("After cleanup", end=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
