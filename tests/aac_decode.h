/* aac_decode.h — the tests' AAC reader: an ADTS byte stream decoded with
 * libavcodec's own parser and AAC decoder (an independent check of what
 * io/aac_encoder.c writes). */
#ifndef GEPARD_TEST_AAC_DECODE_H
#define GEPARD_TEST_AAC_DECODE_H

#include <stddef.h>

typedef struct test_aac_info {
    int rate, channels, profile; /* from the decoder; profile: FF_PROFILE_AAC_* */
    int frames;                  /* ADTS frames found */
    int bad_frames;              /* frames the decoder refused */
} test_aac_info;

/* Decode `len` bytes of ADTS; returns the mono (first channel) samples
 * (malloc'ed, *n of them) or NULL when nothing decoded. */
float *test_aac_decode(const void *data, size_t len, size_t *n, test_aac_info *info);

#endif
