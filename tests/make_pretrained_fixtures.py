#!/usr/bin/env python3
"""Writes tests/fixtures/pretrained/llama3_style/tokenizer.json: a hand-made
tokenizer in the style of Llama 3's (a Split regex, then a ByteLevel without
regex; ignore_merges; special tokens), small enough that tests/test_pretrained.c
derives its expected ids by hand. Standard library only; run from the
repository root: python3 tests/make_pretrained_fixtures.py

  ids 0, 1     the special tokens <|begin_of_text|> and <|eot_id|> (added_tokens)
  ids 2..7     the merges' pieces, in rank order: he, ll, hell, " w", or, " wor"
  ids 8, 9     hello and " world", which no merge makes (only ignore_merges finds them)
  ids 10..265  the bytes: byte b is token 10 + b
The merges are written as "a b" strings (the GPT-2 fixture has the
["a", "b"] form).
"""
import json

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def byte_alphabet():
    """GPT-2's bytes_to_unicode: byte -> the character that names it."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) +
          list(range(0xAE, 0xFF + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def main():
    name = byte_alphabet()
    spell = lambda text: "".join(name[b] for b in text.encode())
    merges = [("h", "e"), ("l", "l"), ("he", "ll"), (" ", "w"), ("o", "r"), (" w", "or")]
    vocab = {}
    for i, (a, b) in enumerate(merges):
        vocab[spell(a + b)] = 2 + i
    vocab[spell("hello")] = 8
    vocab[spell(" world")] = 9
    for b in range(256):
        vocab[name[b]] = 10 + b
    special = lambda i, s: {"id": i, "content": s, "single_word": False, "lstrip": False,
                            "rstrip": False, "normalized": False, "special": True}
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [special(0, "<|begin_of_text|>"), special(1, "<|eot_id|>")],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": vocab, "merges": [spell(a) + " " + spell(b) for a, b in merges]},
    }
    with open("tests/fixtures/pretrained/llama3_style/tokenizer.json", "w") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)


main()
