/* half.h -- the 16-bit float formats as bit patterns: IEEE float16 and bfloat16 to and from
 * float32, rounding to nearest even, NaN kept NaN. Portable bit arithmetic, so every compiler
 * and target gives the same bits. */
#ifndef WPK_BASE_HALF_H
#define WPK_BASE_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t half_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float half_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float half_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return half_bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24, exact in float32 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return half_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t half_f32_to_f16(float f) {
    uint32_t u = half_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds past 65504: inf */
    if (abs < 0x38800000u) {
        /* below the smallest normal: a subnormal (or zero) in units of 2^-24 */
        if (abs < 0x33000000u) return sign; /* under half the smallest subnormal */
        uint32_t man = (abs & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(abs >> 23); /* 14..24 */
        uint32_t q = man >> shift, rem = man & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t q = abs - 0x38000000u; /* rebias the exponent from 127 to 15 */
    uint32_t rem = q & 0x1fffu;
    q >>= 13;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

static inline float half_bf16_to_f32(uint16_t b) { return half_bits_f32((uint32_t)b << 16); }

static inline uint16_t half_f32_to_bf16(float f) {
    uint32_t u = half_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

#endif
