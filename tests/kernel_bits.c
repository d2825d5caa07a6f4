// The kernel's outputs over fixed inputs, for comparing builds bit for bit (tests/test_builds.py):
// each product kind, whole decoder layers (fp32, int8, 4-bit, bf16, fp16 and 4-bit grids rounded
// to bf16; head sizes 64 and 32), a tiny two-layer target's logits and their argmax, and expf.
// Built with the kernel's own sources (-I their folder) for each instruction set, run natively or
// under qemu-user; prints one line per section: its name and an FNV-1a hash of its output bytes.
#include "kernel.c"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static uint64_t state = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void) {  // xorshift64*: the same numbers on every machine
    state ^= state >> 12; state ^= state << 25; state ^= state >> 27;
    return (uint32_t)((state * 0x2545f4914f6cdd1dull) >> 32);
}
// a float of at most 12 significant bits in [-a, a] (exact in every format read below)
static float rnd(float a) { return a * ((float)(int)(next_u32() % 4097) - 2048.0f) / 2048.0f; }
static float* floats(size_t n, float a) {
    float* p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = rnd(a);
    return p;
}
static uint16_t* halves(const float* x, size_t n, int fmt) {  // exact: x has 12 bits at most
    uint16_t* p = malloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) p[i] = f_half(x[i], fmt);
    return p;
}
static void emit(const char* name, const void* p, size_t bytes) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < bytes; i++) h = (h ^ ((const unsigned char*)p)[i]) * 0x100000001b3ull;
    printf("%s %016llx\n", name, (unsigned long long)h);
}
enum { T = 2 };  // threads
static void products(void) {
    const int N = 37, K = 160, G = 32;  // K: 10 lanes' worth, no tail for 4-bit; fp32 K + 5
    float* w = floats((size_t)N * (K + 5), 0.5f);
    float* s = floats((size_t)N * (K / G), 0.01f), * o = floats((size_t)N * (K / G), 0.1f);
    signed char* q = malloc((size_t)N * K); unsigned char* p4 = malloc((size_t)N * K / 2);
    for (int i = 0; i < N * K; i++) q[i] = (signed char)(next_u32() % 256 - 128);
    for (int i = 0; i < N * K / 2; i++) p4[i] = (unsigned char)(next_u32() % 256);
    for (int M = 1; M <= 8; M++) {
        float* x = floats((size_t)M * (K + 5), 1.0f), * y = malloc((size_t)M * N * sizeof(float));
        char name[64];
        rows_mm(x, w, y, M, N, K + 5, T); snprintf(name, 64, "mm-fp32-M%d", M);
        emit(name, y, (size_t)M * N * 4);
        for (int fmt = BF16; fmt <= F16; fmt++) {
            uint16_t* wh = halves(w, (size_t)N * (K + 5), fmt);
            rows_mm_h(x, wh, y, M, N, K + 5, fmt, T);
            snprintf(name, 64, "mm-%s-M%d", fmt == BF16 ? "bf16" : "fp16", M);
            emit(name, y, (size_t)M * N * 4); free(wh);
            rows_mm_q4h(x, p4, s, o, y, M, N, K, G, fmt, T);
            snprintf(name, 64, "mm-q4%s-M%d", fmt == BF16 ? "bf16" : "fp16", M);
            emit(name, y, (size_t)M * N * 4);
        }
        rows_mm_q8(x, q, s, o, y, M, N, K, G, T); snprintf(name, 64, "mm-int8-M%d", M);
        emit(name, y, (size_t)M * N * 4);
        rows_mm_q4(x, p4, s, o, y, M, N, K, G, T); snprintf(name, 64, "mm-int4-M%d", M);
        emit(name, y, (size_t)M * N * 4);
        free(x); free(y);
    }
    free(w); free(s); free(o); free(q); free(p4);
}
// one layer's weights: fp32 (bits 0), int8 (8), 4-bit (4), 16-bit (BF16, F16) or 4-bit grids
// rounded to bf16 (Q4_BF16); sizes d, I, heads H, Hkv of size hd
typedef struct { const float* w[11]; const float* bs[4]; const float* qs[11]; const float* qo[11];
                 int bits; } layer_w;
static layer_w make_layer(int d, int I, int H, int Hkv, int hd, int bits, int G) {
    layer_w L; memset(&L, 0, sizeof L); L.bits = bits;
    const int fmt = layer_fmt(bits);
    const int rows[9] = {0, H * hd, Hkv * hd, Hkv * hd, d, 0, I, I, d};  // (N of each product)
    const int cols[9] = {0, d, d, d, H * hd, 0, d, d, I};
    for (int i = 0; i < 9; i++) {
        if (i == 0 || i == 5) {  // norms: around 1
            float* n = floats((size_t)d, 0.25f);
            for (int j = 0; j < d; j++) n[j] += 1.0f;
            L.w[i] = fmt ? (const float*)halves(n, (size_t)d, fmt) : n;
            continue;
        }
        const size_t n = (size_t)rows[i] * cols[i];
        const float a = 1.0f / (float)cols[i];
        if (bits == 8 || bits == 4 || bits >= Q4_BF16) {
            float* s = floats(n / G, a / 4), * o = floats(n / G, a);
            if (bits >= Q4_BF16) for (size_t j = 0; j < n / G; j++)  // scales of 8 bits (a grid)
                s[j] = half_f(f_half(s[j], BF16), BF16), o[j] = half_f(f_half(o[j], BF16), BF16);
            unsigned char* q = malloc(bits == 8 ? n : n / 2);
            for (size_t j = 0; j < (bits == 8 ? n : n / 2); j++)
                q[j] = (unsigned char)(next_u32() % 256);
            L.w[i] = (const float*)q; L.qs[i] = s; L.qo[i] = o;
        } else {
            float* v = floats(n, a);
            L.w[i] = fmt ? (const float*)halves(v, n, fmt) : v;
        }
    }
    L.bs[0] = fmt ? (const float*)halves(floats((size_t)H * hd, 0.1f), (size_t)H * hd, fmt)
                  : floats((size_t)H * hd, 0.1f);  // a q bias (Qwen2's kind)
    return L;
}
static void layers(void) {
    const int M = 3, S = 40, G = 32, d = 128, I = 192;
    const int kinds[6] = {0, 8, 4, BF16, F16, Q4_BF16};
    const char* names[6] = {"fp32", "int8", "int4", "bf16", "fp16", "q4bf16"};
    for (int hk = 0; hk < 2; hk++) {
        const int hd = hk ? 32 : 64, H = d / hd, Hkv = H / 2 ? H / 2 : 1;
        for (int k = 0; k < 6; k++) {
            const int bits = kinds[k], fmt = layer_fmt(bits);
            layer_w L = make_layer(d, I, H, Hkv, hd, bits, G);
            float* x = floats((size_t)M * d, 1.0f);
            if (fmt) for (int i = 0; i < M * d; i++) x[i] = round_to(x[i], fmt);
            float* cs = malloc((size_t)M * hd * 4), * sn = malloc((size_t)M * hd * 4);
            for (int m = 0; m < M; m++) for (int i = 0; i < hd; i++) {
                const float t = (float)(30 + m) / powf(10000.0f, (float)(i % (hd / 2)) / (hd / 2));
                cs[m * hd + i] = round_to(cosf(t), fmt); sn[m * hd + i] = round_to(sinf(t), fmt);
            }
            const size_t cn = (size_t)Hkv * S * hd;
            float* kf = floats(cn, 1.0f), * vf_ = floats(cn, 1.0f);
            void* kc = fmt ? (void*)halves(kf, cn, fmt) : (void*)kf;
            void* vc = fmt ? (void*)halves(vf_, cn, fmt) : (void*)vf_;
            int64_t slots[3] = {30, 31, 32};
            float* bias = malloc((size_t)M * S * 4);
            for (int m = 0; m < M; m++) for (int j = 0; j < S; j++)  // causal, a few closed
                bias[m * S + j] = j <= slots[m] && j % 7 != 3 ? 0.0f : -3.4028234663852886e38f;
            float* work = calloc((size_t)M * (d + 2 * (H + Hkv) * hd + 2 * I) + M * H * (S + 3)
                                 + T * S, sizeof(float));
            const int qb = bits == 8 || bits == 4 || bits >= Q4_BF16;
            llama_layer(x, M, M, d, I, H, Hkv, hd, 1e-5f, 1.0f / sqrtf((float)hd), L.w, L.bs,
                        qb ? L.qs : 0, qb ? L.qo : 0, G, bits, cs, sn, kc, vc, S, slots, bias,
                        work, T);
            char name[64]; snprintf(name, 64, "layer-%s-hd%d", names[k], hd);
            emit(name, x, (size_t)M * d * 4);
            snprintf(name, 64, "cache-%s-hd%d", names[k], hd);
            emit(name, kc, cn * (fmt ? 2 : 4));
        }
    }
}
static void target(void) {  // two fp32 layers, the final norm, an int8 head: logits and argmax
    const int M = 4, S = 24, G = 32, d = 128, I = 256, H = 2, Hkv = 1, hd = 64, V = 300;
    layer_w L[2] = {make_layer(d, I, H, Hkv, hd, 0, G), make_layer(d, I, H, Hkv, hd, 4, G)};
    float* x = floats((size_t)M * d, 1.0f), * nw = floats((size_t)d, 0.25f);
    float* cs = malloc((size_t)M * hd * 4), * sn = malloc((size_t)M * hd * 4);
    for (int i = 0; i < M * hd; i++) cs[i] = cosf((float)i / 7), sn[i] = sinf((float)i / 7);
    float* kc[2] = {floats((size_t)S * hd, 1.0f), floats((size_t)S * hd, 1.0f)};
    float* vc[2] = {floats((size_t)S * hd, 1.0f), floats((size_t)S * hd, 1.0f)};
    int64_t slots[4] = {10, 11, 12, 13};
    float* bias = malloc((size_t)M * S * 4);
    for (int m = 0; m < M; m++) for (int j = 0; j < S; j++)
        bias[m * S + j] = j <= slots[m] ? 0.0f : -3.4028234663852886e38f;
    float* work = calloc((size_t)M * (d + 2 * (H + Hkv) * hd + 2 * I) + M * H * (S + 3) + T * S,
                         sizeof(float));
    for (int l = 0; l < 2; l++)
        llama_layer(x, M, M, d, I, H, Hkv, hd, 1e-5f, 0.125f, L[l].w, L[l].bs,
                    L[l].bits ? L[l].qs : 0, L[l].bits ? L[l].qo : 0, G, L[l].bits, cs, sn, kc[l],
                    vc[l], S, slots, bias, work, T);
    emit("target-hidden", x, (size_t)M * d * 4);
    float* h = malloc((size_t)M * d * 4);
    norm_rows(x, nw, h, M, d, d, 1e-5f, 0);
    signed char* q = malloc((size_t)V * d);
    float* s = floats((size_t)V * d / G, 0.01f), * o = calloc((size_t)V * d / G, 4);
    for (int i = 0; i < V * d; i++) q[i] = (signed char)(next_u32() % 255 - 127);
    float* y = malloc((size_t)M * V * 4);
    rows_mm_q8(h, q, s, o, y, M, V, d, G, T);
    emit("target-logits", y, (size_t)M * V * 4);
    long long best[4];
    for (int m = 0; m < M; m++) {
        best[m] = 0;
        for (int i = 1; i < V; i++) if (y[m * V + i] > y[m * V + best[m]]) best[m] = i;
    }
    emit("target-argmax", best, sizeof best);
}
static void exps(void) {  // expf's bits, the kernel's own where it has them (exp_rows)
    enum { n = 4099 };
    float* x = malloc(n * 4), * y = malloc(n * 4);
    for (int i = 0; i < n; i++) x[i] = -100.0f + 200.0f * (float)i / (n - 1) + rnd(0.01f);
    exp_rows(x, y, n); emit("exp", y, n * 4);
}
int main(void) {
    printf("isa %s\n", kernel_isa());
    products(); layers(); target(); exps();
    return 0;
}
