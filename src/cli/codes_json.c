/* codes_json.c — reading and writing the codes JSON format (see
 * codes_json.h), with messages naming the frame and channel at fault. */
#include "cli/codes_json.h"

#include <stdlib.h>

#include "io/json.h"

#define CODES_FILE_MAX (512u << 20)

int gp_codes_json_read(const char *path, int channels, const int *vocab, int32_t **codes,
                       size_t *n_frames, int *n_channels, gp_error *err) {
    *codes = NULL;
    *n_frames = 0;
    cJSON *root;
    int rc = gp_json_load_file(path, CODES_FILE_MAX, &root, err);
    if (rc) return rc;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "codes");
    if (!cJSON_IsArray(arr)) {
        cJSON_Delete(root);
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: expected {\"frames\": T, \"codes\": [[...], ...]} with a \"codes\" "
                       "array of frames",
                       path);
    }
    size_t T = (size_t)cJSON_GetArraySize(arr);
    const cJSON *frames = cJSON_GetObjectItemCaseSensitive(root, "frames");
    if (frames && (!gp_json_is_integer(frames) || frames->valuedouble != (double)T)) {
        double said = frames->valuedouble; /* read before the tree is freed */
        cJSON_Delete(root);
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: \"frames\" says %g but \"codes\" holds %zu frames", path, said, T);
    }
    int width = channels;
    if (T > 0 && width <= 0) width = cJSON_GetArraySize(cJSON_GetArrayItem(arr, 0));
    if (T > 0 && (width <= 0 || width > 4096)) {
        cJSON_Delete(root);
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: frame 0 has %d codes", path, width);
    }
    int32_t *out = malloc((T ? T : 1) * (size_t)(width > 0 ? width : 1) * sizeof(int32_t));
    if (!out) {
        cJSON_Delete(root);
        return gp_fail_oom(err, "codes", T * (size_t)width * 4);
    }
    size_t t = 0;
    const cJSON *frame;
    cJSON_ArrayForEach(frame, arr) {
        if (!cJSON_IsArray(frame) || cJSON_GetArraySize(frame) != width) {
            rc = gp_fail(err, GEPARD_ERR_FORMAT, "%s: frame %zu has %d codes, expected %d", path, t,
                         cJSON_IsArray(frame) ? cJSON_GetArraySize(frame) : 0, width);
            break;
        }
        int c = 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, frame) {
            if (!gp_json_is_integer(v) || v->valuedouble < 0 ||
                (vocab && v->valuedouble >= vocab[c]) || v->valuedouble > INT32_MAX) {
                if (vocab)
                    rc = gp_fail(err, GEPARD_ERR_FORMAT,
                                 "%s: frame %zu, channel %d: %g is not a code in [0, %d)", path, t,
                                 c, v->valuedouble, vocab[c]);
                else
                    rc = gp_fail(err, GEPARD_ERR_FORMAT,
                                 "%s: frame %zu, channel %d: %g is not a non-negative integer",
                                 path, t, c, v->valuedouble);
                break;
            }
            out[t * (size_t)width + (size_t)c] = (int32_t)v->valuedouble;
            c++;
        }
        if (rc) break;
        t++;
    }
    cJSON_Delete(root);
    if (rc) {
        free(out);
        return rc;
    }
    *codes = out;
    *n_frames = T;
    if (n_channels) *n_channels = width;
    return GEPARD_OK;
}

int gp_codes_json_write(gp_buf *out, const int32_t *codes, size_t n_frames, int channels) {
    int rc = gp_buf_printf(out, "{\"frames\":%zu,\"codes\":[", n_frames);
    for (size_t t = 0; t < n_frames && !rc; t++) {
        rc |= gp_buf_append_str(out, t ? ",[" : "[");
        for (int c = 0; c < channels; c++)
            rc |= gp_buf_printf(out, c ? ",%d" : "%d", codes[t * (size_t)channels + (size_t)c]);
        rc |= gp_buf_append_str(out, "]");
    }
    rc |= gp_buf_append_str(out, "]}");
    return rc;
}
