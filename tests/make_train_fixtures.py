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
tests/fixtures/gpt_modern/... and tests/fixtures/gpt_sinusoidal/...
    The same for today's parts, written out from their papers' formulas
    (PyTorch 1.13 has no RMSNorm, rotary or SwiGLU module): gpt_modern has
    rotary positions (rotate-half, as GPT-NeoX and Hugging Face's Llama:
    q·cos + rotate_half(q)·sin), RMSNorm, a SwiGLU MLP, tied embeddings and
    smeared keys; gpt_sinusoidal has fixed sinusoidal positions, LayerNorm and
    no MLP.
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


def rms_norm(x, weight, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotary(x, base=10000.0):
    """x (B,H,T,D): Hugging Face Llama's apply_rotary_pos_emb, angles in float64."""
    T, D = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return x * emb.cos() + rotate_half(x) * emb.sin()


def sinusoids(T, d, std):
    table = torch.zeros(T, d)
    for t in range(T):
        for i in range(d):
            angle = t * 10000.0 ** (-(i // 2 * 2) / d)
            table[t, i] = std * math.sqrt(2) * (math.cos(angle) if i % 2 else math.sin(angle))
    return table


class ModernAttention(nn.Module):
    """nn.MultiheadAttention's parameters, with optional smeared keys and rotary q, k."""

    def __init__(self, d, heads, smear, rope):
        super().__init__()
        self.heads, self.rope = heads, rope
        self.in_proj_weight = nn.Parameter(torch.empty(3 * d, d))
        self.in_proj_bias = nn.Parameter(torch.empty(3 * d))
        self.out_proj = nn.Linear(d, d)
        self.smear = nn.Parameter(torch.empty(heads)) if smear else None

    def forward(self, x):
        B, T, E = x.shape
        H, D = self.heads, E // self.heads
        q, k, v = F.linear(x, self.in_proj_weight, self.in_proj_bias).split(E, dim=-1)
        q, k, v = (t.reshape(B, T, H, D).transpose(1, 2) for t in (q, k, v))
        if self.smear is not None:
            w = torch.sigmoid(self.smear).reshape(1, H, 1, 1)
            prev = torch.cat((k[:, :, :1], k[:, :, :-1]), dim=2)
            smeared = w * k + (1 - w) * prev
            k = torch.cat((k[:, :, :1], smeared[:, :, 1:]), dim=2)
        if self.rope:
            q, k = rotary(q), rotary(k)
        scores = (q / math.sqrt(D)) @ k.transpose(-1, -2)
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        probs = scores.masked_fill(causal, float("-inf")).softmax(-1)
        return self.out_proj((probs @ v).transpose(1, 2).reshape(B, T, E))


class ModernBlock(nn.Module):
    def __init__(self, d, heads, norm, mlp, smear, rope):
        super().__init__()
        self.norm, self.mlp_kind = norm, mlp
        self.attn = ModernAttention(d, heads, smear, rope)
        for name in ("ln1", "ln2") if mlp != "none" else ("ln1",):
            if norm == "rmsnorm":
                setattr(self, name, nn.ParameterDict({"weight": nn.Parameter(torch.empty(d))}))
            elif norm == "layernorm":
                setattr(self, name, nn.LayerNorm(d))
        if mlp == "swiglu":
            width = ((8 * d + 2) // 3 + 15) // 16 * 16
            self.mlp = nn.ModuleDict({"fc": nn.Linear(d, 2 * width), "proj": nn.Linear(width, d)})

    def normalize(self, ln, h):
        if self.norm == "rmsnorm":
            return rms_norm(h, ln["weight"])
        return ln(h) if self.norm == "layernorm" else h

    def forward(self, h):
        h = h + self.attn(self.normalize(getattr(self, "ln1", None), h))
        if self.mlp_kind == "swiglu":
            gate, up = self.mlp["fc"](self.normalize(getattr(self, "ln2", None), h)).chunk(2, -1)
            h = h + self.mlp["proj"](F.silu(gate) * up)
        return h


class ModernGPT(nn.Module):
    def __init__(self, vocab, n_ctx, d, heads, layers, pos, norm, mlp, tie, smear):
        super().__init__()
        self.pos, self.norm, self.tie = pos, norm, tie
        self.tok_emb = nn.Embedding(vocab, d)
        self.table = sinusoids(n_ctx, d, 1.0) if pos == "sinusoidal" else None
        self.blocks = nn.ModuleList(ModernBlock(d, heads, norm, mlp, smear, pos == "rope")
                                    for _ in range(layers))
        if norm == "rmsnorm":
            self.ln_f = nn.ParameterDict({"weight": nn.Parameter(torch.empty(d))})
        elif norm == "layernorm":
            self.ln_f = nn.LayerNorm(d)
        self.head = nn.ParameterDict({"bias": nn.Parameter(torch.empty(vocab))})
        if not tie:
            self.head["weight"] = nn.Parameter(torch.empty(vocab, d))

    def forward(self, x):
        h = self.tok_emb(x)
        if self.table is not None:
            h = h + self.table[: x.shape[1]]
        for block in self.blocks:
            h = block(h)
        h = self.blocks[0].normalize(getattr(self, "ln_f", None), h)
        w = self.tok_emb.weight if self.tie else self.head["weight"]
        return F.linear(h, w, self.head["bias"])


def modern_fixture(name, seed, **opts):
    torch.manual_seed(seed)
    vocab, n_ctx, d, heads, layers = 7, 6, 8, 2, 2
    model = ModernGPT(vocab, n_ctx, d, heads, layers, **opts).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(f32(torch.randn_like(p) * 0.5))
    B, T = 2, 5
    tokens = torch.randint(0, vocab, (B, T))
    targets = torch.randint(0, vocab, (B, T))
    targets[1, 2] = -1
    logits = model(tokens)
    loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1), ignore_index=-1)
    loss.backward()
    d_ = os.path.join(HERE, "fixtures", name)
    os.makedirs(d_, exist_ok=True)
    mlp = {"none": 0, "gelu": 1, "swiglu": 2}[opts["mlp"]]
    norm = {"none": 0, "layernorm": 1, "rmsnorm": 2}[opts["norm"]]
    config = (f"vocab_in={vocab} vocab_out={vocab} n_ctx={n_ctx} d_model={d} n_heads={heads} "
              f"n_layers={layers} mlp={mlp} layernorm={norm} dropout=0 emb_std=1 "
              f"layer_heads={heads},{heads} pos={opts['pos']} rope_base=0 "
              f"tie={int(opts['tie'])} smear={int(opts['smear'])}")
    params = dict(model.named_parameters())
    save(os.path.join(d_, "weights.safetensors"),
         {n: p.detach().float() for n, p in params.items()}, {"config": config})
    save(os.path.join(d_, "data.safetensors"),
         {"tokens": tokens.int(), "targets": targets.int()})
    expected = {"logits": logits.detach(), "loss": loss.detach().reshape(1)}
    expected.update({"grad." + n: p.grad for n, p in params.items()})
    save(os.path.join(d_, "expected.safetensors"), expected)
    print(f"{name}: loss {loss.item():.6f}, {sum(p.numel() for p in params.values())} parameters")


if __name__ == "__main__":
    torch.set_default_dtype(torch.float64)
    optim_fixture()
    gpt_fixture()
    modern_fixture("gpt_modern", 2, pos="rope", norm="rmsnorm", mlp="swiglu", tie=True,
                   smear=True)
    modern_fixture("gpt_sinusoidal", 3, pos="sinusoidal", norm="layernorm", mlp="none",
                   tie=False, smear=False)
