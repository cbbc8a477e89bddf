/* nemo.c — tar members through libarchive, and the .nemo layout (see nemo.h). */
#include "io/nemo.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io/file.h"

/* Configs and checkpoints larger than this are not codec files. */
#define NEMO_MAX_MEMBER ((size_t)16 << 30)
#define TAR_FIRST_ALLOC ((size_t)64 << 20)

static const char *tar_basename(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int tar_read_entry(struct archive *a, struct archive_entry *e, const char *path,
                          const char *name, size_t max_bytes, gp_tar_member *m, gp_error *err) {
    size_t cap = 1 << 16;
    if (archive_entry_size_is_set(e) && archive_entry_size(e) >= 0) {
        int64_t declared = archive_entry_size(e);
        if (max_bytes && (uint64_t)declared > max_bytes)
            return gp_fail(err, GEPARD_ERR_FORMAT,
                           "%s: member %s is %lld bytes, more than the %zu-byte limit", path, name,
                           (long long)declared, max_bytes);
        /* The header's size is a hint, not a promise: a small corrupt archive
         * may claim gigabytes. Reserve at most TAR_FIRST_ALLOC up front and
         * grow with the data that actually arrives. */
        cap = (uint64_t)declared < TAR_FIRST_ALLOC ? (size_t)declared + 1 : TAR_FIRST_ALLOC;
    }
    unsigned char *buf = malloc(cap);
    if (!buf) return gp_fail_oom(err, name, cap);
    size_t used = 0;
    for (;;) {
        if (used + 1 >= cap) {
            if (max_bytes && used >= max_bytes) {
                free(buf);
                return gp_fail(err, GEPARD_ERR_FORMAT,
                               "%s: member %s is larger than the %zu-byte limit", path, name,
                               max_bytes);
            }
            size_t ncap = cap * 2;
            unsigned char *p = realloc(buf, ncap);
            if (!p) {
                free(buf);
                return gp_fail_oom(err, name, ncap);
            }
            buf = p;
            cap = ncap;
        }
        la_ssize_t n = archive_read_data(a, buf + used, cap - 1 - used);
        if (n < 0) {
            gp_fail(err, GEPARD_ERR_FORMAT,
                    "%s: cannot read %s from the archive: %s — the file is truncated or corrupt; "
                    "download it again",
                    path, name, archive_error_string(a) ? archive_error_string(a) : "read error");
            free(buf);
            return GEPARD_ERR_FORMAT;
        }
        if (n == 0) break;
        used += (size_t)n;
    }
    buf[used] = '\0';
    m->data = buf;
    m->size = used;
    return GEPARD_OK;
}

int gp_tar_read_members(const char *path, gp_tar_member *members, int count, size_t max_bytes,
                        gp_error *err) {
    for (int i = 0; i < count; i++) {
        members[i].data = NULL;
        members[i].size = 0;
    }
    if (!gp_path_exists(path))
        return gp_fail(err, GEPARD_ERR_NOT_FOUND, "%s: cannot open: %s", path, strerror(ENOENT));
    if (gp_path_is_dir(path))
        return gp_fail(err, GEPARD_ERR_IO, "%s: is a directory, expected an archive", path);
    struct archive *a = archive_read_new();
    if (!a) return gp_fail_oom(err, "archive reader", 0);
    archive_read_support_filter_all(a);
    archive_read_support_format_tar(a);
    int rc = GEPARD_OK, remaining = count;
    if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
        rc = gp_fail(err, GEPARD_ERR_FORMAT,
                     "%s: not a tar archive (.nemo files are tar, optionally gzip-compressed): %s",
                     path, archive_error_string(a) ? archive_error_string(a) : "unknown error");
    }
    bool any_entry = false;
    while (rc == GEPARD_OK && remaining > 0) {
        struct archive_entry *e;
        int r = archive_read_next_header(a, &e);
        if (r == ARCHIVE_EOF) break;
        if (r < ARCHIVE_WARN) {
            const char *why = archive_error_string(a) ? archive_error_string(a) : "read error";
            rc = any_entry ? gp_fail(err, GEPARD_ERR_FORMAT,
                                     "%s: the archive is truncated or corrupt (%s); download it "
                                     "again",
                                     path, why)
                           : gp_fail(err, GEPARD_ERR_FORMAT,
                                     "%s: not a tar archive (.nemo files are tar, optionally "
                                     "gzip-compressed): %s",
                                     path, why);
            break;
        }
        any_entry = true;
        const char *name = archive_entry_pathname(e);
        if (!name || archive_entry_filetype(e) != AE_IFREG) continue;
        const char *base = tar_basename(name);
        for (int i = 0; i < count; i++) {
            if (members[i].data || strcmp(base, members[i].basename) != 0) continue;
            rc = tar_read_entry(a, e, path, members[i].basename, max_bytes, &members[i], err);
            remaining--;
            break;
        }
    }
    archive_read_free(a);
    if (rc) {
        for (int i = 0; i < count; i++) {
            free(members[i].data);
            members[i].data = NULL;
        }
    }
    return rc;
}

int gp_nemo_read(const char *path, gp_nemo *out, gp_error *err) {
    memset(out, 0, sizeof *out);
    gp_tar_member m[2] = {{.basename = "model_config.yaml"}, {.basename = "model_weights.ckpt"}};
    int rc = gp_tar_read_members(path, m, 2, NEMO_MAX_MEMBER, err);
    if (rc) return rc;
    out->config = (char *)m[0].data;
    out->config_size = m[0].size;
    out->weights = m[1].data;
    out->weights_size = m[1].size;
    for (int i = 0; i < 2; i++) {
        if (m[i].data) continue;
        gp_nemo_free(out);
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: the archive has no %s member — is this a NeMo .nemo file?", path,
                       m[i].basename);
    }
    return GEPARD_OK;
}

void gp_nemo_free(gp_nemo *nemo) {
    free(nemo->config);
    free(nemo->weights);
    memset(nemo, 0, sizeof *nemo);
}
