/* codes_json.h — the codes file format shared by `gepard codes`, `decode`,
 * `encode` and --ref-codes: {"frames":T,"codes":[[C ints],…]} (frame-major). */
#ifndef GP_CLI_CODES_JSON_H
#define GP_CLI_CODES_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"

/* Read a codes file. `channels` > 0 requires that width; `vocab` (may be
 * NULL) gives each channel's exclusive upper bound. *codes is malloc'ed. */
int gp_codes_json_read(const char *path, int channels, const int *vocab, int32_t **codes,
                       size_t *n_frames, int *n_channels, gp_error *err);

/* Append {"frames":T,"codes":[[...],...]} (no newline). */
int gp_codes_json_write(gp_buf *out, const int32_t *codes, size_t n_frames, int channels);

#endif
