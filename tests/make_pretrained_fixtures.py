#!/usr/bin/env python3
"""Writes tests/fixtures/pretrained/llama3_style/tokenizer.json: a hand-made
tokenizer in the style of Llama 3's (a Split regex, then a ByteLevel without
regex; ignore_merges; special tokens), small enough that tests/test_pretrained.c
derives its expected ids by hand; and the fuzz seeds of the pretrained
readers (tests/fuzz/corpus/tokenizer_json/, vocab_merges/ and
vocab/pretrained.txt). Standard library only; run from the repository root:
python3 tests/make_pretrained_fixtures.py

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


def llama3_style(name, spell):
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
    return {
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


def escape(raw):
    r"""hl_vocab_format's escapes: \\, \n and \xNN outside 0x20..0x7e."""
    out = []
    for b in raw:
        if b == 0x5C:
            out.append("\\\\")
        elif b == 0x0A:
            out.append("\\n")
        elif b < 0x20 or b > 0x7E:
            out.append("\\x%02x" % b)
        else:
            out.append(chr(b))
    return "".join(out)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def main():
    name = byte_alphabet()
    spell = lambda text: "".join(name[b] for b in text.encode())
    tok = llama3_style(name, spell)
    with open("tests/fixtures/pretrained/llama3_style/tokenizer.json", "w") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)

    seeds = "tests/fuzz/corpus/tokenizer_json/"
    write(seeds + "llama3_style.json", json.dumps(tok, ensure_ascii=False))
    # GPT-2 style: bytes first, four merges, <|endoftext|> in the vocabulary and added.
    gpt2_vocab = {name[b]: b for b in range(256)}
    gpt2_merges = [["Ġ", "t"], ["h", "e"], ["Ġt", "he"]]
    for i, (a, b) in enumerate(gpt2_merges):
        gpt2_vocab[a + b] = 256 + i
    gpt2_vocab["<|endoftext|>"] = 259
    gpt2 = {"added_tokens": [{"id": 259, "content": "<|endoftext|>", "special": True}],
            "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
            "model": {"type": "BPE", "vocab": gpt2_vocab, "merges": gpt2_merges}}
    write(seeds + "gpt2_style.json", json.dumps(gpt2, ensure_ascii=False))
    write(seeds + "sentencepiece.json", json.dumps(
        {"normalizer": {"type": "Sequence", "normalizers": []},
         "pre_tokenizer": {"type": "Metaspace"},
         "model": {"type": "BPE", "byte_fallback": True, "vocab": {"a": 0}, "merges": []}}))
    write(seeds + "gap.json", json.dumps(
        {"pre_tokenizer": gpt2["pre_tokenizer"], "model": {"type": "BPE",
                                                            "vocab": {"a": 0, "b": 2},
                                                            "merges": []}}))
    write(seeds + "unknown_merge.json", json.dumps(
        {"pre_tokenizer": gpt2["pre_tokenizer"], "model": {"type": "BPE",
                                                            "vocab": {"a": 0, "b": 1},
                                                            "merges": ["a c"]}}))

    pairs = "tests/fuzz/corpus/vocab_merges/"
    pair_vocab = {k: v for k, v in gpt2_vocab.items() if v < 259}
    merges_txt = "#version: 0.2\r\n" + "".join(a + " " + b + "\r\n" for a, b in gpt2_merges)
    write(pairs + "gpt2_style.bin", json.dumps(pair_vocab, ensure_ascii=False) + "\0" + merges_txt)
    write(pairs + "no_merges.bin", json.dumps(pair_vocab, ensure_ascii=False) + "\0")
    write(pairs + "bad_merge.bin", json.dumps(pair_vocab, ensure_ascii=False) + "\0h e\nhe x y\n")

    # The stored form of the Llama 3-style tokenizer (hl_vocab_format's).
    pieces = {}
    for s_, i in tok["model"]["vocab"].items():
        pieces[i] = bytes(byte for c in s_ for byte in [next(b for b in name if name[b] == c)])
    for t in tok["added_tokens"]:
        pieces[t["id"]] = t["content"].encode()
    ids = {v: k for k, v in pieces.items()}
    lines = ["headlab-pretrained-1", "pattern " + escape(LLAMA3_PATTERN.encode()),
             "ignore_merges 1", "tokens %d" % len(pieces)]
    lines += [("a " if i < 2 else "t ") + escape(pieces[i]) for i in range(len(pieces))]
    merge_pairs = [m.split(" ") for m in tok["model"]["merges"]]
    lines.append("merges %d" % len(merge_pairs))
    unspell = lambda s_: bytes(next(b for b in name if name[b] == c) for c in s_)
    lines += ["%d %d" % (ids[unspell(a)], ids[unspell(b)]) for a, b in merge_pairs]
    write("tests/fuzz/corpus/vocab/pretrained.txt", "\n".join(lines))


main()
