/*
 * hash.h: the hash of a byte string that text/'s tables share (FNV-1a,
 * 64-bit); internal to text/.
 */
#ifndef HL_TEXT_HASH_H
#define HL_TEXT_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t hl_text_hash(const unsigned char *s, size_t len)
{
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ s[i]) * 1099511628211u;
    return h;
}

#endif
