// AMX probes for the 4-bit products (tools/amx_probe.py compiles this beside ROWS_SRC, rows.c).
// y (M, N) = x (M, K) w^T, w = j s + o per group of 32 inputs (GGUF Q4_1), against rows_mm_q4:
//   bf16: x as three bf16 limbs (x = x1 + x2 + x3 exactly), j widened to bf16 into a staged tile
//         per group and 16 outputs, TDPBF16PS, then s (P3 + P2 + P1) + o sum(x) per group;
//   int8: x rounded to a grid of 2^-22 of each group's largest |x|, three signed 8-bit digits,
//         j as int8 tiles read from memory (1 byte a weight), TDPBSSD, digits recombined.
// Prints the largest error against float64 (over sum |x w|), whether a row alone has the same
// bits as in a batch of 5, and the time of L products of N x K at M = 1..5 rows, 2 threads.
#include "rows.c"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <time.h>
typedef struct {  // the tile configuration (palette 1)
    uint8_t palette, start; uint8_t res[14]; uint16_t colsb[16]; uint8_t rows[16];
} tcfg;
static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9;
}
static inline uint16_t bf16_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u >> 16; }
// ---- bf16: weights packed per (16 outputs, group): 16 tile rows of 16 bytes, byte i of row kk
// holding j[n = i / 2][2 kk + i % 2] (low) and j[8 + i / 2][same] (high)
static void pack_bf(const unsigned char* j, unsigned char* qa, int N, int K) {
    int KG = K / 32;
    for (int nb = 0; nb < N / 16; nb++) for (int g = 0; g < KG; g++) for (int kk = 0; kk < 16; kk++)
        for (int i = 0; i < 16; i++) {
            int k = g * 32 + 2 * kk + (i & 1), n = i >> 1;
            qa[(((size_t)nb * KG + g) * 16 + kk) * 16 + i] =
                j[(size_t)(nb * 16 + n) * K + k] | (j[(size_t)(nb * 16 + 8 + n) * K + k] << 4);
        }
}
static void limbs(const float* x, uint16_t* xa, float* X, int M, int K) {
    int KG = K / 32;
    for (int m = 0; m < M; m++) for (int k = 0; k < K; k++) {
        float v = x[(size_t)m * K + k], x1, x2; uint32_t u, u1, u2;
        memcpy(&u, &v, 4); u1 = u & 0xFFFF0000u; memcpy(&x1, &u1, 4);
        float r = v - x1; memcpy(&u, &r, 4); u2 = u & 0xFFFF0000u; memcpy(&x2, &u2, 4);
        uint16_t* row = xa + ((size_t)(k / 32) * 3 * M + 3 * m) * 32 + k % 32;
        row[0] = u1 >> 16; row[32] = u2 >> 16; row[64] = bf16_of(r - x2);
    }
    for (int m = 0; m < M; m++) for (int g = 0; g < KG; g++) {
        const float* xg = x + (size_t)m * K + g * 32;
        v16 a, b; memcpy(&a, xg, 64); memcpy(&b, xg + 16, 64);
        X[g * M + m] = lanes_sum(a + b);
    }
}
static void amx_bf(const float* x, const unsigned char* qa, const float* sa, const float* oa,
                   float* y, int M, int N, int K, uint16_t* xa, float* X) {
    int KG = K / 32;
    limbs(x, xa, X, M, K);
    #pragma omp parallel num_threads(2)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        int NB = N / 16, b0 = NB * t / T, b1 = NB * (t + 1) / T;
        tcfg c; memset(&c, 0, sizeof c); c.palette = 1;
        for (int i = 0; i < 6; i++) { c.colsb[i] = 64; c.rows[i] = 3 * M; }
        c.rows[2] = c.rows[3] = 16;
        _tile_loadconfig(&c);
        uint16_t stage[2][16 * 32] __attribute__((aligned(64)));
        float cb[2][16 * 16] __attribute__((aligned(64)));
        const __m512i tab = _mm512_set_epi16(  // bf16 of 15 .. 0, twice
            0x4170, 0x4160, 0x4150, 0x4140, 0x4130, 0x4120, 0x4110, 0x4100, 0x40e0, 0x40c0, 0x40a0,
            0x4080, 0x4040, 0x4000, 0x3f80, 0, 0x4170, 0x4160, 0x4150, 0x4140, 0x4130, 0x4120,
            0x4110, 0x4100, 0x40e0, 0x40c0, 0x40a0, 0x4080, 0x4040, 0x4000, 0x3f80, 0);
        for (int nb = b0; nb < b1; nb++) {
            __m512 acc[5];
            for (int m = 0; m < M; m++) acc[m] = _mm512_setzero_ps();
            for (int g = 0; g <= KG; g++) {
                if (g < KG) {  // stage and multiply group g (tiles alternate so two are in flight)
                    const unsigned char* src = qa + ((size_t)nb * KG + g) * 256;
                    uint16_t* st = stage[g & 1];
                    for (int kk = 0; kk < 16; kk++) {
                        const __m128i* p16 = (const __m128i*)(src + 16 * kk);
                        __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(p16));
                        __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(w),
                                                       _mm256_srli_epi16(w, 4), 1);
                        _mm512_store_si512(st + 32 * kk, _mm512_permutexvar_epi16(z, tab));
                    }
                    if (g & 1) {
                        _tile_loadd(3, st, 64); _tile_loadd(5, xa + (size_t)g * 3 * M * 32, 64);
                        _tile_zero(4); _tile_dpbf16ps(4, 5, 3); _tile_stored(4, cb[1], 64);
                    } else {
                        _tile_loadd(2, st, 64); _tile_loadd(1, xa + (size_t)g * 3 * M * 32, 64);
                        _tile_zero(0); _tile_dpbf16ps(0, 1, 2); _tile_stored(0, cb[0], 64);
                    }
                }
                if (g) {  // group g - 1's sums, scaled
                    const int gg = g - 1; const float* cc = cb[gg & 1];
                    __m512 s = _mm512_loadu_ps(sa + ((size_t)nb * KG + gg) * 16);
                    __m512 o = _mm512_loadu_ps(oa + ((size_t)nb * KG + gg) * 16);
                    for (int m = 0; m < M; m++) {
                        const float* c3 = cc + 48 * m;  // limbs 1, 2, 3: smallest first
                        __m512 p = _mm512_add_ps(_mm512_add_ps(_mm512_load_ps(c3 + 32),
                                                               _mm512_load_ps(c3 + 16)),
                                                 _mm512_load_ps(c3));
                        acc[m] = _mm512_fmadd_ps(s, p, acc[m]);
                        acc[m] = _mm512_fmadd_ps(o, _mm512_set1_ps(X[gg * M + m]), acc[m]);
                    }
                }
            }
            for (int m = 0; m < M; m++) _mm512_storeu_ps(y + (size_t)m * N + nb * 16, acc[m]);
        }
        _tile_release();
    }
}
// ---- int8: weights per (16 outputs, group) as 8 tile rows of 64 bytes (4 inputs of 16 outputs)
static void pack_i8(const unsigned char* j, signed char* qb, int N, int K) {
    int KG = K / 32;
    for (int nb = 0; nb < N / 16; nb++) for (int g = 0; g < KG; g++) for (int r = 0; r < 8; r++)
        for (int n = 0; n < 16; n++) for (int i = 0; i < 4; i++)
            qb[(((size_t)nb * KG + g) * 8 + r) * 64 + 4 * n + i] =
                j[(size_t)(nb * 16 + n) * K + g * 32 + 4 * r + i];
}
static void digits(const float* x, signed char* xa, float* qg, float* Xq, int M, int K) {
    int KG = K / 32;
    for (int m = 0; m < M; m++) for (int g = 0; g < KG; g++) {
        const float* xg = x + (size_t)m * K + g * 32;
        float amax = 0; for (int k = 0; k < 32; k++) amax = fmaxf(amax, fabsf(xg[k]));
        int E; frexpf(amax, &E);
        float q = amax > 0 ? ldexpf(1.0f, E - 22) : 1, iq = amax > 0 ? ldexpf(1.0f, 22 - E) : 1;
        long long Xi = 0;
        signed char* row = xa + ((size_t)g * 3 * M + 3 * m) * 32;
        for (int k = 0; k < 32; k++) {
            int r = (int)nearbyintf(xg[k] * iq); Xi += r;
            int d3 = ((r + 128) & 255) - 128, r2 = (r - d3) >> 8, d2 = ((r2 + 128) & 255) - 128;
            row[k] = (r2 - d2) >> 8; row[32 + k] = d2; row[64 + k] = d3;
        }
        qg[g * M + m] = q; Xq[g * M + m] = (float)Xi * q;
    }
}
static void amx_i8(const float* x, const signed char* qb, const float* sa, const float* oa,
                   float* y, int M, int N, int K, signed char* xa, float* qg, float* Xq) {
    int KG = K / 32;
    digits(x, xa, qg, Xq, M, K);
    #pragma omp parallel num_threads(2)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        int NB = N / 16, b0 = NB * t / T, b1 = NB * (t + 1) / T;
        tcfg c; memset(&c, 0, sizeof c); c.palette = 1;
        for (int i = 0; i < 4; i++) { c.rows[i] = 3 * M; c.colsb[i] = 64; }  // sums, 4 blocks
        c.rows[4] = 3 * M; c.colsb[4] = 32;                                  // digits
        c.rows[5] = c.rows[6] = 8; c.colsb[5] = c.colsb[6] = 64;             // weights
        _tile_loadconfig(&c);
        int32_t cb[4][16 * 16] __attribute__((aligned(64)));
        for (int nb = b0; nb < b1; nb += 4) {
            int nbk = b1 - nb < 4 ? b1 - nb : 4;
            __m512 acc[4][5];
            for (int b = 0; b < nbk; b++)
                for (int m = 0; m < M; m++) acc[b][m] = _mm512_setzero_ps();
            for (int g = 0; g < KG; g++) {
                _tile_loadd(4, xa + (size_t)g * 3 * M * 32, 32);
#define ONE(b, ct, bt) if (b < nbk) { \
                    _tile_loadd(bt, qb + (((size_t)(nb + b) * KG + g) * 8) * 64, 64); \
                    _tile_zero(ct); _tile_dpbssd(ct, 4, bt); _tile_stored(ct, cb[b], 64); }
                ONE(0, 0, 5) ONE(1, 1, 6) ONE(2, 2, 5) ONE(3, 3, 6)
#undef ONE
                for (int b = 0; b < nbk; b++) {
                    __m512 s = _mm512_loadu_ps(sa + ((size_t)(nb + b) * KG + g) * 16);
                    __m512 o = _mm512_loadu_ps(oa + ((size_t)(nb + b) * KG + g) * 16);
                    for (int m = 0; m < M; m++) {
                        const int32_t* cc = cb[b] + 48 * m;
                        const __m512 d1 = _mm512_cvtepi32_ps(_mm512_load_si512(cc)),
                                     d2 = _mm512_cvtepi32_ps(_mm512_load_si512(cc + 16)),
                                     d3 = _mm512_cvtepi32_ps(_mm512_load_si512(cc + 32));
                        __m512 p = _mm512_fmadd_ps(d1, _mm512_set1_ps(65536.0f),
                                                   _mm512_mul_ps(d2, _mm512_set1_ps(256.0f)));
                        p = _mm512_add_ps(p, d3);
                        const __m512 sq = _mm512_mul_ps(s, _mm512_set1_ps(qg[g * M + m]));
                        acc[b][m] = _mm512_fmadd_ps(sq, p, acc[b][m]);
                        acc[b][m] = _mm512_fmadd_ps(o, _mm512_set1_ps(Xq[g * M + m]), acc[b][m]);
                    }
                }
            }
            for (int b = 0; b < nbk; b++) for (int m = 0; m < M; m++)
                _mm512_storeu_ps(y + (size_t)m * N + (nb + b) * 16, acc[b][m]);
        }
        _tile_release();
    }
}
int main(int argc, char** argv) {
    if (syscall(SYS_arch_prctl, 0x1023, 18)) { printf("no AMX tile data permission\n"); return 1; }
    const int N = atoi(argv[1]), K = atoi(argv[2]), L = atoi(argv[3]), R = atoi(argv[4]);
    const int KG = K / 32;
    unsigned char *j = malloc((size_t)N * K), *j0 = malloc((size_t)N * K);
    unsigned char **qp = malloc(L * sizeof *qp), **qa = malloc(L * sizeof *qa);
    signed char** qb = malloc(L * sizeof *qb);
    float **s = malloc(L * sizeof *s), **o = malloc(L * sizeof *o);
    float **sa = malloc(L * sizeof *sa), **oa = malloc(L * sizeof *oa);
    srand(1);
    for (int l = 0; l < L; l++) {
        qp[l] = malloc((size_t)N * K / 2); qa[l] = malloc((size_t)N * K / 2);
        qb[l] = aligned_alloc(64, (size_t)N * K);
        s[l] = malloc(4 * N * KG); o[l] = malloc(4 * N * KG);
        sa[l] = malloc(4 * N * KG); oa[l] = malloc(4 * N * KG);
        for (size_t i = 0; i < (size_t)N * K; i++) j[i] = rand() & 15;
        if (!l) memcpy(j0, j, (size_t)N * K);
        for (int i = 0; i < N * KG; i++)
            s[l][i] = rand() / (float)RAND_MAX * 0.01f, o[l][i] = -rand() / (float)RAND_MAX * 0.08f;
        for (int n = 0; n < N; n++) for (int g = 0; g < KG; g++) for (int i = 0; i < 16; i++)
            qp[l][(size_t)n * K / 2 + g * 16 + i] =
                j[(size_t)n * K + g * 32 + i] | (j[(size_t)n * K + g * 32 + 16 + i] << 4);
        pack_bf(j, qa[l], N, K); pack_i8(j, qb[l], N, K);
        for (int nb = 0; nb < N / 16; nb++)
        for (int g = 0; g < KG; g++) for (int i = 0; i < 16; i++) {
            sa[l][((size_t)nb * KG + g) * 16 + i] = s[l][(size_t)(nb * 16 + i) * KG + g];
            oa[l][((size_t)nb * KG + g) * 16 + i] = o[l][(size_t)(nb * 16 + i) * KG + g];
        }
    }
    float* x = malloc(4 * 8 * K);  // activations with outliers (x60) and small entries (x1e-3)
    for (int i = 0; i < 8 * K; i++) {
        x[i] = (rand() / (float)RAND_MAX - 0.5f) * 4;
        if (i % 97 == 0) x[i] *= 60;
        if (i % 13 == 0) x[i] *= 1e-3f;
    }
    float *y0 = malloc(4 * 8 * N), *y1 = malloc(4 * 8 * N);
    float *y2 = malloc(4 * 8 * N), *yb = malloc(4 * 8 * N);
    uint16_t* xa = aligned_alloc(64, 2 * 8 * 3 * K + 64);
    signed char* xi = aligned_alloc(64, 8 * 3 * K + 64);
    float *X = malloc(4 * 8 * KG), *qg = malloc(4 * 8 * KG), *Xq = malloc(4 * 8 * KG);
    rows_mm_q4(x, qp[0], s[0], o[0], y0, 5, N, K, 32, 2);
    amx_bf(x, qa[0], sa[0], oa[0], y1, 5, N, K, xa, X);
    amx_i8(x, qb[0], sa[0], oa[0], y2, 5, N, K, xi, qg, Xq);
    double e[3] = {0, 0, 0};
    for (int m = 0; m < 5; m++) for (int n = 0; n < N; n++) {
        double r = 0, a = 0;
        for (int k = 0; k < K; k++) {
            const int gi = n * KG + k / 32;
            double w = (float)(j0[(size_t)n * K + k] * s[0][gi] + o[0][gi]);
            r += (double)x[m * K + k] * w; a += fabs((double)x[m * K + k] * w);
        }
        e[0] = fmax(e[0], fabs(y0[m * N + n] - r) / a);
        e[1] = fmax(e[1], fabs(y1[m * N + n] - r) / a);
        e[2] = fmax(e[2], fabs(y2[m * N + n] - r) / a);
    }
    rows_mm_q4(x, qp[0], s[0], o[0], yb, 1, N, K, 32, 2);
    int se = !memcmp(yb, y0, 4 * N);
    amx_bf(x, qa[0], sa[0], oa[0], yb, 1, N, K, xa, X);
    int sb = !memcmp(yb, y1, 4 * N);
    amx_i8(x, qb[0], sa[0], oa[0], yb, 1, N, K, xi, qg, Xq);
    int si = !memcmp(yb, y2, 4 * N);
    printf("error %.3g %.3g %.3g\nalone %d %d %d\n", e[0], e[1], e[2], se, sb, si);
    for (int M = 1; M <= 5; M++) {
        double t[3] = {1e9, 1e9, 1e9};
        for (int rep = 0; rep < 3; rep++) {
            double t0 = now();
            for (int r = 0; r < R; r++) for (int l = 0; l < L; l++)
                rows_mm_q4(x, qp[l], s[l], o[l], y0, M, N, K, 32, 2);
            double t1 = now();
            for (int r = 0; r < R; r++) for (int l = 0; l < L; l++)
                amx_bf(x, qa[l], sa[l], oa[l], y1, M, N, K, xa, X);
            double t2 = now();
            for (int r = 0; r < R; r++) for (int l = 0; l < L; l++)
                amx_i8(x, qb[l], sa[l], oa[l], y2, M, N, K, xi, qg, Xq);
            double t3 = now();
            t[0] = fmin(t[0], (t1 - t0) / R); t[1] = fmin(t[1], (t2 - t1) / R);
            t[2] = fmin(t[2], (t3 - t2) / R);
        }
        printf("rows %d %.4f %.4f %.4f\n", M, t[0] * 1e3, t[1] * 1e3, t[2] * 1e3);
    }
    return 0;
}
