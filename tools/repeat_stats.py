#!/usr/bin/env python3
"""How much a text rewards an induction head (README, "An induction head on real text?").

Over random windows of CTX tokens (charlm's tokens: the bytes, or --vocab N learnt words, cut
as text/vocab.c cuts them), prints the share of positions whose token appeared earlier in the
window ("repeat"), how often the token that followed its last occurrence is the next one
("reliability"), and their product; then the same leaving out the 50 most frequent tokens.

    tools/repeat_stats.py out/kjv/kjv.txt --vocab 2048
"""
import argparse
import collections
import random
import re


def tokens_of(text, vocab):
    words = re.findall(rb" ?[A-Za-z'\x80-\xff]+|[0-9]+|.", text, re.S)
    if vocab <= 256:
        return list(text)
    counts = collections.Counter(w for w in words if 2 <= len(w) <= 48)
    # most frequent first, ties in byte order, as hl_vocab_learn
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[: vocab - 256]
    keep = set(w for w, _ in ranked)
    out = []
    for w in words:
        out.extend([w] if w in keep else list(w))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file")
    p.add_argument("--vocab", type=int, default=0, help="0: bytes")
    p.add_argument("--ctx", type=int, default=256)
    p.add_argument("--windows", type=int, default=3000)
    p.add_argument("--skip", type=int, default=50, help="most frequent tokens left out last")
    a = p.parse_args()
    toks = tokens_of(open(a.file, "rb").read(), a.vocab)
    common = set(t for t, _ in collections.Counter(toks).most_common(a.skip))
    rng = random.Random(0)
    total = [0, 0]
    seen = [0, 0]
    right = [0, 0]
    for _ in range(a.windows):
        s = rng.randrange(len(toks) - a.ctx - 1)
        win = toks[s : s + a.ctx + 1]
        last = {}
        for i in range(a.ctx):
            for k, counted in enumerate((True, win[i] not in common)):
                total[k] += 1
                if counted and win[i] in last:
                    seen[k] += 1
                    right[k] += win[last[win[i]] + 1] == win[i + 1]
            last[win[i]] = i
    print(f"{a.file}: {len(toks)} tokens ({'bytes' if a.vocab <= 256 else f'vocab {a.vocab}'}), "
          f"{a.windows} windows of {a.ctx}")
    for k, what in enumerate(("all tokens", f"without the {a.skip} most frequent")):
        print(f"  {what}: repeat {seen[k] / total[k]:.3f}, reliability "
              f"{right[k] / max(seen[k], 1):.3f}, predicted {right[k] / total[k]:.3f}")


if __name__ == "__main__":
    main()
