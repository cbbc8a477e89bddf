/* zip.h — a read-only view of an in-memory zip archive, as torch.save writes it.
 *
 * PyTorch checkpoints are zip files whose records are STORED (uncompressed)
 * and whose local headers carry zero sizes (the sizes follow the data in a
 * data descriptor), so this reader takes every size and offset from the
 * central directory: end-of-central-directory record (searched backwards
 * over the trailing comment), the ZIP64 end records and the ZIP64 extra field
 * (id 0x0001) when a value overflows 32 bits, and, per record, the data start
 * after the LOCAL header's own name and extra lengths. Everything is bounded
 * against the buffer size; record data is handed out as pointers into the
 * caller's buffer (zero-copy). Compressed records are listed but refused when
 * their data is requested.
 */
#ifndef GP_IO_ZIP_H
#define GP_IO_ZIP_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct gp_zip_entry {
    char *name;
    uint16_t method; /* 0 = stored */
    size_t size;     /* uncompressed size */
    size_t stored_size;
    size_t data_offset; /* of the record's bytes in the archive */
} gp_zip_entry;

typedef struct gp_zip {
    char *origin;
    const unsigned char *data; /* the caller's buffer */
    size_t size;
    gp_zip_entry *entries;
    size_t count;
} gp_zip;

/* True when the buffer starts like a zip archive ("PK\3\4" or an empty archive). */
int gp_zip_looks_like(const void *data, size_t size);
/* Index the archive; `data` must outlive the result. `origin` names it in messages. */
int gp_zip_open_memory(const void *data, size_t size, const char *origin, gp_zip **out,
                       gp_error *err);
void gp_zip_free(gp_zip *zip);
const gp_zip_entry *gp_zip_find(const gp_zip *zip, const char *name);
/* A pointer to the record's bytes (entry->size of them); fails for compressed records. */
int gp_zip_entry_data(const gp_zip *zip, const gp_zip_entry *entry, const unsigned char **out,
                      gp_error *err);

#endif
