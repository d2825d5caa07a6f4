// Sixteen float lanes, whatever the instruction set: the kernel's sums are defined by them, not by
// the machine. A sum over k keeps 16 running sums, lane i taking the terms k = i (mod 16), each term
// added by one fused multiply-add (a b + c, rounded once); `vf_sum` then adds the lanes by one
// fixed tree. AVX-512 holds the 16 lanes in one register, AVX2 in two, NEON in four, the portable
// build in an array: the same operations on the same values in the same order, so the same bits on
// every CPU. The kernel is built with -ffp-contract=off: no multiply and add is fused unless the
// source says so (`vf_fma`, `fmaf`), so a build without FMA instructions fuses exactly where the
// others do (the portable build's `fmaf` is the C library's, exact, slower).
#include <math.h>
#include <stddef.h>
#include <stdint.h>
typedef float v16 __attribute__((vector_size(64)));    // 16 lanes as a value, for elementwise steps
typedef uint32_t v16u __attribute__((vector_size(64)));
#if defined(__AVX512F__)
#include <immintrin.h>
#define VF_ISA "avx512"
typedef __m512 vf;
static inline vf vf_zero(void) { return _mm512_setzero_ps(); }
static inline vf vf_set1(float a) { return _mm512_set1_ps(a); }
static inline vf vf_load(const float* p) { return _mm512_loadu_ps(p); }
static inline void vf_store(float* p, vf a) { _mm512_storeu_ps(p, a); }
static inline vf vf_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
static inline vf vf_i8(const signed char* p) {  // 16 int8 as floats (exact)
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)p)));
}
// 32 4-bit weights (0..15) from 16 bytes as floats: byte j holds weight j (low), j + 16 (high)
static inline void vf_u4(const unsigned char* p, vf* lo, vf* hi) {
    __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)p));
    *lo = _mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(15)));
    *hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(b, 4));
}
static inline vf vf_bf16(const uint16_t* p) {  // 16 bf16 as floats (exact)
    return _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)p)), 16));
}
#if defined(__F16C__) && !defined(KERNEL_SOFT_HALF)
#define VF_F16 1
static inline vf vf_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p));
}
#endif
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define VF_ISA "avx2"
typedef struct { __m256 a, b; } vf;  // lanes 0-7, 8-15
static inline vf vf_zero(void) { vf r = {_mm256_setzero_ps(), _mm256_setzero_ps()}; return r; }
static inline vf vf_set1(float a) { vf r = {_mm256_set1_ps(a), _mm256_set1_ps(a)}; return r; }
static inline vf vf_load(const float* p) {
    vf r = {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; return r;
}
static inline void vf_store(float* p, vf a) { _mm256_storeu_ps(p, a.a); _mm256_storeu_ps(p + 8, a.b); }
static inline vf vf_fma(vf x, vf y, vf z) {
    vf r = {_mm256_fmadd_ps(x.a, y.a, z.a), _mm256_fmadd_ps(x.b, y.b, z.b)}; return r;
}
static inline vf vf_i8(const signed char* p) {
    __m128i c = _mm_loadu_si128((const __m128i*)p);
    vf r = {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c)),
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(c, 8)))};
    return r;
}
static inline void vf_u4(const unsigned char* p, vf* lo, vf* hi) {
    __m128i c = _mm_loadu_si128((const __m128i*)p);
    __m256i b0 = _mm256_cvtepu8_epi32(c), b1 = _mm256_cvtepu8_epi32(_mm_srli_si128(c, 8));
    const __m256i f = _mm256_set1_epi32(15);
    lo->a = _mm256_cvtepi32_ps(_mm256_and_si256(b0, f));
    lo->b = _mm256_cvtepi32_ps(_mm256_and_si256(b1, f));
    hi->a = _mm256_cvtepi32_ps(_mm256_srli_epi32(b0, 4));
    hi->b = _mm256_cvtepi32_ps(_mm256_srli_epi32(b1, 4));
}
static inline vf vf_bf16(const uint16_t* p) {
    vf r = {_mm256_castsi256_ps(_mm256_slli_epi32(
                _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)p)), 16)),
            _mm256_castsi256_ps(_mm256_slli_epi32(
                _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(p + 8))), 16))};
    return r;
}
#if defined(__F16C__) && !defined(KERNEL_SOFT_HALF)
#define VF_F16 1
static inline vf vf_f16(const uint16_t* p) {
    vf r = {_mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p)),
            _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(p + 8)))};
    return r;
}
#endif
#elif defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#define VF_ISA "neon"
typedef struct { float32x4_t a, b, c, d; } vf;  // lanes 0-3, 4-7, 8-11, 12-15
static inline vf vf_zero(void) {
    const float32x4_t z = vdupq_n_f32(0.0f); vf r = {z, z, z, z}; return r;
}
static inline vf vf_set1(float x) {
    const float32x4_t v = vdupq_n_f32(x); vf r = {v, v, v, v}; return r;
}
static inline vf vf_load(const float* p) {
    vf r = {vld1q_f32(p), vld1q_f32(p + 4), vld1q_f32(p + 8), vld1q_f32(p + 12)}; return r;
}
static inline void vf_store(float* p, vf x) {
    vst1q_f32(p, x.a); vst1q_f32(p + 4, x.b); vst1q_f32(p + 8, x.c); vst1q_f32(p + 12, x.d);
}
static inline vf vf_fma(vf x, vf y, vf z) {  // vfmaq_f32(z, x, y) = z + x y, rounded once
    vf r = {vfmaq_f32(z.a, x.a, y.a), vfmaq_f32(z.b, x.b, y.b), vfmaq_f32(z.c, x.c, y.c),
            vfmaq_f32(z.d, x.d, y.d)};
    return r;
}
static inline vf vf_of_i16(int16x8_t l, int16x8_t h) {  // 16 int16 as floats (exact)
    vf r = {vcvtq_f32_s32(vmovl_s16(vget_low_s16(l))), vcvtq_f32_s32(vmovl_high_s16(l)),
            vcvtq_f32_s32(vmovl_s16(vget_low_s16(h))), vcvtq_f32_s32(vmovl_high_s16(h))};
    return r;
}
static inline vf vf_i8(const signed char* p) {
    const int8x16_t c = vld1q_s8((const int8_t*)p);
    return vf_of_i16(vmovl_s8(vget_low_s8(c)), vmovl_high_s8(c));
}
static inline void vf_u4(const unsigned char* p, vf* lo, vf* hi) {
    const uint8x16_t c = vld1q_u8(p);
    const int8x16_t l = vreinterpretq_s8_u8(vandq_u8(c, vdupq_n_u8(15)));
    const int8x16_t h = vreinterpretq_s8_u8(vshrq_n_u8(c, 4));
    *lo = vf_of_i16(vmovl_s8(vget_low_s8(l)), vmovl_high_s8(l));
    *hi = vf_of_i16(vmovl_s8(vget_low_s8(h)), vmovl_high_s8(h));
}
static inline vf vf_bf16(const uint16_t* p) {
    const uint16x8_t l = vld1q_u16(p), h = vld1q_u16(p + 8);
    vf r = {vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(l), 16)),
            vreinterpretq_f32_u32(vshll_high_n_u16(l, 16)),
            vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)),
            vreinterpretq_f32_u32(vshll_high_n_u16(h, 16))};
    return r;
}
#if !defined(KERNEL_SOFT_HALF)
#define VF_F16 1
static inline vf vf_f16(const uint16_t* p) {  // fp16 widened by the instruction (exact)
    const float16x8_t l = vreinterpretq_f16_u16(vld1q_u16(p));
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(p + 8));
    vf r = {vcvt_f32_f16(vget_low_f16(l)), vcvt_high_f32_f16(l), vcvt_f32_f16(vget_low_f16(h)),
            vcvt_high_f32_f16(h)};
    return r;
}
#endif
#else
// portable C: the same lanes in an array, each fused multiply-add by the C library's fmaf
#define VF_ISA "portable"
typedef struct { float v[16]; } vf;
static inline vf vf_zero(void) { vf r; for (int i = 0; i < 16; i++) r.v[i] = 0.0f; return r; }
static inline vf vf_set1(float a) { vf r; for (int i = 0; i < 16; i++) r.v[i] = a; return r; }
static inline vf vf_load(const float* p) { vf r; __builtin_memcpy(r.v, p, 64); return r; }
static inline void vf_store(float* p, vf a) { __builtin_memcpy(p, a.v, 64); }
static inline vf vf_fma(vf a, vf b, vf c) {
    vf r; for (int i = 0; i < 16; i++) r.v[i] = fmaf(a.v[i], b.v[i], c.v[i]); return r;
}
static inline vf vf_i8(const signed char* p) {
    vf r; for (int i = 0; i < 16; i++) r.v[i] = (float)p[i]; return r;
}
static inline void vf_u4(const unsigned char* p, vf* lo, vf* hi) {
    for (int i = 0; i < 16; i++) lo->v[i] = (float)(p[i] & 15), hi->v[i] = (float)(p[i] >> 4);
}
static inline vf vf_bf16(const uint16_t* p) {
    vf r;
    for (int i = 0; i < 16; i++) { uint32_t u = (uint32_t)p[i] << 16; __builtin_memcpy(&r.v[i], &u, 4); }
    return r;
}
#endif
// the lanes' sum by one tree: lanes i and i + 8, then i and i + 4, i and i + 2, then the two left
static inline float vf_sum(vf a) {
    float t[16], s8[8], s4[4], s2[2];
    vf_store(t, a);
    for (int i = 0; i < 8; i++) s8[i] = t[i] + t[i + 8];
    for (int i = 0; i < 4; i++) s4[i] = s8[i] + s8[i + 4];
    for (int i = 0; i < 2; i++) s2[i] = s4[i] + s4[i + 2];
    return s2[0] + s2[1];
}
static inline vf vf_of(v16 a) { vf r; __builtin_memcpy(&r, &a, 64); return r; }
static inline v16 v16_of(vf a) { v16 r; __builtin_memcpy(&r, &a, 64); return r; }
// which lanes the build holds in registers: "avx512", "avx2", "neon" or "portable"
const char* kernel_isa(void) { return VF_ISA; }
