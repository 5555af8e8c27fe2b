#!/usr/bin/python3
"""Regenerates tests/fixtures/mha/: multi-head attention cases computed by
PyTorch's torch.nn.MultiheadAttention, for the parity tests in test_mha.c.

Needs Debian's python3-torch (run with /usr/bin/python3). `make test` does not:
the fixtures are committed.

Each case directory holds
  weights.safetensors   the module's state_dict (F32, PyTorch's names)
  inputs.safetensors    query, key, value (absent for self-attention: query
                        is all three), optional key_padding_mask (U8),
                        attn_mask (F32, additive), grad_output; metadata:
                        heads, causal (as mha_run takes them)
  expected.safetensors  output, attn_weights (B,H,T,S), grad.query/key/value,
                        grad.<weight name> (F64)
Inputs and weights are rounded to float32 first; the reference is then
computed in float64 from those exact values, so the double build can be held
to ~1e-12 and the float build to float rounding.
"""
import json
import os
import struct
import sys

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "mha")
DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.uint8: "U8"}


def save(path, tensors, metadata=None):
    """Writes a safetensors file: names sorted, header padded to 8 bytes."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
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
    """Rounds to float32 and back to float64: the values the C side reads."""
    return t.float().double()


def reference(mha, q, k, v, kpm, attn_mask, grad_out):
    """Output, per-head weights and gradients from nn.MultiheadAttention (float64)."""
    q, k, v = (x.clone().requires_grad_(True) for x in (q, k, v))
    mha.zero_grad()
    out, w = mha(q, k, v, key_padding_mask=kpm, attn_mask=attn_mask,
                 need_weights=True, average_attn_weights=False)
    out.backward(grad_out)
    grads = {"grad." + n: p.grad.clone() for n, p in mha.named_parameters()}
    return out.detach(), w.detach(), q.grad, k.grad, v.grad, grads


def make_case(name, B, T, S, E, H, kdim=None, vdim=None, bias=True, causal=False,
              padding=None, additive=False, fully_padded=None, seed=0):
    torch.manual_seed(seed)
    kdim, vdim = kdim or E, vdim or E
    self_attn = T == S and kdim == E and vdim == E and name.startswith("self")
    mha = torch.nn.MultiheadAttention(E, H, bias=bias, batch_first=True,
                                      kdim=kdim, vdim=vdim).double()
    with torch.no_grad():
        for p in mha.parameters():
            p.copy_(f32(torch.empty_like(p).uniform_(-0.5, 0.5)))
    q = f32(torch.randn(B, T, E))
    k = q if self_attn else f32(torch.randn(B, S, kdim))
    v = q if self_attn else f32(torch.randn(B, S, vdim))
    grad_out = f32(torch.randn(B, T, E))

    # Self-attention cases store query alone: mha_run and the tests then feed
    # one tensor as query, key and value.
    inputs = {"query": q.float(), "grad_output": grad_out.float()}
    if not self_attn:
        inputs.update(key=k.float(), value=v.float())
    kpm = None
    if padding is not None:
        kpm = torch.tensor(padding, dtype=torch.bool)
        inputs["key_padding_mask"] = kpm.to(torch.uint8)
    attn_mask = None
    if causal:
        attn_mask = torch.triu(torch.ones(T, S, dtype=torch.bool), diagonal=1)
    if additive:
        add = f32(torch.randn(T, S))
        add[0, S - 1] = float("-inf")
        inputs["attn_mask"] = add.float()
        attn_mask = add

    keep = [b for b in range(B) if b != fully_padded]
    # PyTorch gives NaN for a fully padded query row; headlab defines it as
    # attention 0 (output = out_proj.bias, no gradient through q, k, v). So the
    # reference runs PyTorch on the other batch elements and fills in that one.
    sub = (lambda x: x[keep]) if fully_padded is not None else (lambda x: x)
    out, w, gq, gk, gv, grads = reference(
        mha, sub(q), sub(k), sub(v), sub(kpm) if kpm is not None else None,
        attn_mask, sub(grad_out))
    if fully_padded is not None:
        def widen(x):
            full = torch.zeros((B,) + tuple(x.shape[1:]), dtype=x.dtype)
            full[keep] = x
            return full
        out, w, gq, gk, gv = map(widen, (out, w, gq, gk, gv))
        out[fully_padded] = mha.out_proj.bias.detach() if bias else 0
        if bias:
            grads["grad.out_proj.bias"] += grad_out[fully_padded].sum(0)
    if self_attn:
        # One tensor fed as query, key and value: its gradient is the sum.
        gq = gq + gk + gv
        gk = gv = gq

    expected = {"output": out, "attn_weights": w, "grad.query": gq, "grad.key": gk,
                "grad.value": gv}
    expected.update(grads)
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    save(os.path.join(d, "weights.safetensors"),
         {n: p.detach().float() for n, p in mha.state_dict().items()})
    save(os.path.join(d, "inputs.safetensors"), inputs,
         {"heads": str(H), "causal": "1" if causal else "0"})
    save(os.path.join(d, "expected.safetensors"), {n: t.double() for n, t in expected.items()})
    print(f"{name}: B={B} T={T} S={S} E={E} H={H} kdim={kdim} vdim={vdim} bias={bias}")


def main():
    torch.set_default_dtype(torch.float64)
    make_case("self", B=2, T=5, S=5, E=8, H=2, seed=1)
    make_case("self_causal", B=2, T=6, S=6, E=8, H=4, causal=True, seed=2)
    make_case("self_nobias", B=2, T=4, S=4, E=6, H=3, bias=False, seed=3)
    make_case("cross", B=2, T=3, S=5, E=8, H=2, kdim=6, vdim=4, seed=4)
    make_case("cross_packed_additive", B=2, T=4, S=3, E=8, H=2, additive=True, seed=5)
    make_case("self_key_padding", B=3, T=4, S=4, E=8, H=2, seed=6, fully_padded=1,
              padding=[[0, 0, 0, 1], [1, 1, 1, 1], [0, 1, 0, 0]])
    make_case("self_batch1", B=1, T=4, S=4, E=8, H=2, causal=True, seed=7)
    make_case("cross_t1", B=2, T=1, S=3, E=8, H=4, seed=8)
    return 0


if __name__ == "__main__":
    sys.exit(main())
