#!/usr/bin/env python3
"""A nanoGPT-sized transformer trained on random tokens, for `gputop fit`:
GPT-2 small's shape (12 layers, 12 heads, 768 wide, 1024 tokens, a 50304
vocabulary, 124M parameters), AdamW, bf16 autocast, flash attention
through scaled_dot_product_attention. It trains until stopped (--steps
0) or for --steps steps; with --cap BYTES it caps torch's allocator
first, as gputop fit does, and says whether the batch fit.

    python3 bench/workloads/fit_gpt.py --batch-size 8                   # under gputop fit
    python3 bench/workloads/fit_gpt.py --batch-size 18 --steps 6 --cap 17179869184

Its last line with --steps: RESULT {"fit": true|false, "peak": bytes, ...};
exit 0 when the batch fit, 3 when it ran out of memory.
"""
from __future__ import annotations

import sys

import fitloop


def model_of(torch, layers: int, heads: int, width: int, block: int, vocab: int):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(block, width)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln = nn.LayerNorm(width)
            self.head = nn.Linear(width, vocab, bias=False)
            self.head.weight = self.wte.weight  # tied, as GPT-2's
            for m in self.modules():  # nanoGPT's initialisation
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, std=0.02)

        def forward(self, idx, targets):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.blocks:
                x = blk(x)
            logits = self.head(self.ln(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))

    return GPT()


def main() -> int:
    a = fitloop.parse(__doc__, "a tiny model, two steps on the CPU",
                      lambda ap: ap.add_argument("--block", type=int, default=1024))
    import torch

    if a.dry_run:
        shape = dict(layers=2, heads=2, width=64, block=32, vocab=128)
    else:
        shape = dict(layers=12, heads=12, width=768, block=a.block, vocab=50304)
    dev = fitloop.device(torch, a)
    model = model_of(torch, **shape).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=dev == "cuda")

    def step():
        idx = torch.randint(0, shape["vocab"], (a.batch_size, shape["block"]), device=dev)
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=dev == "cuda"):
            loss = model(idx, torch.roll(idx, -1, 1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    return fitloop.train(torch, a, dev, step, "fit_gpt.py", loss=True)

if __name__ == "__main__":
    sys.exit(main())
