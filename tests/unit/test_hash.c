/* test_hash.c -- SHA-256 against FIPS 180-4's examples (one block, two blocks, a million
 * bytes fed in uneven pieces) and FNV-1a against its published values. */
#include <stdint.h>
#include <string.h>

#include "base/hash.h"
#include "check.h"

static void sha_of(const char *msg, size_t n, size_t piece, char hex[65]) {
    wpk_sha256 s;
    uint8_t d[32];
    wpk_sha256_init(&s);
    for (size_t i = 0; i < n; i += piece)
        wpk_sha256_update(&s, msg + i, n - i < piece ? n - i : piece);
    wpk_sha256_final(&s, d);
    wpk_sha256_hex(d, hex);
}

int main(void) {
    char hex[65];
    sha_of("", 0, 1, hex);
    CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0);
    sha_of("abc", 3, 3, hex);
    CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 56 bytes */
    for (size_t piece = 1; piece <= 64; piece += 7) {
        sha_of(two, strlen(two), piece, hex);
        CHECK(strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0);
    }
    static char million[1000000];
    memset(million, 'a', sizeof million);
    sha_of(million, sizeof million, 997, hex);
    CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0);

    CHECK(wpk_fnv1a64("", 0, WPK_FNV1A_SEED) == 0xcbf29ce484222325ull);
    CHECK(wpk_fnv1a64("a", 1, WPK_FNV1A_SEED) == 0xaf63dc4c8601ec8cull);
    CHECK(wpk_fnv1a64("foobar", 6, WPK_FNV1A_SEED) == 0x85944171f73967e8ull);
    /* streaming: the seed continues a hash */
    CHECK(wpk_fnv1a64("bar", 3, wpk_fnv1a64("foo", 3, WPK_FNV1A_SEED)) == 0x85944171f73967e8ull);
    CHECK_DONE();
}
