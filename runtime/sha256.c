/*
 * sha256.c: SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), so that the
 * disk cache can tell an entry this user's kjit wrote from one somebody else
 * planted: each entry carries an HMAC of its bytes under a secret only the
 * user can read (cache.c).  Self-contained on purpose: libkjit links no
 * crypto library, and these are a few dozen lines that the standard's test
 * vectors pin down (tests/unit/test_sha256.c runs FIPS 180-4's and RFC 4231's).
 *
 * On an x86-64 CPU with the SHA extensions (Intel since Goldmont and Ice
 * Lake, AMD since Zen) the blocks go through SHA256RNDS2 and friends,
 * about eight times the portable code's speed: kjit_module_load_library
 * hashes every byte of a library before it maps it (aot.c), and that hash
 * was most of a first call's cost (docs/aot.md, "Latency and sizes").  The
 * two give the same digests; the tests run both (kj_sha256_portable).
 */
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "kjit_runtime.h"

static const uint32_t round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotate_right(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

/* One 64-byte block into the state (FIPS 180-4, 6.2.2). */
static void compress(uint32_t state[8], const uint8_t block[64])
{
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
        w[t] = (uint32_t)block[4 * t] << 24 | (uint32_t)block[4 * t + 1] << 16 |
               (uint32_t)block[4 * t + 2] << 8 | (uint32_t)block[4 * t + 3];
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = rotate_right(w[t - 15], 7) ^ rotate_right(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = rotate_right(w[t - 2], 17) ^ rotate_right(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int t = 0; t < 64; t++) {
        uint32_t sum1 = rotate_right(e, 6) ^ rotate_right(e, 11) ^ rotate_right(e, 25);
        uint32_t choose = (e & f) ^ (~e & g);
        uint32_t t1 = h + sum1 + choose + round_constants[t] + w[t];
        uint32_t sum0 = rotate_right(a, 2) ^ rotate_right(a, 13) ^ rotate_right(a, 22);
        uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = sum0 + majority;
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
}

#if defined(__x86_64__)
/* `blocks` 64-byte blocks into the state with the SHA extensions: the
 * state held as ABEF and CDGH, the message schedule four words at a time
 * (SHA256MSG1, SHA256MSG2), two rounds per SHA256RNDS2. */
__attribute__((target("sha,sse4.1,ssse3"))) static void
compress_extensions(uint32_t state[8], const uint8_t *data, size_t blocks)
{
    const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i dcba = _mm_loadu_si128((const __m128i *)&state[0]);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)&state[4]);
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    for (; blocks > 0; blocks--, data += 64) {
        __m128i abef_before = abef, cdgh_before = cdgh;
        __m128i w[4];
        for (int i = 0; i < 4; i++)
            w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 16 * i)), byte_swap);
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) {
            if (i >= 4) {
                /* w[i % 4] holds W[4i-16..], the others the next three groups */
                __m128i w7 = _mm_alignr_epi8(w[(i + 3) & 3], w[(i + 2) & 3], 4);
                __m128i x = _mm_add_epi32(_mm_sha256msg1_epu32(w[i & 3], w[(i + 1) & 3]), w7);
                w[i & 3] = _mm_sha256msg2_epu32(x, w[(i + 3) & 3]);
            }
            __m128i k = _mm_loadu_si128((const __m128i *)&round_constants[4 * i]);
            __m128i message = _mm_add_epi32(w[i & 3], k);
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, message);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(message, 0x0E));
        }
        abef = _mm_add_epi32(abef, abef_before);
        cdgh = _mm_add_epi32(cdgh, cdgh_before);
    }
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(dchg, feba, 8));
}

/* CPUID: SSSE3 and SSE4.1 (leaf 1, ECX bits 9 and 19), SHA (leaf 7, EBX bit 29). */
static bool cpu_has_extensions(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 9)) || !(c & (1u << 19)))
        return false;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));
}
#endif

/* -1: not asked yet; 0: the portable code; 1: the SHA extensions. */
static int use_extensions = -1;

void kj_sha256_portable(bool portable)
{
    __atomic_store_n(&use_extensions, portable ? 0 : -1, __ATOMIC_RELAXED);
}

static void compress_blocks(uint32_t state[8], const uint8_t *data, size_t blocks)
{
#if defined(__x86_64__)
    int use = __atomic_load_n(&use_extensions, __ATOMIC_RELAXED);
    if (use < 0) {
        use = cpu_has_extensions();
        __atomic_store_n(&use_extensions, use, __ATOMIC_RELAXED);
    }
    if (use) {
        compress_extensions(state, data, blocks);
        return;
    }
#endif
    for (; blocks > 0; blocks--, data += 64)
        compress(state, data);
}

void kj_sha256_init(KjSha256 *sha)
{
    static const uint32_t initial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(sha->state, initial, sizeof initial);
    sha->length = 0;
    sha->used = 0;
}

void kj_sha256_update(KjSha256 *sha, const void *data, size_t size)
{
    const uint8_t *bytes = data;
    sha->length += size;
    if (sha->used) {
        size_t take = 64 - sha->used < size ? 64 - sha->used : size;
        memcpy(sha->block + sha->used, bytes, take);
        sha->used += take;
        bytes += take;
        size -= take;
        if (sha->used < 64)
            return;
        compress_blocks(sha->state, sha->block, 1);
        sha->used = 0;
    }
    compress_blocks(sha->state, bytes, size / 64);
    bytes += size / 64 * 64;
    size %= 64;
    memcpy(sha->block, bytes, size);
    sha->used = size;
}

void kj_sha256_final(KjSha256 *sha, uint8_t digest[KJ_SHA256_BYTES])
{
    /* 0x80, zeros to 56 mod 64, then the length in bits, big-endian (5.1.1). */
    uint64_t bits = sha->length * 8;
    uint8_t pad[72] = {0x80};
    size_t pad_size = (sha->used < 56 ? 56 : 120) - sha->used;
    for (int i = 0; i < 8; i++)
        pad[pad_size + i] = (uint8_t)(bits >> (56 - 8 * i));
    kj_sha256_update(sha, pad, pad_size + 8);
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (uint8_t)(sha->state[i] >> 24);
        digest[4 * i + 1] = (uint8_t)(sha->state[i] >> 16);
        digest[4 * i + 2] = (uint8_t)(sha->state[i] >> 8);
        digest[4 * i + 3] = (uint8_t)sha->state[i];
    }
    memset(sha, 0, sizeof *sha);
}

/* ================================================================ HMAC */

void kj_hmac_sha256_init(KjHmacSha256 *hmac, const void *key, size_t key_size)
{
    /* A key longer than a block is hashed first (RFC 2104, section 2). */
    uint8_t block[64] = {0};
    if (key_size > sizeof block) {
        KjSha256 sha;
        kj_sha256_init(&sha);
        kj_sha256_update(&sha, key, key_size);
        kj_sha256_final(&sha, block);
    } else if (key_size) {
        memcpy(block, key, key_size);
    }
    uint8_t pad[64];
    for (int i = 0; i < 64; i++)
        pad[i] = block[i] ^ 0x36;
    kj_sha256_init(&hmac->inner);
    kj_sha256_update(&hmac->inner, pad, sizeof pad);
    for (int i = 0; i < 64; i++)
        pad[i] = block[i] ^ 0x5c;
    kj_sha256_init(&hmac->outer);
    kj_sha256_update(&hmac->outer, pad, sizeof pad);
    memset(block, 0, sizeof block);
    memset(pad, 0, sizeof pad);
}

void kj_hmac_sha256_update(KjHmacSha256 *hmac, const void *data, size_t size)
{
    kj_sha256_update(&hmac->inner, data, size);
}

void kj_hmac_sha256_final(KjHmacSha256 *hmac, uint8_t mac[KJ_SHA256_BYTES])
{
    uint8_t inner[KJ_SHA256_BYTES];
    kj_sha256_final(&hmac->inner, inner);
    kj_sha256_update(&hmac->outer, inner, sizeof inner);
    kj_sha256_final(&hmac->outer, mac);
    memset(inner, 0, sizeof inner);
}

bool kj_mac_equal(const uint8_t *a, const uint8_t *b, size_t size)
{
    /* Every byte compared whatever the first difference, so that the time
     * taken says nothing about how much of a forged MAC was right. */
    uint8_t difference = 0;
    for (size_t i = 0; i < size; i++)
        difference |= a[i] ^ b[i];
    return difference == 0;
}
