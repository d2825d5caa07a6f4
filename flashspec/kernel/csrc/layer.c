// A whole decoder layer of a Llama-family model for the few rows (M <= 32) of a decoding step or a
// small tree, fp32 (its products' weights fp32 or int8) or 16-bit (bf16, fp16: see layer_impl), in
// place on the residual stream x (M, d): RMSNorm, q/k/v products (+ biases; Qwen3: per-head
// norms), rotary embedding, keys and values written at each row's slot, attention over the slots
// its bias row leaves open (in slot order), o product, residual, RMSNorm, gated SiLU MLP,
// residual. Each row is computed on its own in one fixed order: batch-invariant like rows_mm, whose
// products it uses.
#include <math.h>
#include <stdint.h>
static void norm_rows(const float* x, const void* wv, float* y, int M, int d, int ystride,
                      float eps, int fmt) {
    // y = w * (x / sqrt(mean(x^2) + eps)), each row summed in one fixed order; rows ystride apart.
    // A 16-bit layer (fmt): w in that format, x / rms rounded to it, then w times that, rounded
    // (PyTorch's RMSNorm: `weight * x.to(input_dtype)`)
    const float* w = (const float*)wv; const uint16_t* wh = (const uint16_t*)wv;
    for (int m = 0; m < M; m++) {
        const float* xr = x + (size_t)m * d; float* yr = y + (size_t)m * ystride;
        vf acc = vf_zero(); int k = 0;
        for (; k + 16 <= d; k += 16) { const vf v = vf_load(xr + k); acc = vf_fma(v, v, acc); }
        float ss = vf_sum(acc);
        for (; k < d; k++) ss = fmaf(xr[k], xr[k], ss);
        const float r = 1.0f / sqrtf(ss / (float)d + eps);
        if (fmt) for (int j = 0; j < d; j++)
            yr[j] = round_to(half_f(wh[j], fmt) * round_to(xr[j] * r, fmt), fmt);
        else for (int j = 0; j < d; j++) yr[j] = w[j] * (xr[j] * r);
    }
}
// y += b, then y rounded to a 16-bit layer's format (fmt; b in that format)
static void add_bias(float* y, const void* b, int M, int N, int fmt) {
    if (b && fmt) for (int m = 0; m < M; m++) for (int n = 0; n < N; n++)
        y[(size_t)m * N + n] += half_f(((const uint16_t*)b)[n], fmt);
    else if (b) for (int m = 0; m < M; m++) for (int n = 0; n < N; n++)
        y[(size_t)m * N + n] += ((const float*)b)[n];
    round_rows(y, (size_t)M * N, fmt);
}
static void rope(float* q, const float* cs, const float* sn, int M, int heads, int hd, int fmt) {
    // HF's q * cos + rotate_half(q) * sin, rotate_half(q) = (-q2, q1); a 16-bit layer (fmt) rounds
    // each product and the sum, as PyTorch does in that dtype
    const int h2 = hd / 2;
    for (int m = 0; m < M; m++) {
        const float* c = cs + (size_t)m * hd, * s = sn + (size_t)m * hd;
        for (int h = 0; h < heads; h++) {
            float* v = q + ((size_t)m * heads + h) * hd;
            for (int i = 0; i < h2; i++) {
                const float a = v[i], b = v[i + h2];
                if (fmt) {
                    v[i] = round_to(round_to(a * c[i], fmt) - round_to(b * s[i], fmt), fmt);
                    v[i + h2] = round_to(
                        round_to(b * c[i + h2], fmt) + round_to(a * s[i + h2], fmt), fmt);
                    continue;
                }
                v[i] = a * c[i] - b * s[i];
                v[i + h2] = fmaf(b, c[i + h2], a * s[i + h2]);
            }
        }
    }
}
#if defined(__AVX512F__) && !defined(KERNEL_PLAIN_LOOPS) && !defined(KERNEL_SCALAR_EXP)
// expf of 16 floats by glibc's own steps (e_expf.c as its FMA build runs them): x 32 / ln 2 = k + r
// (k the nearest integer), 2^(k/32) from a 32-entry table and the exponent's bits, a cubic in r,
// all in double, then rounded to float. The same bits as expf wherever the top 12 bits of |x| are
// at most 0x42a (|x| < 96); the other lanes asked for (want) are expf's own. Checked against expf
// over all 2^32 floats (the results journal, *Kernel*); nbs/06c_layers.ipynb tests a sample.
#define VEXP
static const long long EXP_TAB[32] = {  // 2^(i/32)'s bits less i << 47 (glibc's __exp2f_data)
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540};
static inline __m512d exp8d(__m256 x) {  // 8 lanes in double, before the rounding to float
    const __m512d xd = _mm512_cvtps_pd(x), inv = _mm512_set1_pd(0x1.71547652b82fep+5);
    const __m512d sh = _mm512_set1_pd(0x1.8p52);       // k in the low bits: ki
    const __m512d kds = _mm512_fmadd_pd(inv, xd, sh);   // x 32 / ln 2 + 1.5 2^52, one rounding
    const __m512i ki = _mm512_castpd_si512(kds);
    const __m512d r = _mm512_fmsub_pd(inv, xd, _mm512_sub_pd(kds, sh));  // x 32 / ln 2 - k
    const __m512i lo16 = _mm512_permutex2var_epi64(  // table entry k mod 32 (the index's bits 0-4)
        _mm512_loadu_si512(EXP_TAB), ki, _mm512_loadu_si512(EXP_TAB + 8));
    const __m512i hi16 = _mm512_permutex2var_epi64(
        _mm512_loadu_si512(EXP_TAB + 16), ki, _mm512_loadu_si512(EXP_TAB + 24));
    const __m512i t = _mm512_add_epi64(_mm512_slli_epi64(ki, 47), _mm512_mask_blend_epi64(
        _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)), lo16, hi16));  // 2^(k/32)
    const __m512d z = _mm512_fmadd_pd(r, _mm512_set1_pd(0x1.c6af84b912394p-20),
                                      _mm512_set1_pd(0x1.ebfce50fac4f3p-13));
    const __m512d y = _mm512_fmadd_pd(z, _mm512_mul_pd(r, r), _mm512_fmadd_pd(
        r, _mm512_set1_pd(0x1.62e42ff0c52d6p-6), _mm512_set1_pd(1.0)));  // 2^(r/32)
    return _mm512_mul_pd(y, _mm512_castsi512_pd(t));
}
static inline __m512 exp16(__m512 x, __mmask16 want) {
    const __m256 lo = _mm512_cvtpd_ps(exp8d(_mm512_castps512_ps256(x)));
    const __m256 hi = _mm512_cvtpd_ps(exp8d(
        _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1))));
    __m512 y = _mm512_castpd_ps(_mm512_insertf64x4(
        _mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
    const __m512i top = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(x), 20),
                                         _mm512_set1_epi32(0x7ff));
    const __mmask16 big = want & _mm512_cmpgt_epi32_mask(top, _mm512_set1_epi32(0x42a));
    if (big) {  // large, infinite or NaN: expf itself (glibc's other branch)
        float xs[16], ys[16];
        _mm512_storeu_ps(xs, x); _mm512_storeu_ps(ys, y);
        for (int i = 0; i < 16; i++) if (big >> i & 1) ys[i] = expf(xs[i]);
        y = _mm512_loadu_ps(ys);
    }
    return y;
}
#endif
// y[i] = expf(x[i]) for n floats (exp16 where built): what nbs/06c_layers.ipynb checks against expf
void exp_rows(const float* x, float* y, long long n) {
    long long i = 0;
#if defined(VEXP)
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, exp16(_mm512_loadu_ps(x + i), 0xFFFF));
#endif
    for (; i < n; i++) y[i] = expf(x[i]);
}
// how many floats exp_rows takes at once: 16 where exp16 is built, else 1 (expf one by one)
int exp_lanes(void) {
#if defined(VEXP)
    return 16;
#else
    return 1;
#endif
}
// the MLP's g = silu(g) u = g / (1 + exp(-g)) u, in place over n floats
static void silu_mul(float* g, const float* u, size_t n) {
    size_t i = 0;
#if defined(VEXP)
    for (; i + 16 <= n; i += 16) {
        const __m512 gv = _mm512_loadu_ps(g + i);
        const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), gv), 0xFFFF);
        _mm512_storeu_ps(g + i, _mm512_mul_ps(
            _mm512_div_ps(gv, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), _mm512_loadu_ps(u + i)));
    }
#endif
    for (; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
// a 16-bit layer's g = silu(g) u: g and u rounded to its format (the products' outputs), silu(g)
// rounded, then their product (PyTorch's `act_fn(gate) * up` in that dtype)
static void silu_mul_h(float* g, const float* u, size_t n, int fmt) {
    size_t i = 0;
#if defined(VEXP)
    for (; i + 16 <= n; i += 16) {  // the same steps, 16 at a time (exp16: expf's bits)
        v16 a, b; __builtin_memcpy(&a, g + i, 64); __builtin_memcpy(&b, u + i, 64);
        a = round_v(a, fmt);
        __m512 av; __builtin_memcpy(&av, &a, 64);
        const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), av), 0xFFFF);
        __m512 sv = _mm512_div_ps(av, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        v16 sl; __builtin_memcpy(&sl, &sv, 64);
        sl = round_v(round_v(sl, fmt) * round_v(b, fmt), fmt);
        __builtin_memcpy(g + i, &sl, 64);
    }
#endif
    for (; i < n; i++) {
        const float a = round_to(g[i], fmt);
        g[i] = round_to(round_to(a / (1.0f + expf(-a)), fmt) * round_to(u[i], fmt), fmt);
    }
}
static inline float dot_hd(const float* a, const float* b, int hd) {
    vf acc = vf_zero(); int k = 0;
    for (; k + 16 <= hd; k += 16) acc = vf_fma(vf_load(a + k), vf_load(b + k), acc);
    float s = vf_sum(acc);
    for (; k < hd; k++) s = fmaf(a[k], b[k], s);
    return s;
}
// a 16-bit cache's dot product (fmt): each key widened exactly as it is read (dot_hd's sums over
// fp32 copies)
static inline float dot_h(const float* a, const uint16_t* b, int hd, int fmt) {
    vf acc = vf_zero(); int k = 0;
    for (; k + 16 <= hd; k += 16) acc = vf_fma(vf_load(a + k), vf_h(b + k, fmt), acc);
    float s = vf_sum(acc);
    for (; k < hd; k++) s = fmaf(a[k], half_f(b[k], fmt), s);
    return s;
}
// a (row, head)'s softmax weights p_j = exp(s_j - mx) over the slots its bias row br leaves open:
// their sum, and out = sum of p_j v_j (in slot order; head size 16 nv, the sums in registers)
static inline __attribute__((always_inline)) float weigh(
        const float* V, const float* s, const float* br, float mx, int S, const int nv,
        float* out) {
    vf acc[8]; float l = 0.0f;
    for (int i = 0; i < nv; i++) acc[i] = vf_zero();
    for (int j = 0; j < S; j++) {
        if (br[j] < -1e37f) continue;
        const float p = expf(s[j] - mx); l += p;
        const float* vr = V + (size_t)j * 16 * nv;
        for (int i = 0; i < nv; i++) {
            acc[i] = vf_fma(vf_set1(p), vf_load(vr + 16 * i), acc[i]);
        }
    }
    for (int i = 0; i < nv; i++) vf_store(out + 16 * i, acc[i]);  // (registers)
    return l;
}
#if defined(__AVX512F__) && !defined(KERNEL_PLAIN_LOOPS)
// the scores of 16 slots j0 .. j0 + 15 for one (row, head), each as `attend`'s loop makes it: its
// dot product summed as dot_hd does (16 lanes over the head, then vf_sum's tree), times scale,
// plus its bias, in one fused multiply-add. The 16 trees run side by side, adding the same pairs.
// 16 of a cache's values from element i as floats: fp32 (fmt 0), or 16-bit (BF16, F16) widened
// exactly
static inline __m512 load16(const void* p, size_t i, const int fmt) {
    if (fmt == BF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(
        _mm256_loadu_si256((const __m256i*)((const uint16_t*)p + i))), 16));
    if (fmt == F16)
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)((const uint16_t*)p + i)));
    return _mm512_loadu_ps((const float*)p + i);
}
// (K: the cache from element k0 on, fp32 or of the format fmt)
static inline __attribute__((always_inline)) __m512 scores16(
        const float* qr, const void* K, size_t k0, const float* br, int hd, float scale,
        const int fmt) {
    __m512 a[16], b[8], c[4], d[2];
    for (int j = 0; j < 16; j++) a[j] = _mm512_setzero_ps();
    for (int k = 0; k < hd; k += 16) {
        const __m512 qv = _mm512_loadu_ps(qr + k);
        for (int j = 0; j < 16; j++)
            a[j] = _mm512_fmadd_ps(qv, load16(K, k0 + (size_t)j * hd + k, fmt), a[j]);
    }
    // lane i + lane i + 8: slot 2p's eight sums in lanes 0-7 of b[p], slot 2p + 1's in 8-15
    for (int p = 0; p < 8; p++)
        b[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], 0x44),
                             _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], 0xEE));
    // + 4: quarter t of c[r] holds slot 4r + t's four sums
    for (int r = 0; r < 4; r++)
        c[r] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * r], b[2 * r + 1], 0x88),
                             _mm512_shuffle_f32x4(b[2 * r], b[2 * r + 1], 0xDD));
    // + 2, within quarter t: slot 8u + t in lanes 0, 1 and slot 8u + 4 + t in lanes 2, 3
    for (int u = 0; u < 2; u++)
        d[u] = _mm512_add_ps(_mm512_shuffle_ps(c[2 * u], c[2 * u + 1], 0x44),
                             _mm512_shuffle_ps(c[2 * u], c[2 * u + 1], 0xEE));
    // + 1: lane 4t + v holds slot 4v + t; back to slot order
    const __m512 e = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], 0x88),
                                   _mm512_shuffle_ps(d[0], d[1], 0xDD));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_fmadd_ps(_mm512_permutexvar_ps(order, e), _mm512_set1_ps(scale),
                           _mm512_loadu_ps(br));
}
// which of the 16 slots from br a bias row leaves open (not below -1e37, as `attend` tests)
static inline __mmask16 open16(const float* br) {
    return _mm512_cmp_ps_mask(_mm512_loadu_ps(br), _mm512_set1_ps(-1e37f), _CMP_NLT_UQ);
}
// acc[r][c] += p[r][j] v_j (its 16 dims c) over slots lo .. hi - 1 in slot order, for nr (row,
// head) pairs and CW runs of 16 dims at once
#define CW 2
static inline __attribute__((always_inline)) void weigh_rows(
        const void* V, size_t v0, const float* const* p, int lo, int hi, int hd, const int nr,
        __m512 (*acc)[CW], const int fmt) {
    for (int r = 0; r < nr; r++) for (int c = 0; c < CW; c++) acc[r][c] = _mm512_setzero_ps();
    for (int j = lo; j < hi; j++) {
        __m512 vv[CW];
        for (int c = 0; c < CW; c++) vv[c] = load16(V, v0 + (size_t)j * hd + 16 * c, fmt);
        for (int r = 0; r < nr; r++) {
            const __m512 pr = _mm512_set1_ps(p[r][j]);
            for (int c = 0; c < CW; c++) acc[r][c] = _mm512_fmadd_ps(pr, vv[c], acc[r][c]);
        }
    }
}
// the largest score s_j of the slots a bias row br leaves open, the first (lo) and one past the
// last (hi) of them; -INFINITY, lo = S and hi = 0 where none is open
static inline float open_max(const float* s, const float* br, int S, int* plo, int* phi) {
    __m512 mv = _mm512_set1_ps(-INFINITY); int lo = S, hi = 0, j = 0;
    for (; j + 16 <= S; j += 16) {
        const __mmask16 open = open16(br + j);
        if (!open) continue;
        mv = _mm512_mask_max_ps(mv, open, mv, _mm512_loadu_ps(s + j));
        if (lo == S) lo = j + __builtin_ctz(open);
        hi = j + 32 - __builtin_clz((unsigned)open);
    }
    float mx = _mm512_reduce_max_ps(mv);
    for (; j < S; j++) {
        if (br[j] < -1e37f) continue;
        if (s[j] > mx) mx = s[j];
        if (lo == S) lo = j;
        hi = j + 1;
    }
    *plo = lo; *phi = hi; return mx;
}
// attention with the cache read once per layer, whatever the rows and heads (`attend`'s sums, in
// its order; head sizes 64 and 128), in three steps split among the threads:
// 1. scores: per batch row and key head, 16 slots at a time for every (row, head) reading them;
// 2. per (row, head): the largest open score mx, then p_j = exp(s_j - mx) over the open slots in
//    slot order and their sum l; p_j = 0 at the closed ones;
// 3. per batch row, key head and 16 CW of the head's dims: the sums of p_j v_j over the slots, in
//    slot order, for all (row, head) pairs reading that key head at once, then times 1 / l.
// A closed slot's p = 0 adds nothing to a sum begun at +0 (its value is read: the caches start
// zeroed, and every row's key and value are written before). sc: M H (S + 3) floats. A 16-bit
// cache (fmt BF16, F16): each key and value widened exactly as it is read, the same sums (as
// attend_rows's over that cache).
static inline __attribute__((always_inline)) void attend_cache(
        const float* q, const void* kc, const void* vc, const float* bias, float* o, float* sc,
        int M, int T, int H, int Hkv, int hd, int S, float scale, const int fmt, int threads) {
    const int B = M / T, rep = H / Hkv, nq = T * rep, nblk = (S + 15) / 16, MH = M * H;
    float* P = sc; float* lsum = P + (size_t)MH * S;
    int* jlo = (int*)(lsum + MH); int* jhi = jlo + MH;
    #pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int n1 = B * Hkv * nblk;  // 1: each thread a run of blocks
        for (int i = (int)((long)n1 * t / nt); i < (int)((long)n1 * (t + 1) / nt); i++) {
            const int bg = i / nblk, j0 = i % nblk * 16, b = bg / Hkv, g = bg % Hkv;
            const size_t k0 = ((size_t)b * Hkv + g) * S * hd;  // this key head's cache
            for (int r = 0; r < nq; r++) {
                const int m = b * T + r / rep, h = g * rep + r % rep;
                const float* qr = q + ((size_t)m * H + h) * hd, * br = bias + (size_t)m * S;
                float* s = P + ((size_t)m * H + h) * S;
                if (j0 + 16 <= S) {
                    if (open16(br + j0)) _mm512_storeu_ps(s + j0, scores16(
                        qr, kc, k0 + (size_t)j0 * hd, br + j0, hd, scale, fmt));
                } else for (int j = j0; j < S; j++) {
                    if (br[j] < -1e37f) continue;
                    const size_t at = k0 + (size_t)j * hd;
                    s[j] = fmaf(fmt ? dot_h(qr, (const uint16_t*)kc + at, hd, fmt)
                                    : dot_hd(qr, (const float*)kc + at, hd), scale, br[j]);
                }
            }
        }
        #pragma omp barrier
#if defined(VEXP)
        for (int t0 = t; t0 < MH; t0 += 4 * nt) {  // 2: four of this thread's (row, head)s at once
            const float* ps[4] = {0}; int tk[4], n4 = 0, ulo = S, uhi = 0;  // n4 >= 1 below
            for (int task = t0; task < MH && n4 < 4; task += nt) {
                const float* br = bias + (size_t)(task / H) * S; float* s = P + (size_t)task * S;
                int lo, hi; const float mx = open_max(s, br, S, &lo, &hi);
                if (mx == -INFINITY) lo = hi = 0;  // nothing to attend: zeros
                __builtin_memset(s, 0, (size_t)lo * 4);
                __builtin_memset(s + hi, 0, (size_t)(S - hi) * 4);
                const __m512 mxv = _mm512_set1_ps(mx);
                for (int j = lo; j < hi; j += 16) {  // p at the open slots, 0 at the closed
                    const __mmask16 in = hi - j >= 16 ? 0xFFFF : (__mmask16)((1u << (hi - j)) - 1);
                    const __mmask16 open = _mm512_mask_cmp_ps_mask(
                        in, _mm512_maskz_loadu_ps(in, br + j), _mm512_set1_ps(-1e37f), _CMP_NLT_UQ);
                    const __m512 p = exp16(
                        _mm512_sub_ps(_mm512_maskz_loadu_ps(in, s + j), mxv), open);
                    _mm512_mask_storeu_ps(s + j, in, _mm512_maskz_mov_ps(open, p));
                }
                jlo[task] = lo; jhi[task] = hi; tk[n4] = task; ps[n4++] = s;
                if (lo < hi && lo < ulo) ulo = lo;
                if (hi > uhi) uhi = hi;
            }
            for (int r = n4; r < 4; r++) ps[r] = ps[0];
            // l: p's sum in slot order from +0 (zeros outside a window add nothing)
            float l0 = 0.0f, l1 = 0.0f, l2 = 0.0f, l3 = 0.0f;
            for (int j = ulo; j < uhi; j++) l0 += ps[0][j], l1 += ps[1][j], l2 += ps[2][j],
                                            l3 += ps[3][j];
            const float ls[4] = {l0, l1, l2, l3};
            for (int r = 0; r < n4; r++) lsum[tk[r]] = ls[r];
        }
#else
        for (int task = t; task < MH; task += nt) {  // 2
            const float* br = bias + (size_t)(task / H) * S; float* s = P + (size_t)task * S;
            int lo, hi; float l = 0.0f; const float mx = open_max(s, br, S, &lo, &hi);
            if (mx == -INFINITY) lo = S, hi = 0;  // nothing to attend (a padding row): zeros
            for (int j = 0; j < S; j++) {
                if (j < lo || j >= hi || br[j] < -1e37f) { s[j] = 0.0f; continue; }
                const float p = expf(s[j] - mx); s[j] = p; l += p;
            }
            lsum[task] = l; jlo[task] = lo; jhi[task] = hi;
        }
#endif
        #pragma omp barrier
        const int nc = hd / 16 / CW, n3 = B * Hkv * nc;
        for (int i = (int)((long)n3 * t / nt); i < (int)((long)n3 * (t + 1) / nt); i++) {  // 3
            const int bg = i / nc, c = i % nc, b = bg / Hkv, g = bg % Hkv;
            const size_t v0 = ((size_t)b * Hkv + g) * S * hd + 16 * CW * c;  // from element
            for (int r0 = 0; r0 < nq; r0 += 8) {
                const int nr = nq - r0 < 8 ? nq - r0 : 8;
                int idx[8], lo = S, hi = 0; const float* p[8]; __m512 acc[8][CW];
                for (int r = 0; r < nr; r++) {
                    const int m = b * T + (r0 + r) / rep, h = g * rep + (r0 + r) % rep;
                    idx[r] = m * H + h; p[r] = P + (size_t)idx[r] * S;
                    if (jlo[idx[r]] < lo) lo = jlo[idx[r]];
                    if (jhi[idx[r]] > hi) hi = jhi[idx[r]];
                }
                switch (nr) {  // constant counts: the sums stay in registers
                    case 1: weigh_rows(vc, v0, p, lo, hi, hd, 1, acc, fmt); break;
                    case 2: weigh_rows(vc, v0, p, lo, hi, hd, 2, acc, fmt); break;
                    case 3: weigh_rows(vc, v0, p, lo, hi, hd, 3, acc, fmt); break;
                    case 4: weigh_rows(vc, v0, p, lo, hi, hd, 4, acc, fmt); break;
                    case 5: weigh_rows(vc, v0, p, lo, hi, hd, 5, acc, fmt); break;
                    case 6: weigh_rows(vc, v0, p, lo, hi, hd, 6, acc, fmt); break;
                    case 7: weigh_rows(vc, v0, p, lo, hi, hd, 7, acc, fmt); break;
                    default: weigh_rows(vc, v0, p, lo, hi, hd, 8, acc, fmt);
                }
                for (int r = 0; r < nr; r++) {
                    float* out = o + (size_t)idx[r] * hd + 16 * CW * c;
                    const __m512 inv = _mm512_set1_ps(lsum[idx[r]] > 0.0f ? 1.0f / lsum[idx[r]]
                                                                            : 0.0f);
                    for (int k = 0; k < CW; k++)  // nothing open: zeros
                        _mm512_storeu_ps(out + 16 * k, _mm512_mul_ps(acc[r][k], inv));
                }
            }
        }
    }
}
#endif
// attention of each (row, head) over the slots its bias row leaves open, in slot order, over an
// fp32 cache (fmt 0) or a 16-bit one (fmt BF16, F16: each key and value widened exactly as it is
// read, the same sums as over fp32 copies of the cache)
static inline __attribute__((always_inline)) void attend_rows(
        const float* q, const void* kc, const void* vc, const float* bias, float* o, float* sc,
        int M, int T, int H, int Hkv, int hd, int S, float scale, const int fmt, int threads) {
    #pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        float* s = sc + (size_t)t * S;
        for (int task = t; task < M * H; task += nt) {
            const int m = task / H, h = task % H, b = m / T, g = h / (H / Hkv);
            const float* qr = q + ((size_t)m * H + h) * hd, * br = bias + (size_t)m * S;
            const size_t at = ((size_t)b * Hkv + g) * S * hd;  // this key head's cache
            const float* K = (const float*)kc + at, * V = (const float*)vc + at;
            const uint16_t* Kh = (const uint16_t*)kc + at, * Vh = (const uint16_t*)vc + at;
            float mx = -INFINITY;
            for (int j = 0; j < S; j++) {
                if (br[j] < -1e37f) continue;
                s[j] = fmaf(fmt ? dot_h(qr, Kh + (size_t)j * hd, hd, fmt)
                            : dot_hd(qr, K + (size_t)j * hd, hd), scale, br[j]);
                if (s[j] > mx) mx = s[j];
            }
            float* out = o + ((size_t)m * H + h) * hd;
            for (int i = 0; i < hd; i++) out[i] = 0.0f;
            if (mx == -INFINITY) continue;  // nothing to attend (a padding row): zeros
            // the same sums, kept in registers over the slots where the head size allows
            float l = 0.0f;
#if !defined(KERNEL_PLAIN_LOOPS)
            if (!fmt && hd == 64) l = weigh(V, s, br, mx, S, 4, out);
            else if (!fmt && hd == 128) l = weigh(V, s, br, mx, S, 8, out);
            else
#endif
            for (int j = 0; j < S; j++) {
                if (br[j] < -1e37f) continue;
                const float p = expf(s[j] - mx); l += p;
                if (fmt) {
                    const uint16_t* vr = Vh + (size_t)j * hd;
                    int i = 0;
                    for (; i + 16 <= hd; i += 16) {
                        vf_store(out + i, vf_fma(vf_set1(p), vf_h(vr + i, fmt), vf_load(out + i)));
                    }
                    for (; i < hd; i++) out[i] = fmaf(p, half_f(vr[i], fmt), out[i]);
                    continue;
                }
                const float* vr = V + (size_t)j * hd;
                for (int i = 0; i < hd; i++) out[i] = fmaf(p, vr[i], out[i]);
            }
            const float inv = 1.0f / l;
            for (int i = 0; i < hd; i++) out[i] *= inv;
        }
    }
}
// attention over an fp32 cache (head sizes 64 and 128 with AVX-512: attend_cache, the same sums)
static void attend(const float* q, const float* kc, const float* vc, const float* bias,
                   float* o, float* sc, int M, int T, int H, int Hkv, int hd, int S, float scale,
                   int threads) {
#if defined(__AVX512F__) && !defined(KERNEL_PLAIN_LOOPS) && !defined(KERNEL_ATTEND_PER_HEAD)
    if (hd == 64 || hd == 128) {  // (KERNEL_ATTEND_PER_HEAD: the loop below, for comparison)
        attend_cache(q, kc, vc, bias, o, sc, M, T, H, Hkv, hd, S, scale, 0, threads);
        return;
    }
#endif
    attend_rows(q, kc, vc, bias, o, sc, M, T, H, Hkv, hd, S, scale, 0, threads);
}
// attention over a 16-bit cache (fmt BF16 or F16)
static void attend_h(const float* q, const uint16_t* kc, const uint16_t* vc, const float* bias,
                     float* o, float* sc, int M, int T, int H, int Hkv, int hd, int S, float scale,
                     int fmt, int threads) {
#if defined(__AVX512F__) && !defined(KERNEL_PLAIN_LOOPS) && !defined(KERNEL_ATTEND_PER_HEAD)
    if (hd == 64 || hd == 128) {  // the cache read once per layer (attend_cache), the same sums
        if (fmt == BF16) attend_cache(q, kc, vc, bias, o, sc, M, T, H, Hkv, hd, S, scale, BF16,
                                      threads);
        else attend_cache(q, kc, vc, bias, o, sc, M, T, H, Hkv, hd, S, scale, F16, threads);
        return;
    }
#endif
    attend_rows(q, kc, vc, bias, o, sc, M, T, H, Hkv, hd, S, scale, fmt, threads);
}
// the spans of a product's weights: fp32 rows where q is NULL, else `bits`-bit q (8: int8,
// rows_mm_q8's; 4: packed, rows_mm_q4's; BF16, F16: 16-bit floats, rows_mm_h's; Q4_BF16, Q4_F16:
// packed 4-bit with grid values rounded to the format, rows_mm_q4h's)
static const span_fn* spans_of(const void* q, int bits) {
    return !q ? fblocks : bits == 4 ? q4blocks : bits == BF16 ? bfblocks
           : bits == F16 ? hfblocks : bits == Q4_BF16 ? q4bblocks : bits == Q4_F16 ? q4hblocks
           : q8blocks;
}
// the 16-bit format a layer of these `bits` rounds to (BF16, F16), or 0 (an fp32 layer)
static inline int layer_fmt(int bits) {
    return bits == Q4_BF16 ? BF16 : bits == Q4_F16 ? F16 : bits == BF16 || bits == F16 ? bits : 0;
}
// y (M, N) = x (M, K) @ w^T: fp32 rows w where q is NULL, else `bits`-bit q with scales s and
// offsets o per G inputs (rows_mm, rows_mm_q8, rows_mm_q4)
static void prod(const float* x, const float* w, const void* q, const float* s, const float* o,
                 int G, int bits, float* y, int M, int N, int K, int threads) {
    wts W = {w, q, s, o, G}; run_rows(spans_of(q, bits), x, W, y, M, N, K, threads);
}
// a product of the layer: w[i] fp32 (qs == NULL), 16-bit floats (bits BF16 or F16), else its
// `bits`-bit weights (4, 8, Q4_BF16, Q4_F16) with qs[i], qo[i]
static void mm(const float* x, const float* const* w, const float* const* qs,
               const float* const* qo, int G, int bits, int i, float* y, int M, int N, int K,
               int threads) {
    prod(x, w[i], qs || bits >= BF16 ? w[i] : 0, qs ? qs[i] : 0, qs ? qo[i] : 0, G, bits, y, M, N,
         K, threads);
}
// products of one input x (M, K): w[i0 + j] into ys[j] (M, ns[j]), j < n, in one parallel region
// (each thread its share of every product's outputs: the same sums as one region a product, one
// fork and join of the threads instead of n; 1.3 us each here). silu: then ys[0] = silu(ys[0])
// ys[1] (the MLP's gate and up, ns[0] == ns[1]), each thread over the columns it computed.
// -DKERNEL_REGION_PER_PRODUCT: one region a product and silu_mul on one thread, for comparison
static void mm_many(const float* x, const float* const* w, const float* const* qs,
                    const float* const* qo, int G, int bits, int i0, int n, float* const* ys,
                    const int* ns, int M, int K, int silu, int threads) {
#if defined(KERNEL_REGION_PER_PRODUCT)
    for (int j = 0; j < n; j++) mm(x, w, qs, qo, G, bits, i0 + j, ys[j], M, ns[j], K, threads);
    if (silu && layer_fmt(bits)) silu_mul_h(ys[0], ys[1], (size_t)M * ns[0], layer_fmt(bits));
    else if (silu) silu_mul(ys[0], ys[1], (size_t)M * ns[0]);
#else
    #pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        for (int j = 0; j < n; j++) {
            const int i = i0 + j;
            wts W = {w[i], qs || bits >= BF16 ? w[i] : 0, qs ? qs[i] : 0, qs ? qo[i] : 0, G};
            rows_in(spans_of(W.q, bits), x, W, ys[j], M, ns[j], K, t, T);
        }
        if (silu) {  // rows_in's share of the columns; elementwise, so the same bits
            const int N = ns[0], n0 = (int)((long)N * t / T), n1 = (int)((long)N * (t + 1) / T);
            for (int m = 0; m < M; m++) {
                float* gm = ys[0] + (size_t)m * N + n0; const float* um = ys[1] + (size_t)m * N + n0;
                if (layer_fmt(bits)) silu_mul_h(gm, um, n1 - n0, layer_fmt(bits));
                else silu_mul(gm, um, n1 - n0);
            }
        }
    }
#endif
}
// e == NULL: a decoder layer. Else a feature drafter's layer (EAGLE-3): its q/k/v products read
// [in_norm(e), hn(x)] (2d wide), e the next tokens' embeddings, x the hidden state (the residual).
// bits BF16 or F16: a 16-bit layer (weights, norms, biases and cache in that format; Q4_BF16,
// Q4_F16: the same layer with its products over exact 4-bit copies of its weights), every
// operation's output rounded to it where the model's own forward in that dtype rounds (norms,
// products, rotary embedding, attention's output, residual sums, the MLP's activation and
// product); inside an operation the sums run in fp32 as for an fp32 layer. x stays fp32 (holding
// values of the format).
static void layer_impl(float* x, const float* e, const float* w_hn, int M, int T, int d, int I,
                       int H, int Hkv, int hd, float eps, float scale, const float* const* w,
                       const float* const* bs, const float* const* qs, const float* const* qo,
                       int G, int bits, const float* cs, const float* sn, void* kc, void* vc,
                       int S,
                       const int64_t* slots, const float* bias, float* work, int threads) {
    const int dq = H * hd, dk = Hkv * hd, din = e ? 2 * d : d, fmt = layer_fmt(bits);
    float* h = work; float* q = h + (size_t)M * din; float* k = q + (size_t)M * dq;
    float* v = k + (size_t)M * dk; float* a = v + (size_t)M * dk;
    float* g = a + (size_t)M * dq; float* u = g + (size_t)M * I; float* sc = u + (size_t)M * I;
    if (e) {
        norm_rows(e, w[0], h, M, d, din, eps, fmt); norm_rows(x, w_hn, h + d, M, d, din, eps, fmt);
    }
    else norm_rows(x, w[0], h, M, d, d, eps, fmt);
    {   // q, k, v
        float* ys[3] = {q, k, v}; const int ns[3] = {dq, dk, dk};
        mm_many(h, w, qs, qo, G, bits, 1, 3, ys, ns, M, din, 0, threads);
    }
    add_bias(q, bs[0], M, dq, fmt); add_bias(k, bs[1], M, dk, fmt); add_bias(v, bs[2], M, dk, fmt);
    if (w[9]) {  // Qwen3: each head's query and key through an RMSNorm of its own before RoPE
        norm_rows(q, w[9], q, M * H, hd, hd, eps, fmt);
        norm_rows(k, w[10], k, M * Hkv, hd, hd, eps, fmt);
    }
    rope(q, cs, sn, M, H, hd, fmt); rope(k, cs, sn, M, Hkv, hd, fmt);
    for (int m = 0; m < M; m++) {
        const int b = m / T;
        for (int j = 0; j < Hkv; j++) {
            const size_t at = (((size_t)b * Hkv + j) * S + slots[m]) * hd;
            const float* km = k + ((size_t)m * Hkv + j) * hd, * vm = v + ((size_t)m * Hkv + j) * hd;
            if (fmt) for (int i = 0; i < hd; i++) {  // (values of the format: exact)
                ((uint16_t*)kc)[at + i] = f_half(km[i], fmt);
                ((uint16_t*)vc)[at + i] = f_half(vm[i], fmt);
            } else {
                __builtin_memcpy((float*)kc + at, km, hd * 4);
                __builtin_memcpy((float*)vc + at, vm, hd * 4);
            }
        }
    }
    if (fmt) {
        attend_h(q, kc, vc, bias, a, sc, M, T, H, Hkv, hd, S, scale, fmt, threads);
        round_rows(a, (size_t)M * dq, fmt);
    } else attend(q, kc, vc, bias, a, sc, M, T, H, Hkv, hd, S, scale, threads);
    mm(a, w, qs, qo, G, bits, 4, h, M, d, dq, threads); add_bias(h, bs[3], M, d, fmt);
    for (size_t i = 0; i < (size_t)M * d; i++) x[i] += h[i];
    round_rows(x, (size_t)M * d, fmt);
    norm_rows(x, w[5], h, M, d, d, eps, fmt);
    {   // gate, up
        float* ys[2] = {g, u}; const int ns[2] = {I, I};
        mm_many(h, w, qs, qo, G, bits, 6, 2, ys, ns, M, d, 1, threads);  // then silu(g) u
    }
    mm(g, w, qs, qo, G, bits, 8, h, M, d, I, threads);
    round_rows(h, (size_t)M * d, fmt);
    for (size_t i = 0; i < (size_t)M * d; i++) x[i] += h[i];
    round_rows(x, (size_t)M * d, fmt);
}
void llama_layer(float* x, int M, int T, int d, int I, int H, int Hkv, int hd, float eps,
                 float scale,
                 // in_norm, q, k, v, o, post_norm, gate, up, down, and the heads' q_norm and
                 // k_norm (Qwen3; else NULL)
                 const float* const* w,
                 const float* const* bs, // q, k, v, o biases (NULL where none)
                 // NULL: fp32 products (or, bits BF16 or F16, a 16-bit layer: see layer_impl); else
                 // w's products are int8 (bits 8) or packed 4-bit (bits 4), qs and qo (indexed as
                 // w) their (N, K / G) scales and offsets
                 const float* const* qs, const float* const* qo, int G, int bits,
                 const float* cs, const float* sn, // (M, hd) rotary cos, sin
                 void* kc, void* vc, int S, // the layer's cache (B, Hkv, S, hd); row m: b = m / T
                 const int64_t* slots, // (M,) where each row's key and value go
                 const float* bias, // (M, S) additive attention bias per row
                 // scratch: M * (d + 2 (H + Hkv) hd + 2 I) + max(threads S, M H (S + 3)) floats
                 float* work, int threads) {
    layer_impl(x, 0, 0, M, T, d, I, H, Hkv, hd, eps, scale, w, bs, qs, qo, G, bits, cs, sn, kc, vc,
               S, slots, bias, work, threads);
}
// Every decoder layer of a forward in one call, llama_layer's arguments per layer from arrays: ip
// (L, 7) ints d, I, H, Hkv, hd, G, bits; fp (L, 2) eps, scale; w, bs, qs, qo (L,) each layer's
// pointer lists; kc, vc (L,) its cache buffers; keep (L,) where layer i's input (M, d) is copied
// (NULL: not). The layers' sizes alike (one scratch for all).
void llama_stack(float* x, int M, int T, int L, const int* ip, const float* fp,
                 const float* const* const* w, const float* const* const* bs,
                 const float* const* const* qs, const float* const* const* qo, const float* cs,
                 const float* sn, void* const* kc, void* const* vc, int S,
                 const int64_t* slots, const float* bias, float* const* keep, float* work,
                 int threads) {
    for (int i = 0; i < L; i++) {
        const int* p = ip + 7 * i;
        if (keep[i]) __builtin_memcpy(keep[i], x, (size_t)M * p[0] * sizeof(float));
        layer_impl(x, 0, 0, M, T, p[0], p[1], p[2], p[3], p[4], fp[2 * i], fp[2 * i + 1], w[i],
                   bs[i], qs ? qs[i] : 0, qo ? qo[i] : 0, p[5], p[6], cs, sn, kc[i], vc[i], S,
                   slots, bias, work, threads);
    }
}
// the same for a feature drafter's layer: e (M, d) embeddings, w_hn the hidden state's norm;
// scratch: M * (2 d + 2 (H + Hkv) hd + 2 I) + max(threads S, M H (S + 3)) floats
void feature_layer(float* x, const float* e, const float* w_hn, int M, int T, int d, int I, int H,
                   int Hkv, int hd, float eps, float scale, const float* const* w,
                   const float* const* bs, const float* const* qs, const float* const* qo, int G,
                   int bits, const float* cs, const float* sn, void* kc, void* vc, int S,
                   const int64_t* slots, const float* bias, float* work, int threads) {
    layer_impl(x, e, w_hn, M, T, d, I, H, Hkv, hd, eps, scale, w, bs, qs, qo, G, bits, cs, sn, kc,
               vc, S, slots, bias, work, threads);
}
// A feature drafter's whole step in one call: where f is given, x (M, d) = fc(f) (f (M, fin) the
// target's features; fc fp32 rows fw, or fq of fbits bits with fs, fo per fG inputs), else x holds
// the hidden states; then feature_layer over x in place (bias NULL: row m attends slots 0 ..
// slots[m], a causal prefix); then the final norm (w_norm, neps) of the last row (all_rows: of
// every row) and its logits (Sv, d) head rows (hw fp32, or hq of hbits bits with hs, ho per hG).
// scratch: feature_layer's, then M * S (the causal bias) and M * d floats
void feature_step(const float* f, int fin, const float* fw, const void* fq, const float* fs,
                  const float* fo, int fG, int fbits,
                  float* x, const float* e, const float* w_hn, int M, int T, int d, int I, int H,
                  int Hkv, int hd, float eps, float scale, const float* const* w,
                  const float* const* bs, const float* const* qs, const float* const* qo, int G,
                  int bits, const float* cs, const float* sn, void* kc, void* vc, int S,
                  const int64_t* slots, const float* bias,
                  const float* w_norm, float neps, const float* hw, const void* hq,
                  const float* hs, const float* ho, int hG, int hbits, int Sv, int all_rows,
                  float* logits, float* work, int threads) {
    const size_t ts = (size_t)threads * S, ms = (size_t)M * H * (S + 3);
    float* cb = work + (size_t)M * (2 * d + 2 * (H + Hkv) * hd + 2 * I) + (ts > ms ? ts : ms);
    float* nx = cb + (size_t)M * S;
    if (f) prod(f, fw, fq, fs, fo, fG, fbits, x, M, d, fin, threads);
    if (!bias) {  // the lowest float, as the callers' biases mask (attention skips below -1e37)
        for (int m = 0; m < M; m++) for (int j = 0; j < S; j++)
            cb[(size_t)m * S + j] = j <= slots[m] ? 0.0f : -3.4028234663852886e38f;
        bias = cb;
    }
    layer_impl(x, e, w_hn, M, T, d, I, H, Hkv, hd, eps, scale, w, bs, qs, qo, G, bits, cs, sn, kc,
               vc, S, slots, bias, work, threads);
    const int r0 = all_rows ? 0 : M - 1;
    norm_rows(x + (size_t)r0 * d, w_norm, nx, M - r0, d, d, neps, 0);
    prod(nx, hw, hq, hs, ho, hG, hbits, logits, M - r0, Sv, d, threads);
}
