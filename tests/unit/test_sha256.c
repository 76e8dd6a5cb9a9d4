/*
 * test_sha256.c: SHA-256 and HMAC-SHA-256 (runtime/sha256.c), the disk
 * cache's MAC, against the published test vectors: FIPS 180-4's examples
 * (NIST's "abc", the two-block and 896-bit messages, a million 'a's) and
 * RFC 4231's HMAC-SHA-256 test cases 1 to 7, each hashed whole and fed in
 * pieces of every size from 1 to 130 bytes (the block bookkeeping); each
 * test twice, with the SHA extensions where the CPU has them (_i 0) and
 * with the portable code (_i 1).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

static void hex(const uint8_t *bytes, size_t size, char *out)
{
    for (size_t i = 0; i < size; i++)
        sprintf(out + 2 * i, "%02x", bytes[i]);
}

/* The digest of data fed in pieces of `piece` bytes (0: all at once). */
static void sha256_text(const void *data, size_t size, size_t piece, char out[65])
{
    KjSha256 sha;
    kj_sha256_init(&sha);
    const uint8_t *p = data;
    for (size_t done = 0; done < size;) {
        size_t n = piece && size - done > piece ? piece : size - done;
        kj_sha256_update(&sha, p + done, n);
        done += n;
    }
    uint8_t digest[KJ_SHA256_BYTES];
    kj_sha256_final(&sha, digest);
    hex(digest, sizeof digest, out);
}

static const struct {
    const char *message, *digest;
} fips[] = {
    {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
    {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrst"
     "nopqrstu",
     "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
};

START_TEST(sha256_fips_180_4)
{
    kj_sha256_portable(_i == 1);
    for (size_t v = 0; v < sizeof fips / sizeof *fips; v++)
        for (size_t piece = 0; piece <= 130; piece++) {
            char got[65];
            sha256_text(fips[v].message, strlen(fips[v].message), piece, got);
            ck_assert_msg(strcmp(got, fips[v].digest) == 0, "'%s' in pieces of %zu: %s, want %s",
                          fips[v].message, piece, got, fips[v].digest);
        }
    char *million = malloc(1000000);
    memset(million, 'a', 1000000);
    char got[65];
    sha256_text(million, 1000000, 0, got);
    ck_assert_str_eq(got, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    sha256_text(million, 1000000, 4093, got);
    ck_assert_str_eq(got, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(million);
    kj_sha256_portable(false);
}
END_TEST

/* RFC 4231, section 4: key and data as (byte, count) runs or text. */
typedef struct Bytes {
    const char *text; /* or NULL: `count` copies of `byte` */
    uint8_t byte;
    size_t count;
} Bytes;

static size_t make(const Bytes *b, uint8_t *out)
{
    if (b->text) {
        memcpy(out, b->text, strlen(b->text));
        return strlen(b->text);
    }
    memset(out, b->byte, b->count);
    return b->count;
}

static const struct {
    Bytes key, data;
    const char *mac; /* case 5: the first 128 bits */
} rfc4231[] = {
    {{NULL, 0x0b, 20}, {"Hi There"}, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
    {{"Jefe"}, {"what do ya want for nothing?"},
     "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
    {{NULL, 0xaa, 20}, {NULL, 0xdd, 50}, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
    {{NULL, 0, 25} /* 0x01..0x19, made below */, {NULL, 0xcd, 50},
     "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
    {{NULL, 0x0c, 20}, {"Test With Truncation"}, "a3b6167473100ee06e0c796c2955552b"},
    {{NULL, 0xaa, 131}, {"Test Using Larger Than Block-Size Key - Hash Key First"},
     "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
    {{NULL, 0xaa, 131},
     {"This is a test using a larger than block-size key and a larger than block-size data. The key needs to be "
      "hashed before being used by the HMAC algorithm."},
     "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
};

START_TEST(hmac_sha256_rfc_4231)
{
    kj_sha256_portable(_i == 1);
    for (size_t c = 0; c < sizeof rfc4231 / sizeof *rfc4231; c++) {
        uint8_t key[256], data[256];
        size_t key_size = make(&rfc4231[c].key, key), data_size = make(&rfc4231[c].data, data);
        if (c == 3)
            for (size_t i = 0; i < key_size; i++)
                key[i] = (uint8_t)(i + 1);
        for (size_t piece = 0; piece <= 70; piece++) {
            KjHmacSha256 hmac;
            kj_hmac_sha256_init(&hmac, key, key_size);
            for (size_t done = 0; done < data_size;) {
                size_t n = piece && data_size - done > piece ? piece : data_size - done;
                kj_hmac_sha256_update(&hmac, data + done, n);
                done += n;
            }
            uint8_t mac[KJ_SHA256_BYTES];
            kj_hmac_sha256_final(&hmac, mac);
            char got[65];
            hex(mac, sizeof mac, got);
            size_t want = strlen(rfc4231[c].mac);
            ck_assert_msg(strncmp(got, rfc4231[c].mac, want) == 0, "test case %zu in pieces of %zu: %s, want %s",
                          c + 1, piece, got, rfc4231[c].mac);
        }
    }
    kj_sha256_portable(false);
}
END_TEST

START_TEST(mac_compare)
{
    uint8_t a[KJ_SHA256_BYTES], b[KJ_SHA256_BYTES];
    for (int i = 0; i < KJ_SHA256_BYTES; i++)
        a[i] = b[i] = (uint8_t)(i * 37);
    ck_assert(kj_mac_equal(a, b, sizeof a));
    for (int i = 0; i < KJ_SHA256_BYTES; i++) {
        b[i] ^= 0x80;
        ck_assert_msg(!kj_mac_equal(a, b, sizeof a), "a difference in byte %d", i);
        b[i] ^= 0x80;
    }
}
END_TEST

Suite *suite_sha256(void)
{
    Suite *suite = suite_create("sha256");
    TCase *tc = tcase_create("sha256");
    tcase_add_loop_test(tc, sha256_fips_180_4, 0, 2);
    tcase_add_loop_test(tc, hmac_sha256_rfc_4231, 0, 2);
    tcase_add_test(tc, mac_compare);
    suite_add_tcase(suite, tc);
    return suite;
}
