#!/usr/bin/python3
"""Regenerates the training fixtures of test_optim.c and test_gpt.c with
PyTorch (Debian's python3-torch; run with /usr/bin/python3). `make test` does
not need PyTorch: the fixtures are committed.

tests/fixtures/optim.safetensors
    w0 (3,5) and b0 (4): starting values; grad.<k>.w, grad.<k>.b for steps
    k = 0..4; adamw.<k>.w/b and sgd.<k>.w/b: the values after step k of
    torch.optim.AdamW(lr=3e-3, betas=(0.9, 0.98), eps=1e-8, weight_decay=0.01)
    with lr scaled by min(1, (k+1)/3), and of torch.optim.SGD(lr=0.1,
    momentum=0.9, weight_decay=0.01); clip.w/b and clip.norm: the gradients of
    step 0 after clip_grad_norm_(max_norm=0.5).
tests/fixtures/gpt/{weights,data,expected}.safetensors
    A GPT-style model (2 layers, 2 heads, d_model 8, 4x GELU MLP,
    pre-LayerNorm, final LayerNorm) written in plain PyTorch modules with
    headlab's parameter names; tokens and targets (I32, -1 = ignored); its
    logits, the mean cross-entropy and the gradient of every parameter.
All in float64 from float32-rounded starting values.
"""
import json
import math
import os
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int32: "I32"}


def save(path, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous()
        data = t.numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def f32(t):
    return t.float().double()


def optim_fixture():
    torch.manual_seed(0)
    w0, b0 = f32(torch.randn(3, 5)), f32(torch.randn(4))
    grads = [(f32(torch.randn(3, 5)), f32(torch.randn(4))) for _ in range(5)]
    out = {"w0": w0, "b0": b0}
    for k, (gw, gb) in enumerate(grads):
        out[f"grad.{k}.w"], out[f"grad.{k}.b"] = gw, gb
    for name, make in (
            ("adamw", lambda ps: torch.optim.AdamW(ps, lr=3e-3, betas=(0.9, 0.98), eps=1e-8,
                                                   weight_decay=0.01)),
            ("sgd", lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01))):
        w, b = w0.clone().requires_grad_(True), b0.clone().requires_grad_(True)
        opt = make([w, b])
        for k, (gw, gb) in enumerate(grads):
            if name == "adamw":
                for group in opt.param_groups:
                    group["lr"] = 3e-3 * min(1.0, (k + 1) / 3)
            w.grad, b.grad = gw.clone(), gb.clone()
            opt.step()
            out[f"{name}.{k}.w"], out[f"{name}.{k}.b"] = w.detach().clone(), b.detach().clone()
    w, b = w0.clone().requires_grad_(True), b0.clone().requires_grad_(True)
    w.grad, b.grad = grads[0][0].clone(), grads[0][1].clone()
    norm = torch.nn.utils.clip_grad_norm_([w, b], max_norm=0.5)
    out["clip.w"], out["clip.b"], out["clip.norm"] = w.grad, b.grad, norm.reshape(1)
    save(os.path.join(HERE, "fixtures", "optim.safetensors"), out)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.ModuleDict({"fc": nn.Linear(d, 4 * d), "proj": nn.Linear(4 * d, d)})

    def forward(self, h):
        T = h.shape[1]
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        a = self.ln1(h)
        h = h + self.attn(a, a, a, attn_mask=causal, need_weights=False)[0]
        return h + self.mlp["proj"](F.gelu(self.mlp["fc"](self.ln2(h))))


class GPT(nn.Module):
    def __init__(self, vocab_in, vocab_out, n_ctx, d, heads, layers):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_in, d)
        self.pos_emb = nn.Embedding(n_ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab_out)

    def forward(self, x):
        h = self.tok_emb(x) + self.pos_emb(torch.arange(x.shape[1]))
        for block in self.blocks:
            h = block(h)
        return self.head(self.ln_f(h))


def gpt_fixture():
    torch.manual_seed(1)
    cfg = dict(vocab_in=7, vocab_out=6, n_ctx=6, d=8, heads=2, layers=2)
    model = GPT(**cfg).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(f32(torch.randn_like(p) * 0.5))
    B, T = 2, 5
    tokens = torch.randint(0, cfg["vocab_in"], (B, T))
    targets = torch.randint(0, cfg["vocab_out"], (B, T))
    targets[0, 1] = -1
    targets[1, 4] = -1
    logits = model(tokens)
    loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1), ignore_index=-1)
    loss.backward()
    d = os.path.join(HERE, "fixtures", "gpt")
    os.makedirs(d, exist_ok=True)
    config = (f"vocab_in={cfg['vocab_in']} vocab_out={cfg['vocab_out']} n_ctx={cfg['n_ctx']} "
              f"d_model={cfg['d']} n_heads={cfg['heads']} n_layers={cfg['layers']} mlp=1 "
              f"layernorm=1 dropout=0 emb_std=1")
    save(os.path.join(d, "weights.safetensors"),
         {n: p.detach().float() for n, p in model.named_parameters()}, {"config": config})
    save(os.path.join(d, "data.safetensors"),
         {"tokens": tokens.int(), "targets": targets.int()})
    expected = {"logits": logits.detach(), "loss": loss.detach().reshape(1)}
    expected.update({"grad." + n: p.grad for n, p in model.named_parameters()})
    save(os.path.join(d, "expected.safetensors"), expected)
    print(f"gpt: loss {loss.item():.6f}, {sum(p.numel() for p in model.parameters())} parameters")


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    optim_fixture()
    gpt_fixture()
