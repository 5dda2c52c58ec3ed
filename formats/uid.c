/* MurmurHash3 x64 128 (Austin Appleby's public-domain algorithm), as Guava's
 * Hashing.murmur3_128(seed) computes it; Flink's StreamGraphHasherV2 derives
 * OperatorIDs from uids with seed 0. */
#include "sp_uid.h"

#include <string.h>

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static inline void store_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void sp_murmur3_x64_128(const void *data, size_t len, uint32_t seed, uint8_t out[16])
{
    const uint8_t *p = data;
    const size_t nblocks = len / 16;
    const uint64_t c1 = 0x87c37b91114253d5ULL, c2 = 0x4cf5ad432745937fULL;
    uint64_t h1 = seed, h2 = seed;

    for (size_t i = 0; i < nblocks; i++) {
        uint64_t k1 = load_le64(p + 16 * i), k2 = load_le64(p + 16 * i + 8);
        k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1;
        h1 = rotl64(h1, 27); h1 += h2; h1 = h1 * 5 + 0x52dce729;
        k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2;
        h2 = rotl64(h2, 31); h2 += h1; h2 = h2 * 5 + 0x38495ab5;
    }

    const uint8_t *tail = p + nblocks * 16;
    uint64_t k1 = 0, k2 = 0;
    switch (len & 15) {
    case 15: k2 ^= (uint64_t)tail[14] << 48; /* fall through */
    case 14: k2 ^= (uint64_t)tail[13] << 40; /* fall through */
    case 13: k2 ^= (uint64_t)tail[12] << 32; /* fall through */
    case 12: k2 ^= (uint64_t)tail[11] << 24; /* fall through */
    case 11: k2 ^= (uint64_t)tail[10] << 16; /* fall through */
    case 10: k2 ^= (uint64_t)tail[9] << 8;   /* fall through */
    case 9:  k2 ^= (uint64_t)tail[8];
             k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2; /* fall through */
    case 8:  k1 ^= (uint64_t)tail[7] << 56;  /* fall through */
    case 7:  k1 ^= (uint64_t)tail[6] << 48;  /* fall through */
    case 6:  k1 ^= (uint64_t)tail[5] << 40;  /* fall through */
    case 5:  k1 ^= (uint64_t)tail[4] << 32;  /* fall through */
    case 4:  k1 ^= (uint64_t)tail[3] << 24;  /* fall through */
    case 3:  k1 ^= (uint64_t)tail[2] << 16;  /* fall through */
    case 2:  k1 ^= (uint64_t)tail[1] << 8;   /* fall through */
    case 1:  k1 ^= (uint64_t)tail[0];
             k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1;
    }

    h1 ^= (uint64_t)len; h2 ^= (uint64_t)len;
    h1 += h2; h2 += h1;
    h1 = fmix64(h1); h2 = fmix64(h2);
    h1 += h2; h2 += h1;
    store_le64(out, h1);
    store_le64(out + 8, h2);
}

void sp_uid_to_operator_id(const char *uid, size_t len, uint8_t id[16])
{
    /* Guava's asBytes() is h1 LE || h2 LE, which AbstractID reads as
     * lowerPart/upperPart big-endian: the same 16 bytes Flink writes. */
    sp_murmur3_x64_128(uid, len, 0, id);
}
