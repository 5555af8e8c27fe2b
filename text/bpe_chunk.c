/* The BPE pre-tokenizer: GPT-2's split, on bytes (vocab.h). */
#include "text/vocab.h"

enum { SPACE, LETTER, DIGIT, OTHER };

static int byte_class(unsigned char c)
{
    if (c == ' ' || (c >= '\t' && c <= '\r')) /* \t \n \v \f \r: C's isspace */
        return SPACE;
    /* Every byte of a UTF-8 multi-byte character is a letter, so that words
     * of other scripts stay whole (GPT-2's \p{L} on bytes). */
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80)
        return LETTER;
    return c >= '0' && c <= '9' ? DIGIT : OTHER;
}

/* GPT-2's ` ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+` without its
 * contractions ('s, 't, ...), which here are other bytes and then letters. */
size_t hl_bpe_next_chunk(const unsigned char *text, size_t n, size_t i)
{
    size_t j = i;
    if (text[j] == ' ' && j + 1 < n && byte_class(text[j + 1]) != SPACE)
        j++;
    const int c = byte_class(text[j]);
    while (j < n && byte_class(text[j]) == c)
        j++;
    /* \s+(?!\S): a run of whitespace before a non-space gives its last byte
     * to the next chunk (" the"), unless that byte is all it has (\s+). */
    if (c == SPACE && j < n && j - i >= 2)
        j--;
    return j;
}
