/* torch_writer.c — writers for test inputs: zip, pickle, torch checkpoint, tar (see
 * torch_writer.h). */
#include "torch_writer.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put16(gp_buf *b, unsigned v) {
    unsigned char p[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    gp_buf_append(b, p, 2);
}
static void put32(gp_buf *b, uint32_t v) {
    unsigned char p[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    gp_buf_append(b, p, 4);
}

void tw_zip(const tw_record *r, int n, gp_buf *out) {
    size_t *offsets = malloc((size_t)(n ? n : 1) * sizeof *offsets);
    for (int i = 0; i < n; i++) {
        offsets[i] = out->len;
        put32(out, 0x04034b50);
        put16(out, 20);
        put16(out, 0x0808); /* sizes in a data descriptor, as torch.save writes */
        put16(out, 0);      /* stored */
        put16(out, 0);
        put16(out, 0);
        put32(out, 0); /* crc, sizes: zero in the local header */
        put32(out, 0);
        put32(out, 0);
        put16(out, (unsigned)strlen(r[i].name));
        put16(out, 4); /* a small extra field, as padding */
        gp_buf_append_str(out, r[i].name);
        put16(out, 0x4246);
        put16(out, 0);
        gp_buf_append(out, r[i].data, r[i].size);
        put32(out, 0x08074b50); /* data descriptor */
        put32(out, 0);
        put32(out, (uint32_t)r[i].size);
        put32(out, (uint32_t)r[i].size);
    }
    size_t cd = out->len;
    for (int i = 0; i < n; i++) {
        put32(out, 0x02014b50);
        put16(out, 20);
        put16(out, 20);
        put16(out, 0x0808);
        put16(out, 0);
        put16(out, 0);
        put16(out, 0);
        put32(out, 0);
        put32(out, (uint32_t)r[i].size);
        put32(out, (uint32_t)r[i].size);
        put16(out, (unsigned)strlen(r[i].name));
        put16(out, 0);
        put16(out, 0);
        put16(out, 0);
        put16(out, 0);
        put32(out, 0);
        put32(out, (uint32_t)offsets[i]);
        gp_buf_append_str(out, r[i].name);
    }
    size_t cd_size = out->len - cd;
    put32(out, 0x06054b50);
    put16(out, 0);
    put16(out, 0);
    put16(out, (unsigned)n);
    put16(out, (unsigned)n);
    put32(out, (uint32_t)cd_size);
    put32(out, (uint32_t)cd);
    put16(out, 0);
    free(offsets);
}

static void pk_str(gp_buf *b, const char *s) {
    gp_buf_append(b, "X", 1);
    put32(b, (uint32_t)strlen(s));
    gp_buf_append_str(b, s);
}
static void pk_int(gp_buf *b, int64_t v) {
    gp_buf_append(b, "J", 1);
    put32(b, (uint32_t)(int32_t)v);
}

void tw_pickle_state_dict(const tw_tensor *t, int n, gp_buf *out) {
    gp_buf_append(out, "\x80\x02}(", 4);
    for (int i = 0; i < n; i++) {
        pk_str(out, t[i].name);
        gp_buf_append_str(out, "ctorch._utils\n_rebuild_tensor_v2\n((");
        pk_str(out, "storage");
        gp_buf_printf(out, "ctorch\n%s\n", t[i].storage_type);
        pk_str(out, t[i].key);
        pk_str(out, "cpu");
        pk_int(out, t[i].storage_numel);
        gp_buf_append_str(out, "tQ");
        pk_int(out, t[i].offset);
        gp_buf_append(out, "(", 1);
        for (int d = 0; d < t[i].ndim; d++) pk_int(out, t[i].shape[d]);
        gp_buf_append(out, "t(", 2);
        for (int d = 0; d < t[i].ndim; d++) pk_int(out, t[i].stride[d]);
        gp_buf_append_str(out, "t\x89"
                               "ccollections\nOrderedDict\n)RtR");
    }
    gp_buf_append(out, "u.", 2);
}

void tw_checkpoint(const gp_buf *pickle, const tw_record *storages, int n, gp_buf *out) {
    tw_record recs[260];
    char names[256][64];
    int k = 0;
    recs[k++] = (tw_record){"archive/data.pkl", pickle->data, pickle->len};
    recs[k++] = (tw_record){"archive/byteorder", "little", 6};
    for (int i = 0; i < n && k < 258; i++) {
        snprintf(names[i], sizeof names[i], "archive/data/%s", storages[i].name);
        recs[k++] = (tw_record){names[i], storages[i].data, storages[i].size};
    }
    recs[k++] = (tw_record){"archive/version", "3\n", 2};
    tw_zip(recs, k, out);
}

int tw_tar(const char *path, const tw_record *m, int n, int gzip) {
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    if (gzip) archive_write_add_filter_gzip(a);
    if (archive_write_open_filename(a, path) != ARCHIVE_OK) {
        archive_write_free(a);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, m[i].name);
        archive_entry_set_size(e, (la_int64_t)m[i].size);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        if (archive_write_header(a, e) != ARCHIVE_OK ||
            archive_write_data(a, m[i].data, m[i].size) != (la_ssize_t)m[i].size)
            rc = -1;
        archive_entry_free(e);
    }
    if (archive_write_close(a) != ARCHIVE_OK) rc = -1;
    archive_write_free(a);
    return rc;
}
