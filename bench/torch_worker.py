#!/usr/bin/python3
"""torch_worker.py: PyTorch's side of headlab's benchmark (bench/bench.c starts it).

The benchmark keeps one worker alive for the whole run and sends it one command per
timing block, so headlab's and PyTorch's blocks alternate. Commands come one per line
on stdin; each gets one line on stdout:

  (at start, unasked)               "ready <about>", or "absent <reason>" and exit
  threads N M                       torch.set_num_threads(N), OpenBLAS threads M -> "ok"
  gemm TA TB M N K BATCH INNER W S R
                                    C = op(A)·op(B) into a preallocated C (torch.mm, or
                                    torch.bmm over BATCH matrices; a transposed operand
                                    is a transposed view, as BLAS reads it in place)
  mha B T E H CAUSAL BWD WEIGHTS W S R
                                    nn.MultiheadAttention(E, H, batch_first=True) on
                                    x (B,T,E): forward in training mode (autograd
                                    recording), or forward + backward into x and weights;
                                    need_weights=bool(WEIGHTS) (per-head weights, as
                                    headlab's trace; False takes the fused SDPA path)
  toy W S R                         one training step of the TOYTASK.md model (the
                                    same shapes): zero-grad,
                                    forward, CE(scored) + CE(other), backward, AdamW
  gpt L H D T B V MODE MODERN W S R
                                    a GPT as headlab's charlm builds it (with an untied
                                    biased head) over V tokens: MODE 0 a training step
                                    (zero-grad, forward, CE, backward, AdamW), 1 a
                                    forward under no_grad in eval mode, 2 the first
                                    step of a new model and optimizer (built untimed
                                    for each timed call; no warm-up); MODERN 1: rotary positions, RMSNorm and a
                                    SwiGLU MLP instead (charlm --pos rope --norm rmsnorm
                                    --mlp swiglu)
  muon ROWS COLS STEPS W S R         Muon's orthogonalisation of one (ROWS,COLS) matrix:
                                    X = G/(|G| + 1e-7), transposed when tall, then STEPS
                                    Newton-Schulz steps with torch.mm
  timed commands: a warm-up of at least W calls and S seconds, then R timed runs (of
                  INNER calls for gemm) -> "ok s1 .. sR", seconds per call
  errors -> "error <message>"

  --dtype float32|float64   the element type (headlab's hl_real)
  --rss B,T,E,H,CAUSAL      instead: build that MHA config at 1 thread, print
                            "base <KiB>" (RSS after import and setup), run forward +
                            backward (need_weights=False) 3 times and exit; the parent
                            reads the peak RSS.

For the timings glibc malloc keeps freed memory (see keep_freed_memory); the --rss runs
use its defaults, which give the smaller peak.

Run with Debian's torch: /usr/bin/python3 (apt-get install python3-torch).
"""
import math
import os
import random
import re
import resource
import sys
import time

# Debian's torch calls OpenBLAS without setting its thread count; OpenBLAS's own
# threads would then fight torch's on the same cores. "threads N M" sets both.
os.environ["OPENBLAS_NUM_THREADS"] = "1"


def reply(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


try:
    import ctypes

    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except Exception as e:  # ImportError, or a torch that fails to load
    reply("absent %s: %s" % (sys.executable, e))
    sys.exit(0)

# The BLAS torch was built with: MKL in the pip wheels (its threads follow
# torch.set_num_threads), "generic" in Debian's torch, which reaches OpenBLAS
# through libblas.so.3 and whose threads are set apart.
BLAS_INFO = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
BLAS_INFO = BLAS_INFO.group(1) if BLAS_INFO else "unknown"
OPENBLAS = None
if BLAS_INFO != "mkl":
    try:  # the OpenBLAS instance libtorch already loaded
        OPENBLAS = ctypes.CDLL("libopenblas.so.0")
    except OSError:
        pass

DTYPE = torch.float32


def keep_freed_memory():
    """glibc malloc gives big freed blocks back to the kernel (munmap, heap trimming),
    so every call of a large MHA page-faults its activations in again: 2-5x slower at
    T = 1024 on this VM. Keeping freed memory is PyTorch's best speed (headlab reuses
    an arena); it costs some peak RSS, so the --rss runs keep glibc's defaults."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
    return bool(libc.mallopt(M_MMAP_THRESHOLD, 32 << 20) and
                libc.mallopt(M_TRIM_THRESHOLD, 1 << 30) and
                libc.mallopt(M_TOP_PAD, 256 << 20))


def about(malloc_tuned):
    text = "torch %s (%s)%s" % (torch.__version__, sys.executable,
                                ", malloc keeps freed memory" if malloc_tuned else "")
    if OPENBLAS is None:
        return text + ", BLAS %s (not OpenBLAS)" % BLAS_INFO
    OPENBLAS.openblas_get_corename.restype = ctypes.c_char_p
    core = OPENBLAS.openblas_get_corename().decode()
    return text + ", OpenBLAS core %s" % core


def set_threads(n, blas):
    torch.set_num_threads(n)
    if OPENBLAS is not None:
        OPENBLAS.openblas_set_num_threads(blas)


def timed(fn, warmup, warmup_seconds, reps, inner=1):
    start, done = time.perf_counter(), 0
    while done < warmup or time.perf_counter() - start < warmup_seconds:
        fn()
        done += 1
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        out.append((time.perf_counter() - t0) / inner)
    return out


# ------------------------------------------------------------------------------ GEMM
def operand(batch, rows, cols, trans, gen):
    """A (rows, cols) operand; stored (cols, rows) and viewed transposed when trans."""
    shape = (cols, rows) if trans else (rows, cols)
    if batch > 1:
        shape = (batch,) + shape
    t = torch.rand(shape, generator=gen, dtype=DTYPE) * 2 - 1
    return t.transpose(-1, -2) if trans else t


def gemm(ta, tb, M, N, K, batch, inner, warmup, warmup_seconds, reps):
    gen = torch.Generator().manual_seed(1)
    a = operand(batch, M, K, ta, gen)
    b = operand(batch, K, N, tb, gen)
    if batch > 1:
        c = torch.empty(batch, M, N, dtype=DTYPE)
        return timed(lambda: torch.bmm(a, b, out=c), warmup, warmup_seconds, reps, inner)
    c = torch.empty(M, N, dtype=DTYPE)
    return timed(lambda: torch.mm(a, b, out=c), warmup, warmup_seconds, reps, inner)


# ------------------------------------------------------------------------------ Muon
def muon(rows, cols, steps, warmup, warmup_seconds, reps):
    """Muon's orthogonalisation of one matrix: X = G/(|G| + 1e-7), transposed
    when tall, then steps of X = aX + (bA + cA^2)X, A = XX^T."""
    gen = torch.Generator().manual_seed(1)
    g = torch.rand(rows, cols, generator=gen, dtype=DTYPE) * 2 - 1
    a, b, c = 3.4445, -4.7750, 2.0315

    def orthogonalise():
        x = g / (g.norm() + 1e-7)
        if rows > cols:
            x = x.T
        for _ in range(steps):
            A = x @ x.T
            B = b * A + c * (A @ A)
            x = a * x + B @ x
        return x.T if rows > cols else x

    return timed(orthogonalise, warmup, warmup_seconds, reps)


# ------------------------------------------------------------------------------- MHA
MHA_CACHE = {}


def mha_setup(B, T, E, H):
    key = (B, T, E, H)
    if key not in MHA_CACHE:
        torch.manual_seed(0)
        mha = nn.MultiheadAttention(E, H, batch_first=True, dtype=DTYPE)
        mha.train()
        x = torch.randn(B, T, E, dtype=DTYPE, requires_grad=True)
        gout = torch.randn(B, T, E, dtype=DTYPE)
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        MHA_CACHE.clear()  # one config at a time: the benchmark goes through them in order
        MHA_CACHE[key] = (mha, x, gout, causal)
    return MHA_CACHE[key]


def mha_call(B, T, E, H, causal, backward, weights):
    mha, x, gout, mask = mha_setup(B, T, E, H)
    mask = mask if causal else None
    # need_weights=False: the training path (scaled_dot_product_attention), as
    # headlab's without a trace; True: the weights per head, as headlab's trace.
    kw = dict(need_weights=bool(weights), average_attn_weights=False, attn_mask=mask)
    if not backward:
        return lambda: mha(x, x, x, **kw)

    def fwdbwd():
        x.grad = None
        mha.zero_grad(set_to_none=True)
        out, _ = mha(x, x, x, **kw)
        out.backward(gout)
    return fwdbwd


# ------------------------------------------------------------------- the toy model
V, T_TOY, D_TOY, HEADS, LAYERS, BATCH = 16, 32, 64, 4, 2, 32
BOS = V


class ToyBlock(nn.Module):
    """Attention-only block: packed q|k|v Linear, causal softmax attention, out Linear."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D_TOY, 3 * D_TOY, dtype=DTYPE)
        self.o = nn.Linear(D_TOY, D_TOY, dtype=DTYPE)
        self.register_buffer("mask", torch.triu(torch.ones(T_TOY, T_TOY, dtype=torch.bool), 1))

    def forward(self, x):
        B, T, D = x.shape
        dh = D // HEADS
        q, k, v = self.qkv(x).view(B, T, 3, HEADS, dh).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
        att = att.masked_fill(self.mask, float("-inf")).softmax(-1)
        return x + self.o((att @ v).transpose(1, 2).reshape(B, T, D))


class ToyModel(nn.Module):
    """TOYTASK.md: token + position embeddings (N(0,1)), 2 blocks, Linear head."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V + 1, D_TOY, dtype=DTYPE)
        self.pos = nn.Embedding(T_TOY, D_TOY, dtype=DTYPE)
        self.blocks = nn.ModuleList([ToyBlock() for _ in range(LAYERS)])
        self.un = nn.Linear(D_TOY, V, dtype=DTYPE)
        self.register_buffer("positions", torch.arange(T_TOY))

    def forward(self, x):
        h = self.emb(x) + self.pos(self.positions)
        for b in self.blocks:
            h = b(h)
        return self.un(h)


def toy_batch(rng):
    """32 sequences of TOYTASK.md: tokens (B,T), targets (B,T-1), scored mask (B,T-1)."""
    xs, scored = [], []
    for _ in range(BATCH):
        x = [BOS] + [rng.randrange(V) for _ in range(T_TOY - 1)]
        L = rng.randint(4, 12)
        s = rng.randint(1, T_TOY - 2 * L)
        d = rng.randint(s + L, T_TOY - L)
        x[d:d + L] = x[s:s + L]
        xs.append(x)
        scored.append([d + 1 <= t <= d + L - 1 for t in range(1, T_TOY)])
    x = torch.tensor(xs)
    return x, x[:, 1:].contiguous(), torch.tensor(scored)


TOY = None


def toy_setup():
    global TOY
    if TOY is None:
        torch.manual_seed(0)
        model = ToyModel()
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-8,
                                weight_decay=0.01)
        rng = random.Random(0)
        TOY = (model, opt, [toy_batch(rng) for _ in range(8)], [0])
    return TOY


def toy_step():
    model, opt, batches, it = toy_setup()
    x, tgt, scored = batches[it[0] % len(batches)]
    it[0] += 1
    opt.zero_grad(set_to_none=True)
    logits = model(x)[:, :-1]
    loss = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1), reduction="none")
    loss = loss.view(tgt.shape)
    total = loss[scored].mean() + loss[~scored].mean()
    total.backward()
    opt.step()


# ---------------------------------------------------------------------- the GPT rows


class GptBlock(nn.Module):
    """Pre-LayerNorm: x + MHA(LN(x)) causal, then x + Linear(GELU(Linear(LN(x))))."""

    def __init__(self, d, h):
        super().__init__()
        self.ln1 = nn.LayerNorm(d, dtype=DTYPE)
        self.ln2 = nn.LayerNorm(d, dtype=DTYPE)
        self.attn = nn.MultiheadAttention(d, h, batch_first=True, dtype=DTYPE)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d, dtype=DTYPE), nn.GELU(),
                                 nn.Linear(4 * d, d, dtype=DTYPE))

    def forward(self, x, mask):
        y = self.ln1(x)
        x = x + self.attn(y, y, y, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class RmsNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight (PyTorch 1.13 has no nn.RMSNorm)."""

    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d, dtype=DTYPE))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight


class ModernBlock(nn.Module):
    """Pre-RMSNorm: x + attention with rotary q, k (rotate-half, as Hugging Face's
    Llama), then x + W2(silu(W1 x) * W3 x) with W1, W3 packed in one Linear."""

    def __init__(self, d, h, T):
        super().__init__()
        self.h = h
        width = ((8 * d + 2) // 3 + 15) // 16 * 16
        self.ln1, self.ln2 = RmsNorm(d), RmsNorm(d)
        self.qkv = nn.Linear(d, 3 * d, dtype=DTYPE)
        self.out = nn.Linear(d, d, dtype=DTYPE)
        self.fc = nn.Linear(d, 2 * width, dtype=DTYPE)
        self.proj = nn.Linear(width, d, dtype=DTYPE)
        D = d // h
        inv_freq = 1.0 / (10000 ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
        freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos().to(DTYPE))
        self.register_buffer("sin", emb.sin().to(DTYPE))

    def rotate(self, x):
        half = x.shape[-1] // 2
        return x * self.cos + torch.cat((-x[..., half:], x[..., :half]), -1) * self.sin

    def forward(self, x, mask):
        B, T, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, -1)
        q, k, v = (t.view(B, T, self.h, d // self.h).transpose(1, 2) for t in (q, k, v))
        q, k = self.rotate(q), self.rotate(k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True) \
            if hasattr(F, "scaled_dot_product_attention") else \
            ((q @ k.transpose(-1, -2)) / math.sqrt(d // self.h)).masked_fill(
                mask, float("-inf")).softmax(-1) @ v
        x = x + self.out(y.transpose(1, 2).reshape(B, T, d))
        gate, up = self.fc(self.ln2(x)).chunk(2, -1)
        return x + self.proj(F.silu(gate) * up)


class Gpt(nn.Module):
    def __init__(self, layers, heads, d, T, V, modern=False):
        super().__init__()
        self.tok = nn.Embedding(V, d, dtype=DTYPE)
        self.pos = None if modern else nn.Parameter(0.02 * torch.randn(T, d, dtype=DTYPE))
        self.blocks = nn.ModuleList(ModernBlock(d, heads, T) if modern else GptBlock(d, heads)
                                    for _ in range(layers))
        self.ln_f = RmsNorm(d) if modern else nn.LayerNorm(d, dtype=DTYPE)
        self.head = nn.Linear(d, V, dtype=DTYPE)
        self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), 1))

    def forward(self, idx):
        x = self.tok(idx)
        if self.pos is not None:
            x = x + self.pos[: idx.shape[1]]
        for b in self.blocks:
            x = b(x, self.mask)
        return self.head(self.ln_f(x))


def gpt_build(layers, heads, d, T, V, modern=0):
    torch.manual_seed(0)
    model = Gpt(layers, heads, d, T, V, bool(modern))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.01)
    return model, opt


def gpt_batches(B, T, V):
    """x[t+1] = (3 x[t] + 1) mod V from a random start, as tiny_gpt_train.py."""
    g = torch.Generator().manual_seed(1)
    out = []
    for _ in range(4):
        steps = [torch.randint(0, V, (B, 1), generator=g)]
        for _ in range(T):
            steps.append((3 * steps[-1] + 1) % V)
        s = torch.cat(steps, dim=1)
        out.append((s[:, :-1].contiguous(), s[:, 1:].contiguous()))
    return out


def gpt_call(layers, heads, d, T, B, V, mode, modern=0):
    model, opt = gpt_build(layers, heads, d, T, V, modern)
    batches, it = gpt_batches(B, T, V), [0]

    def step():
        x, y = batches[it[0] % len(batches)]
        it[0] += 1
        if mode == 1:
            model.eval()
            with torch.no_grad():
                F.cross_entropy(model(x).view(-1, V), y.view(-1))
            return
        model.train()
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x).view(-1, V), y.view(-1)).backward()
        opt.step()
    return step


GENERATE_TOKENS = 64  # bench.h BENCH_GENERATE_TOKENS


def gpt_generate_call(layers, heads, d, T, B, V, modern):
    """One call: a token, then GENERATE_TOKENS argmax tokens, each run through
    the model once against cached keys and values (the loop a key/value cache
    makes of generation, written out for the classic model)."""
    assert not modern, "generation is measured on the classic model"
    model, _ = gpt_build(layers, heads, d, T, V, modern)
    model.eval()
    D = d // heads
    n = GENERATE_TOKENS + 1
    keys = [torch.zeros(heads, n, D, dtype=DTYPE) for _ in range(layers)]
    values = [torch.zeros(heads, n, D, dtype=DTYPE) for _ in range(layers)]

    def step():
        token = 0
        with torch.no_grad():
            for t in range(n):
                x = model.tok.weight[token] + model.pos[t]
                for b, block in enumerate(model.blocks):
                    a = block.attn
                    q, k, v = F.linear(block.ln1(x), a.in_proj_weight, a.in_proj_bias).view(
                        3, heads, D).unbind(0)
                    keys[b][:, t] = k
                    values[b][:, t] = v
                    s = (keys[b][:, : t + 1] @ q.unsqueeze(-1)).squeeze(-1) / math.sqrt(D)
                    y = (s.softmax(-1).unsqueeze(1) @ values[b][:, : t + 1]).reshape(d)
                    x = x + a.out_proj(y)
                    x = x + block.mlp(block.ln2(x))
                token = int(model.head(model.ln_f(x)).argmax())
    return step


def gpt_first_steps(layers, heads, d, T, B, V, modern, warmup, warmup_seconds, reps):
    """Each timed call: a new model and optimizer (untimed), then its first step."""
    out = []
    for _ in range(reps):
        fn = gpt_call(layers, heads, d, T, B, V, 0, modern)
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


# ---------------------------------------------------------------------------- main
def rss_mode(config):
    B, T, E, H, causal = (int(v) for v in config.split(","))
    set_threads(1, 1)
    fn = mha_call(B, T, E, H, causal, True, False)
    reply("base %d" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    for _ in range(3):
        fn()


def serve():
    reply("ready " + about(keep_freed_memory()))
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        try:
            cmd = words[0]
            if cmd == "threads":
                set_threads(*(int(w) for w in words[1:]))
                reply("ok")
                continue
            # timed commands: integer arguments, then W S R
            args = [int(w) for w in words[1:-3]]
            block = (int(words[-3]), float(words[-2]), int(words[-1]))
            if cmd == "gemm":
                times = gemm(*args, *block)
            elif cmd == "muon" and len(args) == 3:
                times = muon(*args, *block)
            elif cmd == "mha":
                times = timed(mha_call(*args), *block)
            elif cmd == "toy" and not args:
                times = timed(toy_step, *block)
            elif cmd == "gpt" and len(args) == 8 and args[6] == 3:
                times = timed(gpt_generate_call(*args[:6], args[7]), *block)
            elif cmd == "gpt" and len(args) == 8 and args[6] == 2:
                times = gpt_first_steps(*args[:6], args[7], *block)
            elif cmd == "gpt" and len(args) == 8:
                times = timed(gpt_call(*args), *block)
            else:
                reply("error unknown command %s" % cmd)
                continue
            reply("ok " + " ".join("%.9g" % t for t in times))
        except Exception as e:  # report, keep serving
            reply("error %s: %s" % (type(e).__name__, e))


def main():
    global DTYPE
    args = sys.argv[1:]
    rss = None
    while args:
        flag = args.pop(0)
        if flag == "--dtype" and args:
            DTYPE = {"float32": torch.float32, "float64": torch.float64}[args.pop(0)]
        elif flag == "--rss" and args:
            rss = args.pop(0)
        else:
            sys.exit("torch_worker.py: unknown or incomplete option %s" % flag)
    if rss:
        rss_mode(rss)
    else:
        serve()


if __name__ == "__main__":
    main()
