/* nemo.h — reading members of tar archives, and NVIDIA NeMo `.nemo` files.
 *
 * A .nemo file is a tar archive (plain since NeMo 1.7, gzip-compressed before)
 * holding ./model_config.yaml and ./model_weights.ckpt (a torch.save zip, see
 * io/torch.h) plus optional artifacts, in no guaranteed order. libarchive
 * reads it with every compression filter enabled; members are matched by
 * their base name, so "./x", "x" and "dir/x" all match "x", and extra members
 * are skipped.
 */
#ifndef GP_IO_NEMO_H
#define GP_IO_NEMO_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

typedef struct gp_tar_member {
    const char *basename; /* in: the name to look for */
    unsigned char *data;  /* out: malloc'd contents (NUL-terminated), NULL if absent */
    size_t size;
} gp_tar_member;

/* Read the first member matching each basename; members not found keep data = NULL.
 * `max_bytes` bounds one member (0 = no limit). Free each data with free(). */
int gp_tar_read_members(const char *path, gp_tar_member *members, int count, size_t max_bytes,
                        gp_error *err);

typedef struct gp_nemo {
    char *config; /* model_config.yaml text */
    size_t config_size;
    unsigned char *weights; /* model_weights.ckpt bytes */
    size_t weights_size;
} gp_nemo;

/* Read both members of a .nemo archive; a missing one is an error naming it. */
int gp_nemo_read(const char *path, gp_nemo *out, gp_error *err);
void gp_nemo_free(gp_nemo *nemo);

#endif
