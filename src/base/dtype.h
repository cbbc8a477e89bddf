/* dtype.h — element types shared by the file readers and the kernels, and
 * exact conversions between bf16/f16 and f32.
 *
 * bf16 -> f32 is exact (a 16-bit shift); f32 -> bf16 rounds to nearest even,
 * as PyTorch does. f16 conversions follow IEEE 754 binary16 including
 * subnormals, infinities and NaN.
 */
#ifndef GP_BASE_DTYPE_H
#define GP_BASE_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum gp_dtype {
    GP_DTYPE_INVALID = 0,
    GP_F32,
    GP_F16,
    GP_BF16,
    GP_F64,
    GP_I64,
    GP_I32,
    GP_I16,
    GP_I8,
    GP_U8,
    GP_BOOL,
} gp_dtype;

/* Bytes per element (0 for GP_DTYPE_INVALID). */
size_t gp_dtype_size(gp_dtype dtype);
/* The safetensors spelling ("F32", "BF16", ...). */
const char *gp_dtype_name(gp_dtype dtype);
/* Parse the safetensors spelling; GP_DTYPE_INVALID if unknown. */
gp_dtype gp_dtype_from_name(const char *name);
/* True for F32, F16, BF16, F64. */
int gp_dtype_is_float(gp_dtype dtype);

static inline float gp_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint16_t gp_f32_to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu)) /* NaN: keep quiet NaN */
        return (uint16_t)((bits >> 16) | 0x0040u);
    uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
    return (uint16_t)((bits + rounding) >> 16);
}

float gp_f16_to_f32(uint16_t h);
uint16_t gp_f32_to_f16(float f);

/* Convert `count` elements of a float dtype (F32/F16/BF16/F64) to f32. */
void gp_convert_to_f32(gp_dtype dtype, const void *src, float *dst, size_t count);
/* Read one element of any numeric dtype as a double / int64. */
double gp_dtype_read_double(gp_dtype dtype, const void *src, size_t index);
int64_t gp_dtype_read_int(gp_dtype dtype, const void *src, size_t index);

#endif
