/* zip.c — central-directory zip reader for torch checkpoints (see zip.h). */
#include "io/zip.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define ZIP_EOCD_SIG 0x06054b50u
#define ZIP64_EOCD_SIG 0x06064b50u
#define ZIP64_LOCATOR_SIG 0x07064b50u
#define ZIP_CENTRAL_SIG 0x02014b50u
#define ZIP_LOCAL_SIG 0x04034b50u
#define ZIP_EOCD_SIZE 22
#define ZIP_CENTRAL_SIZE 46
#define ZIP_LOCAL_SIZE 30

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

int gp_zip_looks_like(const void *data, size_t size) {
    const unsigned char *p = data;
    return size >= 4 && p[0] == 'P' && p[1] == 'K' &&
           ((p[2] == 3 && p[3] == 4) || (p[2] == 5 && p[3] == 6));
}

/* Position of the end-of-central-directory record, or -1. */
static long zip_find_eocd(const unsigned char *d, size_t size) {
    if (size < ZIP_EOCD_SIZE) return -1;
    size_t lowest = size > ZIP_EOCD_SIZE + 65535 ? size - ZIP_EOCD_SIZE - 65535 : 0;
    for (size_t pos = size - ZIP_EOCD_SIZE + 1; pos-- > lowest;) {
        if (rd32(d + pos) != ZIP_EOCD_SIG) continue;
        if (pos + ZIP_EOCD_SIZE + rd16(d + pos + 20) == size) return (long)pos;
    }
    return -1;
}

typedef struct zip_directory {
    uint64_t count, cd_size, cd_offset;
} zip_directory;

static int zip_read_directory(const gp_zip *z, zip_directory *dir, gp_error *err) {
    const unsigned char *d = z->data;
    long eocd = zip_find_eocd(d, z->size);
    if (eocd < 0)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: no zip end-of-central-directory record — the file is truncated or "
                       "not a zip archive",
                       z->origin);
    const unsigned char *e = d + eocd;
    dir->count = rd16(e + 10);
    dir->cd_size = rd32(e + 12);
    dir->cd_offset = rd32(e + 16);
    bool zip64 =
        dir->count == 0xFFFF || dir->cd_size == 0xFFFFFFFFu || dir->cd_offset == 0xFFFFFFFFu;
    if (eocd >= 20 && rd32(d + eocd - 20) == ZIP64_LOCATOR_SIG) {
        uint64_t rec = rd64(d + eocd - 20 + 8);
        if (rec > z->size || z->size - rec < 56 || rd32(d + rec) != ZIP64_EOCD_SIG)
            return gp_fail(err, GEPARD_ERR_FORMAT,
                           "%s: the ZIP64 end record is missing or out of range — the file is "
                           "truncated or corrupt",
                           z->origin);
        dir->count = rd64(d + rec + 32);
        dir->cd_size = rd64(d + rec + 40);
        dir->cd_offset = rd64(d + rec + 48);
    } else if (zip64) {
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: zip directory needs ZIP64 records that are missing — the file is "
                       "truncated or corrupt",
                       z->origin);
    }
    if (dir->cd_offset > z->size || dir->cd_size > z->size - dir->cd_offset ||
        dir->count > dir->cd_size / ZIP_CENTRAL_SIZE)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: the zip central directory lies outside the file — the file is "
                       "truncated or corrupt",
                       z->origin);
    return GEPARD_OK;
}

/* Apply a ZIP64 extra field (id 1) to the 32-bit values that overflowed. */
static int zip_apply_zip64(const unsigned char *extra, size_t len, uint64_t *size, uint64_t *stored,
                           uint64_t *offset) {
    for (size_t p = 0; p + 4 <= len;) {
        uint16_t id = rd16(extra + p), n = rd16(extra + p + 2);
        if (p + 4 + n > len) return -1;
        if (id == 0x0001) {
            const unsigned char *f = extra + p + 4;
            size_t used = 0;
            uint64_t *fields[3] = {size, stored, offset};
            for (int i = 0; i < 3; i++) {
                if (*fields[i] != 0xFFFFFFFFu) continue;
                if (used + 8 > n) return -1;
                *fields[i] = rd64(f + used);
                used += 8;
            }
            return 0;
        }
        p += 4 + (size_t)n;
    }
    return 0;
}

static int zip_read_entry(gp_zip *z, size_t *pos, size_t cd_end, gp_zip_entry *out, gp_error *err) {
    const unsigned char *d = z->data, *c = d + *pos;
    if (cd_end - *pos < ZIP_CENTRAL_SIZE || rd32(c) != ZIP_CENTRAL_SIG)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: corrupt zip central directory at byte %zu",
                       z->origin, *pos);
    size_t name_len = rd16(c + 28), extra_len = rd16(c + 30), comment_len = rd16(c + 32);
    if (cd_end - *pos - ZIP_CENTRAL_SIZE < name_len + extra_len + comment_len)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: a zip directory record runs past its end",
                       z->origin);
    uint64_t stored = rd32(c + 20), size = rd32(c + 24), local = rd32(c + 42);
    if (zip_apply_zip64(c + ZIP_CENTRAL_SIZE + name_len, extra_len, &size, &stored, &local))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: corrupt ZIP64 extra field", z->origin);
    out->name = malloc(name_len + 1);
    if (!out->name) return gp_fail_oom(err, "zip entry name", name_len + 1);
    memcpy(out->name, c + ZIP_CENTRAL_SIZE, name_len);
    out->name[name_len] = '\0';
    out->method = rd16(c + 10);
    *pos += ZIP_CENTRAL_SIZE + name_len + extra_len + comment_len;
    if (local > z->size || z->size - local < ZIP_LOCAL_SIZE || rd32(d + local) != ZIP_LOCAL_SIG)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: record %s: local header missing or out of range — the file is "
                       "truncated or corrupt",
                       z->origin, out->name);
    uint64_t data = local + ZIP_LOCAL_SIZE + rd16(d + local + 26) + rd16(d + local + 28);
    if (data > z->size || stored > z->size - data)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: record %s runs past the end of the file (%llu bytes at offset %llu, "
                       "file has %zu) — the file is truncated",
                       z->origin, out->name, (unsigned long long)stored, (unsigned long long)data,
                       z->size);
    if (out->method == 0 && stored != size)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: stored record %s has inconsistent sizes",
                       z->origin, out->name);
    out->size = (size_t)size;
    out->stored_size = (size_t)stored;
    out->data_offset = (size_t)data;
    return GEPARD_OK;
}

int gp_zip_open_memory(const void *data, size_t size, const char *origin, gp_zip **out,
                       gp_error *err) {
    *out = NULL;
    gp_zip *z = calloc(1, sizeof *z);
    if (!z) return gp_fail_oom(err, "zip index", sizeof *z);
    z->origin = strdup(origin ? origin : "(zip)");
    z->data = data;
    z->size = size;
    zip_directory dir = {0, 0, 0};
    int rc = z->origin ? zip_read_directory(z, &dir, err) : gp_fail_oom(err, "zip", 64);
    if (rc == GEPARD_OK) {
        z->entries = calloc(dir.count ? (size_t)dir.count : 1, sizeof *z->entries);
        if (!z->entries) rc = gp_fail_oom(err, "zip index", (size_t)dir.count);
    }
    size_t pos = (size_t)dir.cd_offset, end = (size_t)(dir.cd_offset + dir.cd_size);
    for (uint64_t i = 0; rc == GEPARD_OK && i < dir.count; i++) {
        rc = zip_read_entry(z, &pos, end, &z->entries[z->count], err);
        z->count++;
    }
    if (rc) {
        gp_zip_free(z);
        return rc;
    }
    *out = z;
    return GEPARD_OK;
}

void gp_zip_free(gp_zip *z) {
    if (!z) return;
    for (size_t i = 0; i < z->count; i++) free(z->entries[i].name);
    free(z->entries);
    free(z->origin);
    free(z);
}

const gp_zip_entry *gp_zip_find(const gp_zip *z, const char *name) {
    for (size_t i = 0; i < z->count; i++)
        if (strcmp(z->entries[i].name, name) == 0) return &z->entries[i];
    return NULL;
}

int gp_zip_entry_data(const gp_zip *z, const gp_zip_entry *e, const unsigned char **out,
                      gp_error *err) {
    *out = NULL;
    if (e->method != 0)
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                       "%s: record %s is compressed (zip method %u); only stored records are "
                       "supported — re-save the checkpoint with torch.save instead of "
                       "re-zipping it",
                       z->origin, e->name, e->method);
    *out = z->data + e->data_offset;
    return GEPARD_OK;
}
