/* dtype.c — element type table and conversions (see dtype.h). */
#include "base/dtype.h"

#include <math.h>

size_t gp_dtype_size(gp_dtype dtype) {
    switch (dtype) {
    case GP_F64:
    case GP_I64: return 8;
    case GP_F32:
    case GP_I32: return 4;
    case GP_F16:
    case GP_BF16:
    case GP_I16: return 2;
    case GP_I8:
    case GP_U8:
    case GP_BOOL: return 1;
    default: return 0;
    }
}

static const struct {
    gp_dtype dtype;
    const char *name;
} dtype_names[] = {
    {GP_F32, "F32"}, {GP_F16, "F16"}, {GP_BF16, "BF16"}, {GP_F64, "F64"}, {GP_I64, "I64"},
    {GP_I32, "I32"}, {GP_I16, "I16"}, {GP_I8, "I8"},     {GP_U8, "U8"},   {GP_BOOL, "BOOL"},
};

const char *gp_dtype_name(gp_dtype dtype) {
    for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
        if (dtype_names[i].dtype == dtype) return dtype_names[i].name;
    return "INVALID";
}

gp_dtype gp_dtype_from_name(const char *name) {
    for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
        if (strcmp(dtype_names[i].name, name) == 0) return dtype_names[i].dtype;
    return GP_DTYPE_INVALID;
}

int gp_dtype_is_float(gp_dtype dtype) {
    return dtype == GP_F32 || dtype == GP_F16 || dtype == GP_BF16 || dtype == GP_F64;
}

float gp_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exponent = (h >> 10) & 0x1Fu;
    uint32_t mantissa = h & 0x3FFu;
    uint32_t bits;
    if (exponent == 0) {
        if (mantissa == 0) {
            bits = sign;
        } else { /* subnormal: value = mantissa * 2^-24 */
            float f = ldexpf((float)mantissa, -24);
            memcpy(&bits, &f, sizeof bits);
            bits |= sign;
        }
    } else if (exponent == 31) {
        bits = sign | 0x7F800000u | (mantissa << 13);
    } else {
        bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t gp_f32_to_f16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t abs_bits = bits & 0x7FFFFFFFu;
    if (abs_bits >= 0x7F800000u) /* inf or NaN */
        return sign | 0x7C00u | (abs_bits > 0x7F800000u ? 0x200u : 0);
    if (abs_bits >= 0x477FF000u) return sign | 0x7C00u; /* rounds to >= 65520: inf */
    if (abs_bits < 0x38800000u) {                       /* below the smallest normal */
        float a;
        memcpy(&a, &abs_bits, sizeof a);
        float scaled = a * 16777216.0f; /* 2^24: units of the smallest subnormal */
        return sign | (uint16_t)lrintf(scaled);
    }
    uint32_t exponent = (abs_bits >> 23) - 112u;
    uint32_t mantissa = abs_bits & 0x7FFFFFu;
    uint32_t half = (exponent << 10) | (mantissa >> 13);
    uint32_t rest = mantissa & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) half++;
    return sign | (uint16_t)half;
}

void gp_convert_to_f32(gp_dtype dtype, const void *src, float *dst, size_t count) {
    const unsigned char *p = src;
    switch (dtype) {
    case GP_F32: memcpy(dst, src, count * 4); break;
    case GP_BF16:
        for (size_t i = 0; i < count; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = gp_bf16_to_f32(h);
        }
        break;
    case GP_F16:
        for (size_t i = 0; i < count; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = gp_f16_to_f32(h);
        }
        break;
    case GP_F64:
        for (size_t i = 0; i < count; i++) {
            double d;
            memcpy(&d, p + 8 * i, 8);
            dst[i] = (float)d;
        }
        break;
    default:
        for (size_t i = 0; i < count; i++) dst[i] = (float)gp_dtype_read_double(dtype, src, i);
    }
}

double gp_dtype_read_double(gp_dtype dtype, const void *src, size_t index) {
    const unsigned char *p = (const unsigned char *)src + index * gp_dtype_size(dtype);
    switch (dtype) {
    case GP_F32: {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    case GP_F64: {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    case GP_BF16:
    case GP_F16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return dtype == GP_BF16 ? gp_bf16_to_f32(h) : gp_f16_to_f32(h);
    }
    default: return (double)gp_dtype_read_int(dtype, src, index);
    }
}

int64_t gp_dtype_read_int(gp_dtype dtype, const void *src, size_t index) {
    const unsigned char *p = (const unsigned char *)src + index * gp_dtype_size(dtype);
    switch (dtype) {
    case GP_I64: {
        int64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    case GP_I32: {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    case GP_I16: {
        int16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case GP_I8: return (int8_t)p[0];
    case GP_U8:
    case GP_BOOL: return p[0];
    default: return (int64_t)gp_dtype_read_double(dtype, src, index);
    }
}
