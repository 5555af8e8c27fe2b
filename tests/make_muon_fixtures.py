#!/usr/bin/python3
"""Regenerates tests/fixtures/muon.safetensors, the fixture of test_optim.c's
Muon tests, with a plain PyTorch transcription of the published Muon (Keller
Jordan's zeropower_via_newtonschulz5 and its Nesterov update, in float64
instead of bfloat16) beside torch.optim.AdamW. Run with /usr/bin/python3
(Debian's python3-torch); `make test` does not need PyTorch.

tests/fixtures/muon.safetensors
    ns.in (7,19), ns.tall.in (19,7) and ns.out, ns.tall.out: five
    Newton-Schulz steps of each.
    w0.<name>: the starting values of emb (4,3) and bias (5), updated by
    AdamW(lr 3e-3, betas (0.9, 0.98), eps 1e-8, weight decay 0.01), and of
    sq (6,6), tall (10,4), wide (3,7) and qkv (12,3), updated by Muon(lr 0.02,
    momentum 0.95, weight decay 0.1, 5 steps), qkv as its row blocks of 6, 3
    and 3 rows; grad.<k>.<name> the gradients of steps k = 0..4, read as
    gradient times 0.5 at step 3 (clipping); after.<k>.<name> the values
    after step k, both groups' learning rates scaled by min(1, (k+1)/3).
All in float64 from float32-rounded starting values.
"""
import os

import torch

from make_train_fixtures import HERE, f32, save

A, B, C = 3.4445, -4.7750, 2.0315
MUON = dict(lr=0.02, momentum=0.95, weight_decay=0.1, ns_steps=5)
SHAPES = {"emb": (4, 3), "bias": (5,), "sq": (6, 6), "tall": (10, 4), "wide": (3, 7),
          "qkv": (12, 3)}
BLOCKS = {"qkv": (6, 3, 3)}
ADAMW_NAMES = ("emb", "bias")
GRAD_SCALE = {3: 0.5}


def newton_schulz(G, steps):
    """zeropower_via_newtonschulz5, as published, in float64."""
    X = G.clone()
    if G.size(0) > G.size(1):
        X = X.T
    X = X / (X.norm() + 1e-7)
    for _ in range(steps):
        Am = X @ X.T
        Bm = B * Am + C * Am @ Am
        X = A * X + Bm @ X
    if G.size(0) > G.size(1):
        X = X.T
    return X


def muon_step(name, w, g, buf, lr):
    """buf = mu buf + g; u = g + mu buf; orthogonalised per row block and
    scaled by sqrt(max(1, rows/cols)); w -= lr (u + wd w)."""
    mu = MUON["momentum"]
    buf.mul_(mu).add_(g)
    u = g + mu * buf
    out = torch.empty_like(u)
    at = 0
    for rows in BLOCKS.get(name, (w.shape[0],)):
        block = newton_schulz(u[at:at + rows], MUON["ns_steps"])
        out[at:at + rows] = block * max(1.0, rows / w.shape[1]) ** 0.5
        at += rows
    w.sub_(lr * (out + MUON["weight_decay"] * w))


def main():
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(3)
    out = {}
    for name, shape in (("ns.in", (7, 19)), ("ns.tall.in", (19, 7))):
        x = f32(torch.randn(*shape))
        out[name] = x
        out[name.replace(".in", ".out")] = newton_schulz(x, 5)
    w0 = {n: f32(torch.randn(*s) * 0.5) for n, s in SHAPES.items()}
    grads = [{n: f32(torch.randn(*s)) for n, s in SHAPES.items()} for _ in range(5)]
    for n in SHAPES:
        out["w0." + n] = w0[n]
        for k in range(5):
            out[f"grad.{k}.{n}"] = grads[k][n]
    params = {n: w0[n].clone() for n in SHAPES}
    adam_params = [params[n].requires_grad_(True) for n in ADAMW_NAMES]
    adamw = torch.optim.AdamW(adam_params, lr=3e-3, betas=(0.9, 0.98), eps=1e-8,
                              weight_decay=0.01)
    bufs = {n: torch.zeros_like(params[n]) for n in SHAPES if n not in ADAMW_NAMES}
    for k in range(5):
        scale = min(1.0, (k + 1) / 3)
        gs = GRAD_SCALE.get(k, 1.0)
        for group in adamw.param_groups:
            group["lr"] = 3e-3 * scale
        for n in ADAMW_NAMES:
            params[n].grad = grads[k][n] * gs
        adamw.step()
        with torch.no_grad():
            for n, buf in bufs.items():
                muon_step(n, params[n], grads[k][n] * gs, buf, MUON["lr"] * scale)
        for n in SHAPES:
            out[f"after.{k}.{n}"] = params[n].detach().clone()
    save(os.path.join(HERE, "fixtures", "muon.safetensors"), out)
    o = out["ns.out"]
    print("singular values of ns.out:", torch.linalg.svdvals(o).numpy().round(3))


if __name__ == "__main__":
    main()
