/* Where a text may be cut so that its parts encode to the tokens of the
 * whole (vocab.h). */
#include "text/pretrained_impl.h"
#include "text/vocab.h"

static int is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static int is_ascii_letter(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Both pre-tokenizers (words and BPE chunks) end a piece at p and start the
 * next one there, whatever follows, when
 *   - a lone newline sits between two non-spaces: "x\n|y" (a run of two or
 *     more whitespace bytes would give its last byte to the next BPE chunk,
 *     but only when the run does not end the text, so cutting after it would
 *     change the chunks), or
 *   - a non-space is followed by a space and an ASCII letter: "x| the" (the
 *     space begins the next word or chunk).
 * In both, the piece before p ends at p in the whole text and in the part
 * that ends at p, and the piece after p begins at p in both.
 *
 * The same holds for the regexes of GPT-2, Llama 3 and Qwen2 (none looks
 * behind, and none matches across a space before a letter or across a lone
 * newline between non-spaces: each alternative that takes a newline or a
 * space stops before a non-space, or takes the space only at its start), when
 * no added token spans p. A pretrained vocabulary with any other regex has no
 * known place: n. */
size_t hl_vocab_cut(const hl_vocab *v, const unsigned char *text, size_t n, size_t from)
{
    const bool pretrained = v->pretrained != NULL;
    if (pretrained && !v->pretrained->known_pattern)
        return n;
    if (!pretrained && hl_vocab_size(v) == HL_VOCAB_BYTES)
        return from < n ? from : n;
    for (size_t p = from < 2 ? 2 : from; p + 1 < n; p++) {
        const unsigned char before = text[p - 1], at = text[p];
        const bool place = (before == '\n' && !is_space(at) && !is_space(text[p - 2])) ||
                           (!is_space(before) && at == ' ' && is_ascii_letter(text[p + 1]));
        if (place && (!pretrained || hl_pretrained_cut_ok(v, text, n, p)))
            return p;
    }
    return n;
}
