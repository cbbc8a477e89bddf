/* sha256.h — a small streaming SHA-256 (FIPS 180-4).
 *
 * The Hub names LFS blobs by the SHA-256 of their content (X-Linked-Etag);
 * the download path hashes bytes as they arrive and compares the digest with
 * that name before a blob is moved into the cache. Tested against the FIPS
 * example vectors in tests/test_hub.c.
 */
#ifndef GP_IO_SHA256_H
#define GP_IO_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct gp_sha256 {
    uint32_t state[8];
    uint64_t total; /* bytes hashed so far */
    unsigned char block[64];
    size_t block_len; /* bytes waiting in `block` */
} gp_sha256;

void gp_sha256_init(gp_sha256 *s);
void gp_sha256_update(gp_sha256 *s, const void *data, size_t len);
/* Finish and write the 32-byte digest; `s` must be re-initialised to reuse. */
void gp_sha256_final(gp_sha256 *s, unsigned char digest[32]);
/* Finish and write the digest as 64 lowercase hex digits plus a NUL. */
void gp_sha256_final_hex(gp_sha256 *s, char hex[65]);
/* One-shot convenience: hex digest of a buffer. */
void gp_sha256_hex(const void *data, size_t len, char hex[65]);

#endif
