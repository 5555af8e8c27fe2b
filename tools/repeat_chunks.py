#!/usr/bin/env python3
"""Writes a text in which half of the chunks are said twice: the input is cut
into chunks of 16..48 bytes (at random), and each chunk is followed by a copy
of itself with probability 1/2. A copy's length and distance vary, so only a
content-based (induction) head predicts it; used in the README to grow
induction heads in a small charlm within minutes.

    tools/repeat_chunks.py IN OUT [SEED]
"""
import random
import sys

src, dst = sys.argv[1], sys.argv[2]
rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
text = open(src, "rb").read()
out, i = bytearray(), 0
while i < len(text):
    chunk = text[i:i + rng.randint(16, 48)]
    out += chunk
    if rng.random() < 0.5:
        out += chunk
    i += len(chunk)
open(dst, "wb").write(out)
