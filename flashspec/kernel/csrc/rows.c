// y (M, N) = x (M, K) @ w (N, K)^T in fp32: each weight row read once for a block of input rows (up
// to 7 in one block, from 8 rows on blocks of 4), each output summed in one fixed order whatever M
// is (16 lanes over k, a fixed tree over the lanes, a scalar tail). rows_mm_q8: the same over int8
// weights, rows_mm_q4 over 4-bit ones. A few outputs are computed side by side (NB): their weights
// and the inputs are loaded once for all of them, and their sums run as independent chains; each
// output's own order is unchanged.
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
// 16-bit float formats, as a product's or a layer's `bits` (see below), and 4-bit weights whose
// grid values q * s + o are rounded to one of them (Q4_BF16, Q4_F16: a 16-bit layer's products
// over exact copies of its weights, which that rounding gives back bit for bit)
#define BF16 16
#define F16 17
#define Q4_BF16 20
#define Q4_F16 21
// 16 finite floats (a group's grid values: `half_grids` keeps finite grids only) rounded to bf16,
// to nearest, ties to even, and widened back, by their bits
static inline v16 round_bf16_finite(v16 v) {
    v16u u; __builtin_memcpy(&u, &v, 64);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    __builtin_memcpy(&v, &u, 64); return v;
}
// the same for any 16 floats: a NaN to PyTorch's 0x7fc0, as f_half rounds below
static inline v16 round_bf16_v(v16 v) {
    v16u u, r; __builtin_memcpy(&u, &v, 64);
    const v16u nan = (v16u)((u & 0x7fffffffu) > 0x7f800000u);  // all ones where NaN
    v = round_bf16_finite(v); __builtin_memcpy(&r, &v, 64);
    r = (r & ~nan) | (0x7fc00000u & nan);
    __builtin_memcpy(&v, &r, 64); return v;
}
static inline v16 round_f16_v(v16 v);  // (below: with the format's conversions)
static inline v16 round_v(v16 v, int fmt) {  // fmt 0: as it is
    return fmt == BF16 ? round_bf16_v(v) : fmt == F16 ? round_f16_v(v) : v;
}
// outputs side by side for mb rows (int8 and 4-bit weights NB, fp32 and 16-bit NBF): mb * NB
// accumulators of 16 lanes within the vector registers (32 of 16 lanes with AVX-512; 16 of 8 with
// AVX2, two an accumulator; 32 of 4 with NEON, four), one by one where they would not fit. Side by
// side or not, each output's sum is the same.
#if defined(KERNEL_PLAIN_LOOPS)  // for comparison: one output at a time (the loops before 12-05's)
#define NB(mb) 1
#define NBF(mb) 1
#elif defined(__AVX512F__)
// fp32 at 7-8 rows one by one (measured no faster there)
#define NB(mb) ((mb) <= 4 ? 4 : 2)
#define NBF(mb) ((mb) <= 4 ? 4 : (mb) <= 6 ? 2 : 1)
#elif defined(__AVX2__) || defined(__aarch64__)
#define NB(mb) ((mb) == 1 ? 4 : (mb) == 2 ? 2 : 1)
#define NBF(mb) NB(mb)
#else
#define NB(mb) 1
#define NBF(mb) 1
#endif
#if defined(__AVX512F__) && !defined(KERNEL_PLAIN_LOOPS)
// 4-bit weights (0..15) of a group with scale s and offset o: its 16 values j * s + o (the same
// fused multiply-add as int8's q * s + o; rounded to the format fmt, if any), then 32 weights from
// 16 bytes, byte j holding weight j (low) and j + 16 (high), each picked from the table (vpermps
// reads an index's low 4 bits)
#define Q4_TABLE
typedef __m512 q4grp;
static inline q4grp q4_group(float s, float o, int fmt) {
    const __m512 j = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 t = _mm512_fmadd_ps(j, _mm512_set1_ps(s), _mm512_set1_ps(o));
    if (fmt) {
        v16 v; __builtin_memcpy(&v, &t, 64);
        v = fmt == BF16 ? round_bf16_finite(v) : round_v(v, fmt);
        __builtin_memcpy(&t, &v, 64);
    }
    return t;
}
static inline void q4_widen(const unsigned char* p, q4grp t, vf* lo, vf* hi, int fmt) {
    (void)fmt;  // (the table holds rounded values)
    __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)p));
    *lo = _mm512_permutexvar_ps(b, t); *hi = _mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), t);
}
#else  // each weight widened, then q * s + o in one fused multiply-add (rounded to the format fmt)
typedef struct { float s, o; } q4grp;  // (broadcast where used: fewer registers held)
static inline q4grp q4_group(float s, float o, int fmt) {
    (void)fmt; q4grp g = {s, o}; return g;
}
static inline void q4_widen(const unsigned char* p, q4grp t, vf* lo, vf* hi, int fmt) {
    vf_u4(p, lo, hi);
    *lo = vf_fma(*lo, vf_set1(t.s), vf_set1(t.o)); *hi = vf_fma(*hi, vf_set1(t.s), vf_set1(t.o));
    if (fmt) { *lo = vf_of(round_v(v16_of(*lo), fmt)); *hi = vf_of(round_v(v16_of(*hi), fmt)); }
}
#endif
// 16-bit float formats (BF16, F16 above), as a product's or a layer's `bits`: bf16 and fp16
// weights (and a layer's activations rounded to the format where a model in that dtype rounds).
// Widened to fp32 exactly: a product over them sums the same bits as one over their fp32 copies.
#include <math.h>
#if defined(__F16C__) && !defined(KERNEL_SOFT_HALF)
#include <immintrin.h>
#endif
// fp16 by hand where F16C is not built in (or -DKERNEL_SOFT_HALF): the same values as the
// instructions (and as PyTorch's conversions), each widened exactly, rounded to nearest even
static inline float soft_f16_f(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
    if (e == 0x1f) u = s | 0x7f800000 | (m << 13);                // inf, NaN
    else if (e) u = s | ((e + 112) << 23) | (m << 13);            // normal: rebias 15 -> 127
    else {                                                        // zero, subnormal: m 2^-24
        float f = (float)m * 0x1p-24f; __builtin_memcpy(&u, &f, 4); u |= s;
    }
    float f; __builtin_memcpy(&f, &u, 4); return f;
}
static inline uint16_t soft_f_f16(float f) {
    uint32_t u; __builtin_memcpy(&u, &f, 4);
    const uint32_t s = (u >> 16) & 0x8000, a = u & 0x7fffffff;
    if (a > 0x7f800000) return (uint16_t)(s | 0x7e00);           // NaN
    if (a >= 0x477ff000) return (uint16_t)(s | 0x7c00);          // 65520 and up: inf
    if (a < 0x38800000) {  // below 2^-14: a subnormal's count of 2^-24, to nearest even
        float v; __builtin_memcpy(&v, &a, 4);
        return (uint16_t)(s | (uint32_t)nearbyintf(v * 0x1p24f));
    }
    const uint32_t r = a + 0xfff + ((a >> 13) & 1);               // 23 -> 10 mantissa bits
    return (uint16_t)(s | ((r - 0x38000000) >> 13));              // rebias 127 -> 15
}
#if defined(__F16C__) && !defined(KERNEL_SOFT_HALF)
#define F16_HW 1
#else
#define F16_HW 0
#endif
static inline float half_f(uint16_t h, int fmt) {  // exact
    if (fmt == BF16) {
        uint32_t u = (uint32_t)h << 16; float f; __builtin_memcpy(&f, &u, 4); return f;
    }
#if F16_HW
    return _cvtsh_ss(h);
#else
    return soft_f16_f(h);
#endif
}
static inline uint16_t f_half(float f, int fmt) {  // to nearest, ties to even (as PyTorch rounds)
    if (fmt == BF16) {
        uint32_t u; __builtin_memcpy(&u, &f, 4);
        if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN (PyTorch's)
        return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
    }
#if F16_HW
    return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#else
    return soft_f_f16(f);
#endif
}
static inline float round_to(float f, int fmt) { return fmt ? half_f(f_half(f, fmt), fmt) : f; }
static inline v16 round_f16_v(v16 v) {  // 16 floats rounded to fp16 and widened back
#if F16_HW && defined(__AVX512F__)
    __m512 a; __builtin_memcpy(&a, &v, 64);
    a = _mm512_cvtph_ps(_mm512_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __builtin_memcpy(&v, &a, 64); return v;
#else
    for (int i = 0; i < 16; i++) v[i] = round_to(v[i], F16);
    return v;
#endif
}
// y[i] rounded to the format, in place (fmt 0: fp32, nothing to do)
static void round_rows(float* y, size_t n, int fmt) {
    if (fmt == BF16) for (size_t i = 0; i < n; i++) y[i] = half_f(f_half(y[i], BF16), BF16);
    else if (fmt == F16) for (size_t i = 0; i < n; i++) y[i] = half_f(f_half(y[i], F16), F16);
}
// y = x rounded to the format (BF16, F16) and widened back: the kernel's own rounding, for tests
void half_round(const float* x, float* y, long long n, int fmt) {
    for (long long i = 0; i < n; i++) y[i] = round_to(x[i], fmt);
}
// 16 values of the format as floats (exact)
static inline vf vf_h(const uint16_t* p, int fmt) {
    if (fmt == BF16) return vf_bf16(p);
#if defined(VF_F16)
    return vf_f16(p);
#else
    float v[16];
    for (int i = 0; i < 16; i++) v[i] = half_f(p[i], fmt);
    return vf_load(v);
#endif
}
// a product's weight: fp32 rows w (N, K), or int8 q (N, K) / packed 4-bit q (N, K / 2) with a
// scale s and offset o (N, K / G) per G inputs (each weight q * s + o)
typedef struct { const float* w; const void* q; const float* s; const float* o; int G; } wts;
// outputs n .. n + nb - 1 for rows 0 .. mb - 1: acc[m][j] sums x[m] * w[n + j] over k in 16
// lanes, in order
#define ACC_INIT vf acc[8][4]; \
    for (int m = 0; m < mb; m++) for (int j = 0; j < nb; j++) acc[m][j] = vf_zero();
#define ACC_ADD(wv, off) for (int m = 0; m < mb; m++) { \
        const vf xv = vf_load(x + (size_t)m * K + k + (off)); \
        for (int j = 0; j < nb; j++) acc[m][j] = vf_fma(wv[j], xv, acc[m][j]); }
// int8 and 4-bit weights for up to 4 rows: each weight row's cache lines asked for AHEAD rows
// early (a prefetch never faults, even past the last row; measured: the results journal, *Kernel*)
#if !defined(AHEAD)  // -DAHEAD=0: none
#define AHEAD 8
#endif
// ... with the hint that keeps the lines in every cache level (3, prefetcht0): the same weights are
// read again at the next forward, and lines asked for as used once (0, prefetchnta) leave the outer
// caches, so every forward read them from memory again (measured: the results journal, *Kernel*,
// *Prefetches that keep the weights*; -DPF_KEEP=0 builds the hint used before)
#if !defined(PF_KEEP)
#define PF_KEEP 3
#endif
static inline __attribute__((always_inline)) void fblock(
        const float* x, wts W, float* y, const int mb, const int nb, int n, int N, int K) {
    ACC_INIT
    int k = 0;
    for (; k + 16 <= K; k += 16) {
        vf wv[4];
        for (int j = 0; j < nb; j++) {
            const float* wr = W.w + (size_t)(n + j) * K;
            // 8 rows are arithmetic enough to leave memory idle: ask for a later weight row early
            // (measured: 1.3x at 8 rows, none or worse at 1-7; a prefetch never faults)
            if (mb == 8) __builtin_prefetch(wr + (size_t)8 * K + k, 0, 0);
            wv[j] = vf_load(wr + k);
        }
        ACC_ADD(wv, 0)
    }
    for (int m = 0; m < mb; m++) for (int j = 0; j < nb; j++) {
        const float* wr = W.w + (size_t)(n + j) * K;
        float s = vf_sum(acc[m][j]);
        for (int i = k; i < K; i++) s = fmaf(wr[i], x[(size_t)m * K + i], s);
        y[(size_t)m * N + n + j] = s;
    }
}
static inline __attribute__((always_inline)) void q8block(
        const float* x, wts W, float* y, const int mb, const int nb, int n, int N, int K) {
    const int G = W.G, KG = K / G;
    ACC_INIT
    for (int g = 0; g < KG; g++) {
        float sg[4], og[4];
        for (int j = 0; j < nb; j++)
            sg[j] = W.s[(size_t)(n + j) * KG + g], og[j] = W.o[(size_t)(n + j) * KG + g];
        for (int k = g * G; k < (g + 1) * G; k += 16) {
            vf wv[4];
            for (int j = 0; j < nb; j++) {
                const signed char* qr = (const signed char*)W.q + (size_t)(n + j) * K + k;
                if (AHEAD && mb <= 4 && !(k & 63)) __builtin_prefetch(qr + AHEAD * K, 0, PF_KEEP);
                wv[j] = vf_fma(vf_i8(qr), vf_set1(sg[j]), vf_set1(og[j]));
            }
            ACC_ADD(wv, 0)
        }
    }
    for (int m = 0; m < mb; m++) for (int j = 0; j < nb; j++)
        y[(size_t)m * N + n + j] = vf_sum(acc[m][j]);
}
static inline __attribute__((always_inline)) void q4block_f(
        const float* x, wts W, float* y, const int mb, const int nb, int n, int N, int K,
        const int fmt) {
    const int G = W.G, KG = K / G;
    ACC_INIT
    for (int g = 0; g < KG; g++) {
        q4grp t[4];
        for (int j = 0; j < nb; j++)
            t[j] = q4_group(W.s[(size_t)(n + j) * KG + g], W.o[(size_t)(n + j) * KG + g], fmt);
        for (int k = g * G; k < (g + 1) * G; k += 32) {
            vf lo[4], hi[4];
            for (int j = 0; j < nb; j++) {
                const unsigned char* qr =
                    (const unsigned char*)W.q + (size_t)(n + j) * (K / 2) + k / 2;
                if (AHEAD && mb <= 4 && !(k & 127))
                    __builtin_prefetch(qr + AHEAD * (K / 2), 0, PF_KEEP);
                q4_widen(qr, t[j], &lo[j], &hi[j], fmt);
            }
            ACC_ADD(lo, 0) ACC_ADD(hi, 16)
        }
    }
    for (int m = 0; m < mb; m++) for (int j = 0; j < nb; j++)
        y[(size_t)m * N + n + j] = vf_sum(acc[m][j]);
}
// fblock over 16-bit weights (W.q, format fmt), each widened exactly: fblock's sums over their
// fp32 copies, bit for bit
static inline __attribute__((always_inline)) void hblock(
        const float* x, wts W, float* y, const int mb, const int nb, int n, int N, int K,
        const int fmt) {
    ACC_INIT
    int k = 0;
    for (; k + 16 <= K; k += 16) {
        vf wv[4];
        for (int j = 0; j < nb; j++) {
            const uint16_t* wr = (const uint16_t*)W.q + (size_t)(n + j) * K;
            if (mb == 8) __builtin_prefetch(wr + (size_t)8 * K + k, 0, 0);
            wv[j] = vf_h(wr + k, fmt);
        }
        ACC_ADD(wv, 0)
    }
    for (int m = 0; m < mb; m++) for (int j = 0; j < nb; j++) {
        const uint16_t* wr = (const uint16_t*)W.q + (size_t)(n + j) * K;
        float s = vf_sum(acc[m][j]);
        for (int i = k; i < K; i++) s = fmaf(half_f(wr[i], fmt), x[(size_t)m * K + i], s);
        y[(size_t)m * N + n + j] = s;
    }
}
// a block kind with its format fixed, as SPANS takes kinds (by name): 4-bit weights (q4block), and
// those whose grid values are rounded to bf16 or fp16 (q4bblock, q4hblock: the weights of a 16-bit
// layer that such a grid gives back bit for bit, so hblock's products over them, in its order);
// 16-bit weights (bfblock, hfblock)
#define FMT_BLOCK(kind, impl, fmt) static inline __attribute__((always_inline)) void kind( \
        const float* x, wts W, float* y, const int mb, const int nb, int n, int N, int K) { \
    impl(x, W, y, mb, nb, n, N, K, fmt); }
FMT_BLOCK(q4block, q4block_f, 0) FMT_BLOCK(q4bblock, q4block_f, BF16)
FMT_BLOCK(q4hblock, q4block_f, F16) FMT_BLOCK(bfblock, hblock, BF16) FMT_BLOCK(hfblock, hblock, F16)
// outputs n0 .. n1 - 1 of mb rows: NB(mb) side by side, the rest one by one
typedef void (*span_fn)(const float*, wts, float*, int, int, int, int);
#define SPAN(kind, mb, nb) static void kind##mb(const float* x, wts W, float* y, int n0, \
                                                 int n1, int N, int K) { int n = n0; \
    for (; n + (nb) <= n1; n += (nb)) kind(x, W, y, mb, nb, n, N, K); \
    for (; n < n1; n++) kind(x, W, y, mb, 1, n, N, K); }
#define SPANS(kind, NBK) SPAN(kind, 1, NBK(1)) SPAN(kind, 2, NBK(2)) SPAN(kind, 3, NBK(3)) \
    SPAN(kind, 4, NBK(4)) SPAN(kind, 5, NBK(5)) SPAN(kind, 6, NBK(6)) SPAN(kind, 7, NBK(7)) \
    SPAN(kind, 8, NBK(8)) \
    static const span_fn kind##s[9] = {0, kind##1, kind##2, kind##3, kind##4, kind##5, kind##6, \
                                       kind##7, kind##8};
SPANS(fblock, NBF) SPANS(q8block, NB) SPANS(q4block, NB) SPANS(bfblock, NBF)
SPANS(hfblock, NBF) SPANS(q4bblock, NB) SPANS(q4hblock, NB)
// every row block over thread t's share (of T) of the outputs: up to 7 rows as one block, from 8
// rows on blocks of ROW_BLOCK (4: from 8 rows on faster than blocks of 8, much for fp32 weights,
// a little for int8 and 4-bit ones, measured: *Row blocks of four*; -DROW_BLOCK=8 builds the
// blocks used before). Each row's sums are its own, so the blocks change no bits.
#if !defined(ROW_BLOCK)
#define ROW_BLOCK 4
#endif
#if ROW_BLOCK < 1 || ROW_BLOCK > 8
#error "ROW_BLOCK must be 1 to 8 (the spans run 1 to 8 rows)"
#endif
static void rows_in(const span_fn* spans, const float* x, wts W, float* y, int M, int N, int K,
                    int t, int T) {
    int n0 = (int)((long)N * t / T), n1 = (int)((long)N * (t + 1) / T);
    const int B = M < 8 ? M : ROW_BLOCK;
    for (int m0 = 0; m0 < M; m0 += B)
        spans[M - m0 < B ? M - m0 : B](x + (size_t)m0 * K, W, y + (size_t)m0 * N, n0, n1, N, K);
}
static void run_rows(const span_fn* spans, const float* x, wts W, float* y, int M, int N, int K,
                     int threads) {
    #pragma omp parallel num_threads(threads)
    rows_in(spans, x, W, y, M, N, K, omp_get_thread_num(), omp_get_num_threads());
}
void rows_mm(const float* x, const float* w, float* y, int M, int N, int K, int threads) {
    wts W = {w, 0, 0, 0, 0}; run_rows(fblocks, x, W, y, M, N, K, threads);
}
// 16-bit weights w (N, K) of format fmt (BF16 or F16), widened exactly: rows_mm's sums over their
// fp32 copies, reading half the bytes
void rows_mm_h(const float* x, const uint16_t* w, float* y, int M, int N, int K, int fmt,
               int threads) {
    wts W = {0, w, 0, 0, 0}; run_rows(fmt == F16 ? hfblocks : bfblocks, x, W, y, M, N, K, threads);
}
// 4-bit weights as rows_mm_q4's, each grid value rounded to the format fmt (BF16 or F16):
// rows_mm_h's sums over the 16-bit weights that rounding gives
void rows_mm_q4h(const float* x, const unsigned char* q, const float* s, const float* o, float* y,
                 int M, int N, int K, int G, int fmt, int threads) {
    wts W = {0, q, s, o, G};
    run_rows(fmt == F16 ? q4hblocks : q4bblocks, x, W, y, M, N, K, threads);
}
// whether 4-bit weights are picked from a table of their group's 16 values (AVX-512 builds); where
// they are not, each is widened and scaled, and a 16-bit layer reads its own weights faster than
// their grids (measured: nbs/07a_half.ipynb)
int q4_table(void) {
#if defined(Q4_TABLE)
    return 1;
#else
    return 0;
#endif
}
// int8 weights q (N, K), one fp32 scale and offset per group of G inputs, s and o (N, K / G), G a
// multiple of 16: each weight is q * s + o in fp32 before its products
void rows_mm_q8(const float* x, const signed char* q, const float* s, const float* o, float* y,
                int M, int N, int K, int G, int threads) {
    wts W = {0, q, s, o, G}; run_rows(q8blocks, x, W, y, M, N, K, threads);
}
// 4-bit weights (0..15) packed two a byte, per 32 inputs 16 bytes, q (N, K / 2), G a multiple
// of 32: the same weights q * s + o, the same products in the same order
void rows_mm_q4(const float* x, const unsigned char* q, const float* s, const float* o, float* y,
                int M, int N, int K, int G, int threads) {
    wts W = {0, q, s, o, G}; run_rows(q4blocks, x, W, y, M, N, K, threads);
}
#if defined(__AVX512F__) && defined(__AVX512VNNI__) && !defined(KERNEL_PLAIN_LOOPS)
#include <math.h>
// Greedy verification's argmax of rows_mm_q8's y = x w^T (int8 q (N, K), scales s (N, K / 32),
// offsets o all zero, K a multiple of 64), without every y. Each row of x as integers r = x / sx
// in -16256..16256, r = 128 h + l (h -127..127, l -64..63, each offset to u8); each y_i
// approximated from exact int32 sums of (h + 128) q and (l + 64) q (VNNI), scaled per group, less
// 16448 * sum_k w_ik (rs[i]): within cn[i] * beta of rows_mm_q8's y_i, where cn[i] >= |w_i| and
// beta = |x - sx r| + 2^-10 |x| (Cauchy-Schwarz; the slack is far above both sums' fp32
// rounding). Then rows_mm_q8's own sum (q8block: the same bits) for each output whose upper bound
// reaches the highest lower bound: y's argmax, the first of equals. best[m] = -1 where x is not
// finite or too large (the caller takes every y then).
// A 16-bit head (fmt BF16 or F16, its weights wh (N, K)): y = x wh^T summed as rows_mm_h sums it
// (hblock), then rounded to the format; q s any approximation of wh with en[i] >= |wh_i - (q s)_i|,
// so each bound widens by en[i] |x| (gam), and every output whose bound rounds to at least the
// highest lower bound's rounding (so within two of the format's steps) is summed exactly: the
// rounded y's argmax, the first of equals, as the logits' argmax in that dtype.
#if !defined(HEAD_AHEAD)  // the head's weight rows asked for this many rows early
#define HEAD_AHEAD 16
#endif
static inline __attribute__((always_inline)) void approx_span(
        const int mb, const signed char* q, const float* s, const unsigned char* hb,
        const unsigned char* lb, const float* rs, const float* sx, float* ap, int n0, int n1,
        int N, int K, const float* cn, const float* beta, const float* en, const float* gam,
        float* lo) {
    const int KC = K / 64, KG = K / 32;
    for (int i = n0; i < n1; i++) {
        __m512 acc[8];
        for (int m = 0; m < mb; m++) acc[m] = _mm512_setzero_ps();
        const float* si = s + (size_t)i * KG;
        const signed char* qi = q + (size_t)i * K;
        for (int c = 0; c < KC; c++) {
            // lanes 0-7 sum group 2c, lanes 8-15 group 2c + 1
            __m512i w = _mm512_loadu_si512(qi + 64 * c);
            // HEAD_AHEAD rows ahead, kept (PF_KEEP; measured: the results journal, *Kernel*)
            __builtin_prefetch(qi + (size_t)HEAD_AHEAD * K + 64 * c, 0, PF_KEEP);
            __m512 dl = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(si[2 * c]),
                                             _mm512_set1_ps(si[2 * c + 1]));
            for (int m = 0; m < mb; m++) {
                const size_t o1 = (size_t)m * K + 64 * c;
                __m512i ah = _mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                                 _mm512_loadu_si512(hb + o1), w);
                __m512i al = _mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                                 _mm512_loadu_si512(lb + o1), w);
                __m512i v = _mm512_add_epi32(_mm512_slli_epi32(ah, 7), al);
                acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), dl, acc[m]);
            }
        }
        for (int m = 0; m < mb; m++) {
            const float a = sx[m] * fmaf(-16448.0f, rs[i], _mm512_reduce_add_ps(acc[m]));
            ap[(size_t)m * N + i] = a;
            const float v = fmaf(-cn[i], beta[m], a) - (en ? en[i] * gam[m] : 0.0f);  // lower bound
            if (v > lo[m]) lo[m] = v;
        }
    }
}
// outputs n0 .. n1 - 1 of row m whose upper bound reaches lo, each exactly (q8block: rows_mm_q8's
// bits; a 16-bit head, fmt: hblock's over wh, rows_mm_h's, then rounded to the format), the first
// of the largest: (index or -1, its value)
static void exact_span(const float* xm, wts W, const uint16_t* wh, int fmt, const float* a,
                       const float* cn, float b, const float* en, float g, float lo, float* ex,
                       int n0, int n1, int N, int K, long long* bi, float* bv) {
    *bi = -1; *bv = 0;
    int i = n0;
    const wts Wh = {0, wh, 0, 0, 0};
    const __m512 vb = _mm512_set1_ps(b), vg = _mm512_set1_ps(g), vlo = _mm512_set1_ps(lo);
    for (; i < n1; i += 16) {  // 16 bounds at a time; almost every block has no candidate
        __mmask16 in = n1 - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n1 - i)) - 1);
        __m512 up = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(in, cn + i), vb,
                                    _mm512_maskz_loadu_ps(in, a + i));
        if (en) up = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(in, en + i), vg, up);
        unsigned c = _mm512_mask_cmp_ps_mask(in, up, vlo, _CMP_GE_OQ);
        for (; c; c &= c - 1) {
            const int n = i + __builtin_ctz(c);
            if (fmt == BF16) hblock(xm, Wh, ex, 1, 1, n, N, K, BF16);  // writes ex[n]
            else if (fmt == F16) hblock(xm, Wh, ex, 1, 1, n, N, K, F16);
            else q8block(xm, W, ex, 1, 1, n, N, K);
            if (fmt) ex[n] = round_to(ex[n], fmt);
            if (*bi < 0 || ex[n] > *bv) *bi = n, *bv = ex[n];
        }
    }
}
// the least value whose rounding to the format (fmt) can reach lo's rounding: lo less two of the
// format's steps at lo (bf16 2^-7 |lo|, fp16 2^-10 |lo|, or a subnormal's step), and at most the
// format's largest finite value (anything rounding to infinity lies above it)
static inline float rounding_floor(float lo, int fmt) {
    if (!fmt || !(lo > -INFINITY)) return lo;
    const float t = fmt == BF16 ? lo - fabsf(lo) * 0x1p-6f - 0x1p-126f
                                : lo - fabsf(lo) * 0x1p-9f - 0x1p-20f;
    const float top = fmt == BF16 ? 0x1.fep127f : 65504.0f;
    return t > top ? top : t;
}
void head_argmax(const float* x, const signed char* q, const float* s, const float* o,
                 const float* cn, const float* rs,
                 // a 16-bit head (fmt BF16, F16; else 0 and NULL): wh's error bounds, its weights
                 const float* en, const uint16_t* wh, int fmt,
                 long long* best, int M, int N, int K, float* work, int threads) {
    wts W = {0, q, s, o, 32};
    unsigned char* hb = (unsigned char*)work;                   // (8, K) h + 128
    unsigned char* lb = hb + (size_t)8 * K;                     // (8, K) l + 64
    float* ap = (float*)(lb + (size_t)8 * K);                   // (8, N) approximations
    float* ex = ap + (size_t)8 * N;                             // (N,) exact sums, candidates
    float sx[8], beta[8], gam[8];
    for (int m0 = 0; m0 < M; m0 += 8) {
        const int mb = M - m0 < 8 ? M - m0 : 8;
        int ok[8];
        for (int m = 0; m < mb; m++) {
            const float* xm = x + (size_t)(m0 + m) * K;
            float amax = 0; double nx = 0;
            for (int k = 0; k < K; k++) {
                float a = fabsf(xm[k]);
                if (!(a <= 1e30f)) amax = INFINITY;  // not finite, or too large to bound
                else if (a > amax) amax = a;
                nx = fma((double)xm[k], xm[k], nx);
            }
            ok[m] = amax <= 1e30f && amax > 0;
            best[m0 + m] = amax == 0 ? 0 : -1;  // x = 0: every y is 0, the first wins
            sx[m] = ok[m] ? amax / 16256.0f : 1;
            double ne = 0;
            unsigned char* h = hb + (size_t)m * K; unsigned char* l = lb + (size_t)m * K;
            for (int k = 0; k < K; k++) {
                float rf = ok[m] ? nearbyintf(xm[k] / sx[m]) : 0;
                int r = rf > 16256 ? 16256 : rf < -16256 ? -16256 : (int)rf;
                int hh = (r + 64) >> 7;                          // floor: -127..127
                h[k] = (unsigned char)(hh + 128); l[k] = (unsigned char)(r - (hh << 7) + 64);
                double e = fma(-(double)sx[m], r, xm[k]); ne = fma(e, e, ne);
            }
            beta[m] = (float)((sqrt(ne) + ldexp(sqrt(nx), -10)) * (1 + 1e-5));
            gam[m] = (float)(sqrt(nx) * (1 + 0x1p-8));  // |x| and the exact sum's rounding
        }
        // each thread: its outputs' approximations and their highest lower bound per row; then,
        // with every thread's bound known, its outputs that can hold the maximum, exactly
        float lot[64][8];      // (thread, row) highest lower bound
        long long bt[64][8];   // (thread, row) first of the largest exact sums, or -1
        float vt[64][8];
        const int nt = threads < 64 ? threads : 64;
        #pragma omp parallel num_threads(nt)
        {
            int t = omp_get_thread_num(), T = omp_get_num_threads();
            int n0 = (int)((long)N * t / T), n1 = (int)((long)N * (t + 1) / T);
            for (int m = 0; m < mb; m++) lot[t][m] = -INFINITY;
            switch (mb) {
#define APPROX(b) case b: approx_span(b, q, s, hb, lb, rs, sx, ap, n0, n1, N, K, cn, beta, \
                                      en, gam, lot[t]); break;
                APPROX(1) APPROX(2) APPROX(3) APPROX(4) APPROX(5) APPROX(6) APPROX(7) APPROX(8)
#undef APPROX
            }
#if !defined(HEAD_SERIAL_SCAN)
            #pragma omp barrier
            for (int m = 0; m < mb; m++) {
                float lo = -INFINITY;
                for (int u = 0; u < T; u++) if (lot[u][m] > lo) lo = lot[u][m];
                bt[t][m] = -1;
                if (ok[m]) exact_span(x + (size_t)(m0 + m) * K, W, wh, fmt, ap + (size_t)m * N,
                                      cn, beta[m], en, gam[m], rounding_floor(lo, fmt), ex, n0,
                                      n1, N, K, &bt[t][m], &vt[t][m]);
            }
            #pragma omp barrier
            #pragma omp single
            for (int m = 0; m < mb; m++) {  // the threads' spans in index order: first of equals
                if (!ok[m]) continue;
                long long bi = -1; float bv = 0;
                for (int u = 0; u < T; u++)
                    if (bt[u][m] >= 0 && (bi < 0 || vt[u][m] > bv)) bi = bt[u][m], bv = vt[u][m];
                best[m0 + m] = bi;
            }
#endif
        }
#if defined(HEAD_SERIAL_SCAN)  // for comparison: the bounds scanned on one thread, as before
        for (int m = 0; m < mb; m++) {
            if (!ok[m]) continue;
            if (fmt) { best[m0 + m] = -1; continue; }  // (fp32 heads only: the caller's logits)
            const float* a = ap + (size_t)m * N; const float b = beta[m];
            float lo = -INFINITY;
            for (int i = 0; i < N; i++) { float v = a[i] - cn[i] * b; if (v > lo) lo = v; }
            long long bi = -1; float bv = 0;
            for (int i = 0; i < N; i++) {
                if (!(a[i] + cn[i] * b >= lo)) continue;
                q8block(x + (size_t)(m0 + m) * K, W, ex, 1, 1, i, N, K);  // writes ex[i]
                if (bi < 0 || ex[i] > bv) bi = i, bv = ex[i];
            }
            best[m0 + m] = bi;
        }
#endif
    }
}
#endif
