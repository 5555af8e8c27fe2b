/* Where a text may be cut so that its parts encode to the tokens of the
 * whole (vocab.h). */
#include "text/pretrained_impl.h"
#include "text/vocab.h"

static int is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* An ASCII byte that is no space: a byte of a multi-byte character may belong
 * to a Unicode space (U+00A0, U+2028, U+3000, ...), which the regexes' \s
 * takes. */
static int is_ascii_non_space(unsigned char c) { return c < 0x80 && !is_space(c); }

static int is_ascii_letter(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* The learnt vocabularies' pre-tokenizers, words (hl_vocab_next_word) and
 * BPE chunks (hl_bpe_next_chunk), end a piece at any whitespace byte after a
 * non-space: a run of letters, digits or other bytes stops there, and a space
 * only ever begins a piece. Both decide a piece's end looking forward alone,
 * and never past a non-space's following whitespace, so the part that ends at
 * p has the pieces of the whole up to p, and the part from p those after.
 * Words and chunks are encoded on their own, so the tokens are the whole's.
 *
 * The regexes of GPT-2, Llama 3 and Qwen2 join more (`\s+(?!\S)`, Llama 3's
 * `\s*[\r\n]+`): their places are narrower, where
 *   - a lone newline sits between two ASCII non-spaces: "x\n|y" (in "x\u00A0\n|y"
 *     GPT-2's regex splits the space from the newline in the whole text, and
 *     joins them at the end of the part before), or
 *   - a non-space is followed by a space and an ASCII letter: "x| the".
 * None looks behind, and none matches across either (each alternative that
 * takes a newline or a space stops before a non-space, or takes the space only
 * at its start), when no added token spans p. A pretrained vocabulary with
 * any other regex has no known place: n. */
size_t hl_vocab_cut(const hl_vocab *v, const unsigned char *text, size_t n, size_t from)
{
    const bool pretrained = v->pretrained != NULL;
    if (pretrained && !v->pretrained->known_pattern)
        return n;
    if (!pretrained && hl_vocab_size(v) == HL_VOCAB_BYTES)
        return from < n ? from : n;
    if (!pretrained) {
        for (size_t p = from < 1 ? 1 : from; p < n; p++)
            if (!is_space(text[p - 1]) && is_space(text[p]))
                return p;
        return n;
    }
    for (size_t p = from < 2 ? 2 : from; p + 1 < n; p++) {
        const unsigned char before = text[p - 1], at = text[p];
        const bool place = (before == '\n' && is_ascii_non_space(at) &&
                            is_ascii_non_space(text[p - 2])) ||
                           (!is_space(before) && at == ' ' && is_ascii_letter(text[p + 1]));
        if (place && hl_pretrained_cut_ok(v, text, n, p))
            return p;
    }
    return n;
}
