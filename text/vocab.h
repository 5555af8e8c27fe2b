/*
 * vocab.h: the tokens of a text model — its bytes, words learnt from a
 * training text with the bytes as fallback, or byte-level BPE merges learnt
 * from a training text.
 *
 * Tokens 0..255 are the bytes themselves, so every text encodes. A learnt
 * vocabulary adds pieces 256..size-1: the most frequent words of the training
 * text as the pre-tokenizer cuts it (hl_vocab_next_word): a run of letters
 * (ASCII letters, the apostrophe of "LORD's" and every byte >= 0x80, so that
 * UTF-8 words stay whole, a no-break space or U+3000 among them) with the one
 * space before it (" the", " LORD", "And" at a line's start), a run of
 * digits, or any other single byte. Encoding maps each word to its
 * piece when the vocabulary has one, else to its bytes; decoding concatenates
 * the pieces, so decode(encode(text)) is the text, whatever its bytes.
 *
 * A BPE vocabulary (hl_vocab_learn_bpe) is GPT-2's byte-level BPE. The text is
 * first cut into chunks (hl_bpe_next_chunk), GPT-2's split on bytes: an
 * optional single space and then a run of letters (ASCII letters and every
 * byte >= 0x80, so UTF-8 words stay whole), or of digits, or of other bytes
 * (neither whitespace, letter nor digit); or a run of whitespace (space, \t,
 * \n, \v, \f, \r), which, when a non-space follows it and it has 2 bytes or
 * more, leaves its last byte to begin the next chunk (GPT-2's `\s+(?!\S)|\s+`:
 * "  the" is " " and " the"). Merges never cross a chunk boundary. Learning
 * repeats: merge the most frequent adjacent pair of tokens, counted over every
 * chunk times its frequency (overlapping pairs each count: "aaa" holds "aa"
 * twice), ties to the smallest (left id, right id), never a pair whose piece
 * would exceed HL_VOCAB_PIECE_MAX bytes; it stops at size tokens or when the
 * best pair occurs fewer than 2 times. A merge replaces its pair's
 * occurrences in each chunk left to right ("aaa" becomes "aa" "a"). Token
 * 256+i is the i-th merge, its
 * piece the concatenation of its two parts (two merges may give the same
 * bytes). Encoding a chunk applies, again and again, the merge of lowest id
 * among its adjacent pairs (the leftmost when it occurs twice), as GPT-2 and
 * tiktoken do; each distinct chunk of a text is encoded once.
 *
 * A pretrained vocabulary (hl_vocab_load_pretrained) is a byte-level BPE
 * tokenizer of a released model (GPT-2, Pythia, Llama 3, Qwen2), imported
 * from its files (docs/tokenizers.md): its ids in any order, its pieces as
 * raw bytes. Encoding first finds its added tokens in the text, literally
 * (the leftmost occurrence, and there the longest), each one token; the text
 * between them is cut into pre-tokens by the model's regex (PCRE2, Unicode
 * classes), where the bytes no match takes (for GPT-2's regex, only bytes
 * that are not UTF-8) form pre-tokens of their own, never merged with their
 * neighbours; each pre-token is the token its bytes are whole when the model
 * ignores merges (Llama 3), else its bytes' tokens merged by rank, the lowest
 * first and the leftmost of one rank, as Hugging Face's tokenizers and
 * tiktoken do. hl_vocab_encode adds no token at the start or end (no BOS or
 * EOS); hl_vocab_encode_input adds those of the tokenizer's post-processor
 * (Llama 3's <|begin_of_text|> first), as transformers' tokenizer(text) does
 * for one input.
 *
 *     hl_vocab *v = hl_vocab_learn(text, n, 4096, &err);       // or hl_vocab_bytes()
 *     int32_t *tokens; size_t n_tokens;
 *     hl_vocab_encode(v, text, n, &tokens, &n_tokens, &err);
 *     char *meta = hl_vocab_format(v);        // stored with the model (model_io.h)
 *     hl_vocab *back = hl_vocab_parse(meta, &err);
 *
 *     hl_vocab *gpt2 = hl_vocab_load_pretrained("models/gpt2", &err);
 */
#ifndef HL_VOCAB_H
#define HL_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define HL_VOCAB_BYTES 256        /* tokens 0..255: the bytes */
#define HL_VOCAB_MAX (1 << 20)    /* tokens at most */
#define HL_VOCAB_PIECE_MAX 48     /* a learnt piece's bytes at most */

typedef struct hl_vocab hl_vocab;

/* The 256 bytes and nothing else (a byte-level model). NULL when out of memory. */
hl_vocab *hl_vocab_bytes(void);
/* The bytes and the size-256 most frequent words of text (ties in byte order)
 * that are 2..HL_VOCAB_PIECE_MAX bytes long; fewer when the text has fewer.
 * HL_ERR_ARG when size is outside 257..HL_VOCAB_MAX. */
hl_vocab *hl_vocab_learn(const unsigned char *text, size_t n, int size, hl_error *err);
/* The bytes and the given pieces, as tokens 256, 257, ... HL_ERR_ARG, naming
 * the piece, for one shorter than 2 or longer than HL_VOCAB_PIECE_MAX bytes,
 * one given twice, or more than HL_VOCAB_MAX tokens in all. */
hl_vocab *hl_vocab_from_pieces(const unsigned char *const *pieces, const size_t *lens, int n,
                               hl_error *err);
/* Byte-level BPE of at most size tokens learnt from text (see the top);
 * fewer when the text runs out of pairs that occur twice. HL_ERR_ARG when
 * size is outside 257..HL_VOCAB_MAX. Learning time grows with the text's
 * distinct chunks and, per merge, with the length of the chunks it touches
 * (a text that is one huge chunk, without whitespace, learns slowly). */
hl_vocab *hl_vocab_learn_bpe(const unsigned char *text, size_t n, int size, hl_error *err);
/* The BPE vocabulary of n merges: token 256+i merges merges[2i] and
 * merges[2i+1]. HL_ERR_ARG, naming the token, for an id that is not below the
 * token it defines, a pair merged twice, a piece longer than
 * HL_VOCAB_PIECE_MAX bytes, or more than HL_VOCAB_MAX tokens in all. */
hl_vocab *hl_vocab_from_merges(const int32_t *merges, int n, hl_error *err);
/* The tokenizer of a model folder: DIR/tokenizer.json (Hugging Face's
 * tokenizers format) when present, else DIR/vocab.json + DIR/merges.txt,
 * else DIR/encoder.json + DIR/vocab.bpe (GPT-2's names for the same pair:
 * pieces -> ids in GPT-2's byte-to-unicode alphabet, and the merges by rank
 * after an optional "#version" line, with GPT-2's regex); dir may also be the
 * path of a tokenizer.json. A tokenizer.json must have a BPE model (vocab,
 * merges as "a b" or ["a", "b"], optional ignore_merges), a null normalizer
 * and a ByteLevel pre-tokenizer (add_prefix_space false) or a Sequence of a
 * Split (Regex, Isolated, not inverted) and a ByteLevel without regex; its
 * added_tokens are matched in the text (lstrip, rstrip and single_word
 * false); its post_processor is null, ByteLevel, a TemplateProcessing (the
 * special tokens of its "single" template, at most 8) or a Sequence of
 * these with one template. The size is the largest id + 1. HL_ERR_IO when dir cannot be read;
 * HL_ERR_FORMAT, naming the file and the field, for anything else: a missing
 * or malformed field, a SentencePiece-style file (a normalizer, byte_fallback,
 * Metaspace, Unigram or WordPiece), a gap in the ids, a byte without a token,
 * a merge of or into a piece that is not in the vocabulary, a pair merged
 * twice, a regex PCRE2 refuses. */
hl_vocab *hl_vocab_load_pretrained(const char *dir, hl_error *err);
void hl_vocab_free(hl_vocab *v);

/* "bytes" (256 tokens, whichever way it was made, but never a pretrained
 * one), "words", "bpe" or "pretrained". */
const char *hl_vocab_kind(const hl_vocab *v);
/* The two tokens a BPE token merges into *left, *right (for a pretrained
 * vocabulary, the merge of lowest rank that makes it); false for a byte, a
 * token no merge makes, a token outside the vocabulary, or any token of a
 * "words" vocabulary. */
bool hl_vocab_merge(const hl_vocab *v, int32_t token, int32_t *left, int32_t *right);

/* Tokens in the vocabulary (256 for the bytes alone). */
int hl_vocab_size(const hl_vocab *v);
/* The bytes of a token, *len of them; NULL when the token is outside
 * 0..size-1. */
const unsigned char *hl_vocab_piece(const hl_vocab *v, int32_t token, size_t *len);

/* Each token's length in bytes into bytes (size of them), e.g. to turn a loss
 * per token into one per byte. */
void hl_vocab_token_bytes(const hl_vocab *v, double *bytes);

/* The end of the word that starts at text[i] (i < n): see the top. */
size_t hl_vocab_next_word(const unsigned char *text, size_t n, size_t i);
/* The end of the BPE chunk that starts at text[i] (i < n): see the top. */
size_t hl_bpe_next_chunk(const unsigned char *text, size_t n, size_t i);

/* The first place p in from..n-1 where text may be cut so that encoding
 * text[0..p) and text[p..n) gives the tokens of the whole (for the bytes any
 * place; for words and BPE, a whitespace byte after a non-space; vocab_cut.c),
 * or n when there is none. Lets a text larger than memory be encoded in
 * pieces, in parallel. A pretrained vocabulary has fewer places, a lone
 * newline between two non-spaces or a non-space before " " and an ASCII
 * letter, and only where no added token spans them, and only with GPT-2's,
 * Llama 3's or Qwen2's regex: with any other, n (encode such a text whole). */
size_t hl_vocab_cut(const hl_vocab *v, const unsigned char *text, size_t n, size_t from);

/* The tokens of text into a malloc'd array (*tokens, *n_tokens; free it).
 * Never fails for want of a token; HL_ERR_NOMEM only (and HL_ERR_ARG for a
 * BPE chunk of 4 GiB or more, or a pretrained regex that PCRE2 gives up on). */
hl_status hl_vocab_encode(const hl_vocab *v, const unsigned char *text, size_t n,
                          int32_t **tokens, size_t *n_tokens, hl_error *err);
/* Whether a and b give every text the same tokens (hl_vocab_encode's): the
 * same stored form, but for a pretrained tokenizer's template, which
 * hl_vocab_encode_input alone reads (a token file made before templates were
 * kept speaks its folder's vocabulary). False when out of memory. */
bool hl_vocab_same_tokens(const hl_vocab *a, const hl_vocab *b);
/* hl_vocab_encode's tokens of one input to a model, inside the special tokens
 * the tokenizer's post-processor puts around it (a tokenizer.json's
 * TemplateProcessing; none for every other vocabulary). */
hl_status hl_vocab_encode_input(const hl_vocab *v, const unsigned char *text, size_t n,
                                int32_t **tokens, size_t *n_tokens, hl_error *err);
/* The text of tokens into a malloc'd, NUL-terminated array (*text, *len
 * without the NUL). HL_ERR_ARG, naming the position, for a token outside the
 * vocabulary. */
hl_status hl_vocab_decode(const hl_vocab *v, const int32_t *tokens, size_t n,
                          unsigned char **text, size_t *len, hl_error *err);

/* The learnt tokens as one printable-ASCII string (malloc'd; NULL when out of
 * memory). Words: "headlab-words-1" and then each piece of 256.. on a line of
 * its own, with \\, \n and the bytes outside 0x20..0x7e written as \\, \n,
 * \xNN. BPE: "headlab-bpe-1" and then each merge of 256.. on a line of its own
 * as its two token ids in decimal, "left right" (without a merge, as the
 * bytes are: "headlab-words-1" alone). hl_vocab_parse reads either
 * back, refusing (HL_ERR_FORMAT) any other header, and, naming the line, a bad
 * escape or an empty, one-byte or too long piece; naming both tokens, a piece
 * given twice; for BPE, naming the line, a line that is not two ids, an id
 * not below the token it defines, a piece over HL_VOCAB_PIECE_MAX bytes, and
 * naming both lines, a pair merged twice; more than HL_VOCAB_MAX tokens.
 * Pretrained: "headlab-pretrained-1" and the whole tokenizer, so a token or
 * model file needs no folder to read it back: its regex, whether it ignores
 * merges, every token's bytes in id order (added tokens marked) and the
 * merges by rank as id pairs (pretrained_format.c has the layout; about 1 MB
 * for GPT-2). Its parser refuses, naming the line, a line out of place or
 * malformed, and whatever hl_vocab_load_pretrained's checks refuse. */
char *hl_vocab_format(const hl_vocab *v);
hl_vocab *hl_vocab_parse(const char *s, hl_error *err);

#endif
