#!/usr/bin/env python3
"""Writes tests/fixtures/bpe/: byte-level BPE learnt from train.txt by a plain,
slow implementation of text/vocab.h's rules, for tests/test_vocab.c to compare
the C learner and encoder with. Standard library only; run from the repository
root: python3 tests/make_bpe_fixtures.py

  train.txt        (read, not written) a text written for these tests: repeated
                   words, punctuation, digits, runs of spaces, tabs, CRLF, UTF-8,
                   and runs of "a", "-" and "=" longer than a piece may be
  merges_300.txt   the merges of a 300-token vocabulary, as hl_vocab_format
  merges_all.txt   the merges until no pair occurs twice (a size never reached)
  ab.txt           pseudo-random words of "a" and "b" (overlapping pairs: "aaa",
                   "abab"), and merges_ab.txt, its merges until no pair occurs twice
  unseen.bin       a text the learner never saw: English, every byte 0..255,
                   pseudo-random bytes, long runs of spaces and letters
  encodings.txt    "<merges> <text>: id id ..." for both vocabularies on
                   train.txt and unseen.bin
"""
import collections
import re

DIR = "tests/fixtures/bpe"
PIECE_MAX = 48  # HL_VOCAB_PIECE_MAX

# GPT-2's split without its contractions, on bytes: letters are ASCII letters
# and every byte >= 0x80; \s in a bytes pattern is [ \t\n\r\f\v].
CHUNK = re.compile(rb" ?[A-Za-z\x80-\xff]+| ?[0-9]+| ?[^\sA-Za-z0-9\x80-\xff]+|\s+(?!\S)|\s+")


def chunks(text):
    found = CHUNK.findall(text)
    assert b"".join(found) == text
    return found


def merge_word(tokens, pair, new):
    """Every occurrence of pair replaced by new, left to right."""
    out, i = [], 0
    while i < len(tokens):
        if i + 1 < len(tokens) and (tokens[i], tokens[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(tokens[i])
            i += 1
    return out


def learn(text, size):
    """Merges [(left, right), ...]: the most frequent pair each round (every
    adjacent pair counted, times its chunk's frequency), ties to the smallest
    (left, right), never a piece over PIECE_MAX bytes; stop at size tokens or
    when the best pair occurs fewer than 2 times."""
    words = [[list(c), n] for c, n in collections.Counter(chunks(text)).items()]
    length = [1] * 256
    merges = []
    while 256 + len(merges) < size:
        counts = collections.Counter()
        for tokens, n in words:
            for pair in zip(tokens, tokens[1:]):
                counts[pair] += n
        candidates = [(-c, p) for p, c in counts.items()
                      if length[p[0]] + length[p[1]] <= PIECE_MAX]
        if not candidates:
            break
        minus_count, pair = min(candidates)
        if -minus_count < 2:
            break
        new = 256 + len(merges)
        merges.append(pair)
        length.append(length[pair[0]] + length[pair[1]])
        for w in words:
            w[0] = merge_word(w[0], pair, new)
    return merges


def encode(text, merges):
    """Per chunk: the merge of lowest id among adjacent pairs, leftmost first,
    again and again."""
    rank = {pair: 256 + i for i, pair in enumerate(merges)}
    out = []
    for chunk in chunks(text):
        tokens = list(chunk)
        while True:
            found = [(rank[p], i) for i, p in enumerate(zip(tokens, tokens[1:])) if p in rank]
            if not found:
                break
            new, i = min(found)
            tokens[i:i + 2] = [new]
        out.extend(tokens)
    return out


def decode(tokens, merges):
    piece = [bytes([b]) for b in range(256)]
    for left, right in merges:
        piece.append(piece[left] + piece[right])
    return b"".join(piece[t] for t in tokens)


def unseen_text():
    state = 12345
    noise = bytearray()
    for _ in range(1500):
        state = (1103515245 * state + 12345) % (1 << 31)
        noise.append(state >> 16 & 0xff)
    return (b"The frog ate the unseen fly; 12345 cats!\n" + bytes(range(256)) + bytes(noise) +
            b" " * 70 + b"x" + b"a" * 130 + b"\t\t\n\n  \x00\x00 \xff\xfe caf\xc3\xa9 end")


def ab_text():
    state = 777
    words = []
    for _ in range(400):
        state = (1103515245 * state + 12345) % (1 << 31)
        length = 1 + (state >> 16) % 9
        word = ""
        for _ in range(length):
            state = (1103515245 * state + 12345) % (1 << 31)
            word += "ab"[state >> 20 & 1]
        words.append(word)
    return (" ".join(words) + "\n").encode()


def main():
    with open(DIR + "/train.txt", "rb") as f:
        train = f.read()
    unseen = unseen_text()
    with open(DIR + "/unseen.bin", "wb") as f:
        f.write(unseen)
    ab = ab_text()
    with open(DIR + "/ab.txt", "wb") as f:
        f.write(ab)
    lines = []
    for name, size, text in (("merges_300", 300, train), ("merges_all", 1 << 20, train),
                             ("merges_ab", 1 << 20, ab)):
        merges = learn(text, size)
        if name != "merges_300":
            assert 256 + len(merges) < 300 * 4, "expected the stop rule, not the size"
        else:
            assert len(merges) == 300 - 256
        assert max(len(decode([256 + i], merges)) for i in range(len(merges))) <= PIECE_MAX
        with open("%s/%s.txt" % (DIR, name), "w") as f:
            f.write("\n".join(["headlab-bpe-1"] + ["%d %d" % p for p in merges]))
        for text_name, sample in (("train", text), ("unseen", unseen)):
            tokens = encode(sample, merges)
            assert decode(tokens, merges) == sample
            lines.append("%s %s: %s" % (name, text_name, " ".join(map(str, tokens))))
        print("%s: %d merges, training text %d bytes -> %d tokens" %
              (name, len(merges), len(text), len(encode(text, merges))))
    with open(DIR + "/encodings.txt", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
