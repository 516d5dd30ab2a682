/* test_faithful.c - the faithfulness functions (engine/eval/faithful.c, vit.h "Faithfulness")
 * on cases worked by hand, their argument errors (a status, a message, no crash; run
 * under ASan/UBSan too), and exhaustive or brute-force checks that need no reference:
 * vit_perturb_count against the rational number it rounds for every n <= 300 and
 * n_steps <= 300, vit_patch_order against an O(n^2) rank count. Exits 1 on any failure. */
#include "vit.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, checks;

static void check(int ok, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void check(int ok, const char *fmt, ...) {
    checks++;
    if (ok) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failures++;
}

static int near(double a, double b, double tol) {
    return fabs(a - b) <= tol;
}

/* A config with only what the faithfulness functions read: a gh x gw grid of P px. */
static VitConfig grid(int gh, int gw, int P) {
    VitConfig c;
    memset(&c, 0, sizeof c);
    c.grid_h = gh, c.grid_w = gw, c.patch_size = P, c.n_patches = gh * gw;
    c.image_h = gh * P, c.image_w = gw * P;
    return c;
}

/* --- ordering ---------------------------------------------------------------- */

static void expect_order(const float *map, int n, int most_first, const int *want,
                         const char *what) {
    int order[64];
    VitError err = {0};
    VitStatus st = vit_patch_order(order, map, n, most_first, &err);
    int same = st == VIT_OK && memcmp(order, want, (size_t)n * sizeof *order) == 0;
    check(same, "patch order %s (most_first %d): status %s, got %d %d %d %d ...", what, most_first,
          vit_status_name(st), order[0], order[1 % n], order[2 % n], order[3 % n]);
}

static void test_order(void) {
    puts("vit_patch_order");
    /* the 2 x 2 grid of the brief: 0.1 0.4 / 0.4 0.2 */
    const float m[4] = {0.1f, 0.4f, 0.4f, 0.2f};
    expect_order(m, 4, 1, (const int[]){1, 2, 3, 0}, "2x2");
    expect_order(m, 4, 0, (const int[]){0, 3, 1, 2}, "2x2");
    const float flat[4] = {5, 5, 5, 5};
    expect_order(flat, 4, 1, (const int[]){0, 1, 2, 3}, "constant");
    expect_order(flat, 4, 0, (const int[]){0, 1, 2, 3}, "constant");
    const float zeros[3] = {0.0f, -0.0f, 0.0f}; /* -0 == +0: a tie */
    expect_order(zeros, 3, 1, (const int[]){0, 1, 2}, "signed zeros");
    const float one[1] = {3};
    expect_order(one, 1, 1, (const int[]){0}, "n 1");
    /* ties of two groups, most first: 3s (1, 4), 2s (0, 2, 5), then 1 (3) */
    const float ties[6] = {2, 3, 2, 1, 3, 2};
    expect_order(ties, 6, 1, (const int[]){1, 4, 0, 2, 5, 3}, "two tie groups");
    expect_order(ties, 6, 0, (const int[]){3, 0, 2, 5, 1, 4}, "two tie groups");
    const float neg[5] = {-1e30f, 1e30f, -3.5f, 0, 1e-30f};
    expect_order(neg, 5, 1, (const int[]){1, 4, 3, 2, 0}, "extremes");

    /* brute force: position of p = #{q before p}; random maps with many ties */
    uint64_t s = 12345;
    for (int trial = 0; trial < 200; trial++) {
        int n = 1 + trial % 64, order[64], ok = 1;
        float map[64];
        for (int i = 0; i < n; i++) {
            s = s * 6364136223846793005u + 1442695040888963407u;
            map[i] = (float)((s >> 33) % (uint64_t)(1 + trial % 7)) - 2.0f;
        }
        for (int mf = 0; mf < 2; mf++) {
            if (vit_patch_order(order, map, n, mf, NULL)) ok = 0;
            for (int i = 0; ok && i < n; i++) {
                int p = order[i], rank = 0;
                for (int q = 0; q < n; q++)
                    rank += mf ? map[q] > map[p] || (map[q] == map[p] && q < p)
                               : map[q] < map[p] || (map[q] == map[p] && q < p);
                ok = rank == i;
            }
        }
        check(ok, "patch order: brute-force ranks, trial %d (n %d)", trial, n);
    }

    /* errors */
    int order[4];
    VitError err = {0};
    const float bad[4] = {0, 1, NAN, 2};
    check(vit_patch_order(order, bad, 4, 1, &err) == VIT_ERR_ARG && strstr(err.msg, "map[2]"),
          "patch order: NaN at 2 -> VIT_ERR_ARG naming map[2] (\"%s\")", err.msg);
    const float inf[4] = {0, 1, 2, -INFINITY};
    check(vit_patch_order(order, inf, 4, 0, &err) == VIT_ERR_ARG && strstr(err.msg, "map[3]"),
          "patch order: -inf at 3 -> VIT_ERR_ARG naming map[3] (\"%s\")", err.msg);
    check(vit_patch_order(order, m, 0, 1, &err) == VIT_ERR_ARG && err.msg[0], "patch order: n 0");
    check(vit_patch_order(order, m, -4, 1, NULL) == VIT_ERR_ARG, "patch order: n < 0, err NULL");
    check(vit_patch_order(NULL, m, 4, 1, &err) == VIT_ERR_ARG, "patch order: order NULL");
    check(vit_patch_order(order, NULL, 4, 1, &err) == VIT_ERR_ARG, "patch order: map NULL");
    printf("  %s\n", err.msg);
}

/* --- perturbation counts, mixing ------------------------------------------------ */

static void test_count(void) {
    puts("vit_perturb_count");
    const int want196[11] = {0, 20, 39, 59, 78, 98, 118, 137, 157, 176, 196};
    for (int s = 0; s <= 10; s++)
        check(vit_perturb_count(s, 10, 196) == want196[s], "count(%d, 10, 196) = %d, want %d", s,
              vit_perturb_count(s, 10, 196), want196[s]);
    check(vit_perturb_count(1, 2, 5) == 3, "2.5 rounds up to 3");
    check(vit_perturb_count(1, 2, 1) == 1, "0.5 rounds up to 1");
    check(vit_perturb_count(1, 4, 2) == 1, "0.5 rounds up to 1 (1 of 4, n 2)");
    check(vit_perturb_count(1, 3, 1) == 0, "1/3 rounds down to 0");
    check(vit_perturb_count(-1, 10, 196) == 0 && vit_perturb_count(11, 10, 196) == 196,
          "step clamped to [0, n_steps]");
    check(vit_perturb_count(1, 0, 196) == 0 && vit_perturb_count(1, -3, 196) == 0 &&
              vit_perturb_count(1, 10, 0) == 0 && vit_perturb_count(1, 10, -5) == 0,
          "n_steps < 1 or n < 1: 0");
    check(vit_perturb_count(2147483647, 2147483647, 65536) == 65536 &&
              vit_perturb_count(1073741824, 2147483647, 2147483647) == 1073741824,
          "no overflow at INT_MAX");
    /* exhaustive: 2 * count - 1 <= 2 s n / n_steps < 2 * count + 1, i.e. count is the
     * nearest integer with .5 up, checked as products (no division) */
    long bad = 0, total = 0;
    for (int n = 1; n <= 300; n++)
        for (int ns = 1; ns <= 300; ns++) {
            int prev = 0;
            for (int s = 0; s <= ns; s++, total++) {
                long c = vit_perturb_count(s, ns, n), x2 = 2L * s * n;
                int ok = (2 * c - 1) * ns <= x2 && x2 < (2 * c + 1) * ns && c >= prev;
                if (s == 0) ok = ok && c == 0;
                if (s == ns) ok = ok && c == n;
                bad += !ok;
                prev = (int)c;
            }
        }
    check(bad == 0, "exhaustive n, n_steps <= 300: %ld of %ld wrong", bad, total);
    printf("  exhaustive: %ld counts, %ld wrong\n", total, bad);
}

static void test_mix(void) {
    puts("vit_patch_mix");
    /* a 2 x 3 grid of 2 px patches: 4 x 6 px */
    VitConfig c = grid(2, 3, 2);
    enum { PLANE = 4 * 6, SIZE = 3 * PLANE };
    float base[SIZE], fill[SIZE], out[SIZE];
    for (int i = 0; i < SIZE; i++) base[i] = 1000.0f + (float)i, fill[i] = -1.0f - (float)i;
    /* patches 4 (row 1, col 1: px rows 2-3, cols 2-3) and 2 (row 0, col 2: rows 0-1,
     * cols 4-5); 0 is not taken (k 2) */
    const int order[3] = {4, 2, 0};
    vit_patch_mix(out, base, fill, &c, order, 2);
    int ok = 1;
    for (int ch = 0; ch < 3; ch++)
        for (int y = 0; y < 4; y++)
            for (int x = 0; x < 6; x++) {
                int at = ch * PLANE + y * 6 + x;
                int in4 = y >= 2 && x >= 2 && x < 4, in2 = y < 2 && x >= 4;
                ok = ok && out[at] == (in4 || in2 ? fill[at] : base[at]);
            }
    check(ok, "patch mix: patches 4 and 2 from fill, the rest from base");
    vit_patch_mix(out, base, NULL, &c, order, 3);
    ok = 1;
    for (int ch = 0; ch < 3; ch++)
        for (int y = 0; y < 4; y++)
            for (int x = 0; x < 6; x++) {
                int at = ch * PLANE + y * 6 + x;
                int taken = (y >= 2 && x >= 2 && x < 4) || (y < 2 && x >= 4) || (y < 2 && x < 2);
                ok = ok && out[at] == (taken ? 0.0f : base[at]);
            }
    check(ok, "patch mix: fill NULL sets patches 4, 2, 0 to 0");
    /* in place, k 0, k > N, indices out of range */
    float inplace[SIZE];
    memcpy(inplace, base, sizeof base);
    vit_patch_mix(inplace, inplace, fill, &c, order, 2);
    vit_patch_mix(out, base, fill, &c, order, 2);
    check(!memcmp(inplace, out, sizeof out), "patch mix: out == base gives the same");
    vit_patch_mix(out, base, fill, &c, order, 0);
    check(!memcmp(out, base, sizeof out), "patch mix: k 0 copies base");
    const int all[6] = {5, 4, 3, 2, 1, 0};
    vit_patch_mix(out, base, fill, &c, all, 1000);
    check(!memcmp(out, fill, sizeof out), "patch mix: k > N takes every patch once");
    const int wild[3] = {-1, 6, 1 << 30};
    vit_patch_mix(out, base, fill, &c, wild, 3);
    check(!memcmp(out, base, sizeof out), "patch mix: indices outside [0, N) skipped");
}

/* --- blur, AUC ------------------------------------------------------------------ */

static void test_blur(void) {
    puts("vit_blur");
    enum { H = 5, W = 7 };
    float in[2 * H * W], out[2 * H * W];
    VitError err = {0};
    for (int i = 0; i < 2 * H * W; i++) in[i] = (float)((i * 37) % 11) - 4.5f;
    check(vit_blur(out, in, 2, H, W, 1.0f, 0, &err) == VIT_OK && !memcmp(in, out, sizeof in),
          "blur: radius 0 is the identity");
    /* a delta in the middle of channel 1 gives the kernel g[y] g[x] there; channel 0 0 */
    memset(in, 0, sizeof in);
    in[H * W + 2 * W + 3] = 1.0f;
    double e = exp(-0.5), g[3] = {e / (1 + 2 * e), 1 / (1 + 2 * e), e / (1 + 2 * e)};
    check(vit_blur(out, in, 2, H, W, 1.0f, 1, &err) == VIT_OK, "blur: delta (%s)", err.msg);
    double worst = 0.0;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            int dy = y - 2, dx = x - 3;
            double want = abs(dy) <= 1 && abs(dx) <= 1 ? g[dy + 1] * g[dx + 1] : 0.0;
            worst = fmax(worst, fabs(out[H * W + y * W + x] - want));
            worst = fmax(worst, fabs(out[y * W + x]));
        }
    check(worst < 1e-7, "blur: delta gives the kernel, max diff %.3g", worst);
    /* a constant image: the same inside, lower at the border by the taps that fall
     * outside (zero padding): corner = (g0 + g1)^2 of the 3 x 3 kernel */
    for (int i = 0; i < H * W; i++) in[i] = 2.0f;
    vit_blur(out, in, 1, H, W, 1.0f, 1, NULL);
    check(near(out[2 * W + 3], 2.0, 1e-6) &&
              near(out[0], 2.0 * (g[1] + g[2]) * (g[1] + g[2]), 1e-6),
          "blur: constant image: centre %g, corner %g", (double)out[2 * W + 3], (double)out[0]);
    /* a radius larger than the image: every tap that lands inside is used */
    float one[1] = {3.0f}, o1[1];
    check(vit_blur(o1, one, 1, 1, 1, 5.0f, 5, NULL) == VIT_OK, "blur: 1 x 1 image");
    double g5 = 0.0;
    for (int x = -5; x <= 5; x++) g5 += exp(-x * x / 50.0);
    check(near(o1[0], 3.0 / (g5 * g5), 1e-6), "blur: 1 x 1 px keeps the centre tap squared: %g",
          (double)o1[0]);

    struct {
        float *out;
        const float *in;
        int c, h, w;
        float sigma;
        int radius;
        const char *what;
    } bad[] = {
        {out, in, 1, H, W, 0.0f, 1, "sigma 0"},
        {out, in, 1, H, W, -1.0f, 1, "sigma < 0"},
        {out, in, 1, H, W, NAN, 1, "sigma NaN"},
        {out, in, 1, H, W, INFINITY, 1, "sigma inf"},
        {out, in, 1, H, W, 1.0f, -1, "radius < 0"},
        {out, in, 0, H, W, 1.0f, 1, "C 0"},
        {out, in, 1, 0, W, 1.0f, 1, "H 0"},
        {out, in, 1, H, -2, 1.0f, 1, "W < 0"},
        {out, in, 1, 20000, W, 1.0f, 1, "H too big"},
        {in, in, 1, H, W, 1.0f, 1, "out == in"},
        {NULL, in, 1, H, W, 1.0f, 1, "out NULL"},
        {out, NULL, 1, H, W, 1.0f, 1, "in NULL"},
        {out, in, 1, H, W, 1.0f, 1 << 20, "radius too big"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err = (VitError){0};
        VitStatus st = vit_blur(bad[i].out, bad[i].in, bad[i].c, bad[i].h, bad[i].w, bad[i].sigma,
                                bad[i].radius, &err);
        check(st == VIT_ERR_ARG && err.code == VIT_ERR_ARG && err.msg[0], "blur: %s -> %s (\"%s\")",
              bad[i].what, vit_status_name(st), err.msg);
        printf("  %-14s %s\n", bad[i].what, err.msg);
    }
}

static void test_auc(void) {
    puts("vit_auc");
    check(near(vit_auc((const float[]){0, 1}, 2), 0.5, 1e-15), "auc of 0, 1");
    check(near(vit_auc((const float[]){1, 1, 1}, 3), 1.0, 1e-15), "auc of 1, 1, 1");
    check(near(vit_auc((const float[]){0, 1, 0}, 3), 0.5, 1e-15), "auc of 0, 1, 0");
    check(near(vit_auc((const float[]){1, 0.5f, 0.25f, 0}, 4), 1.25 / 3, 1e-15),
          "auc of 1, .5, .25, 0 = 1.25 / 3");
    check(isnan(vit_auc((const float[]){1}, 1)) && isnan(vit_auc(NULL, 5)), "auc: n < 2, NULL");
}

/* --- localisation ------------------------------------------------------------------ */

static void test_patches(void) {
    puts("vit_map_to_patches, vit_mask_to_patches");
    VitConfig c = grid(2, 2, 2); /* 4 x 4 px */
    float px[16], out[4];
    for (int i = 0; i < 16; i++) px[i] = (float)i;
    vit_map_to_patches(out, px, &c, 1);
    /* patch 0: px 0 1 4 5 -> 10; 1: 2 3 6 7 -> 18; 2: 8 9 12 13 -> 42; 3: 10 11 14 15 -> 50 */
    check(out[0] == 10 && out[1] == 18 && out[2] == 42 && out[3] == 50,
          "map to patches: sums %g %g %g %g", (double)out[0], (double)out[1], (double)out[2],
          (double)out[3]);
    const float pm[4] = {0.5f, -1, 2, 3};
    vit_map_to_patches(out, pm, &c, 0);
    check(!memcmp(out, pm, sizeof pm), "map to patches: a patch map is copied");

    /* patch 0: 2 of 4 in (half: in); 1: 1 of 4 (out); 2: 4 of 4; 3: 0 */
    const uint8_t mask[16] = {1, 0, 1, 0, /**/ 0, 1, 0, 0, /**/ 1, 1, 0, 0, /**/ 1, 7, 0, 0};
    uint8_t pmask[4];
    int n = vit_mask_to_patches(pmask, mask, &c);
    check(n == 2 && pmask[0] == 1 && pmask[1] == 0 && pmask[2] == 1 && pmask[3] == 0,
          "mask to patches 2 px: %d in (%d %d %d %d)", n, pmask[0], pmask[1], pmask[2], pmask[3]);
    /* P 3: 5 of 9 is half or more, 4 of 9 is not */
    VitConfig c3 = grid(1, 2, 3);
    uint8_t m3[3 * 6] = {0}, p3[2];
    for (int i = 0; i < 5; i++) m3[(i / 3) * 6 + i % 3] = 1;     /* patch 0: 5 px */
    for (int i = 0; i < 4; i++) m3[(i / 3) * 6 + 3 + i % 3] = 1; /* patch 1: 4 px */
    n = vit_mask_to_patches(p3, m3, &c3);
    check(n == 1 && p3[0] == 1 && p3[1] == 0, "mask to patches 3 px: 5 of 9 in, 4 of 9 out");
}

static void test_localisation(void) {
    puts("pointing game, energy pointing game, top-k IoU");
    VitError err = {0};
    /* 2 x 2: the maximum, 0.9 at patch 0, is in the mask {0, 3} */
    const float m[4] = {0.9f, 0.1f, 0.5f, 0.3f};
    const uint8_t mask[4] = {1, 0, 0, 1}, other[4] = {0, 1, 1, 0}, none[4] = {0};
    check(vit_pointing_game(m, mask, 4, &err) == 1.0, "pointing: hit");
    check(vit_pointing_game(m, other, 4, &err) == 0.0, "pointing: miss");
    const float two[4] = {2, 1, 2, 0}; /* maxima 0 and 2, one of them in the mask */
    check(vit_pointing_game(two, mask, 4, &err) == 0.5, "pointing: 1 of 2 tied maxima in");
    const float flat[4] = {7, 7, 7, 7};
    const uint8_t three[4] = {1, 1, 0, 1};
    check(vit_pointing_game(flat, three, 4, &err) == 0.75, "pointing: constant map: mask's share");
    err = (VitError){0};
    check(isnan(vit_pointing_game(m, none, 4, &err)) && err.code == VIT_ERR_ARG,
          "pointing: empty mask -> NaN, VIT_ERR_ARG (\"%s\")", err.msg);
    const float nan[4] = {0, NAN, 1, 2};
    err = (VitError){0};
    check(isnan(vit_pointing_game(nan, mask, 4, &err)) && err.code == VIT_ERR_ARG &&
              strstr(err.msg, "map[1]"),
          "pointing: NaN map -> NaN naming map[1] (\"%s\")", err.msg);
    check(isnan(vit_pointing_game(NULL, mask, 4, NULL)) &&
              isnan(vit_pointing_game(m, NULL, 4, NULL)) &&
              isnan(vit_pointing_game(m, mask, 0, NULL)),
          "pointing: NULL, n 0");

    /* energy: positive mass 0.9 + 0.3 inside of 1.8 */
    check(near(vit_energy_pointing(m, mask, 4, &err), 1.2 / 1.8, 1e-7), "energy: 1.2 / 1.8");
    const float signs[4] = {-1, 2, 1, 1}; /* mask {0, 1}: (0 + 2) / 4 */
    const uint8_t first2[4] = {1, 1, 0, 0};
    check(vit_energy_pointing(signs, first2, 4, &err) == 0.5, "energy: negatives count as 0");
    const float nonpos[4] = {-1, 0, -2, -0.0f};
    err = (VitError){0};
    check(isnan(vit_energy_pointing(nonpos, mask, 4, &err)) && err.code == VIT_ERR_ARG,
          "energy: no positive value -> NaN (\"%s\")", err.msg);
    err = (VitError){0};
    check(isnan(vit_energy_pointing(m, none, 4, &err)) && err.code == VIT_ERR_ARG,
          "energy: empty mask -> NaN");

    /* IoU: k 2, top 2 = {0, 2}, mask {0, 3}: 1 / 3 */
    check(near(vit_topk_iou(m, mask, 4, &err), 1.0 / 3.0, 1e-15), "top-k IoU: 1/3");
    check(vit_topk_iou(m, (const uint8_t[]){1, 0, 1, 0}, 4, &err) == 1.0, "top-k IoU: exact");
    check(vit_topk_iou(m, (const uint8_t[]){0, 1, 0, 0}, 4, &err) == 0.0, "top-k IoU: disjoint");
    /* ties: constant map, top 2 = {0, 1} (lower index first); mask {1, 2}: 1 / 3 */
    check(near(vit_topk_iou(flat, (const uint8_t[]){0, 1, 1, 0}, 4, &err), 1.0 / 3.0, 1e-15),
          "top-k IoU: ties, lower index first");
    check(vit_topk_iou(m, (const uint8_t[]){1, 1, 1, 1}, 4, &err) == 1.0, "top-k IoU: full mask");
    err = (VitError){0};
    check(isnan(vit_topk_iou(m, none, 4, &err)) && err.code == VIT_ERR_ARG, "top-k IoU: empty");
    err = (VitError){0};
    const float inf[4] = {0, 1, INFINITY, 2};
    check(isnan(vit_topk_iou(inf, mask, 4, &err)) && strstr(err.msg, "map[2]"),
          "top-k IoU: inf names map[2] (\"%s\")", err.msg);
}

/* --- Spearman, baselines ------------------------------------------------------------ */

static void test_spearman(void) {
    puts("vit_spearman");
    const float a[4] = {1, 2, 3, 4}, b[4] = {1, 3, 2, 4};
    check(near(vit_spearman(a, b, 4), 0.8, 1e-15), "spearman: 1 - 6*2/(4*15) = 0.8, got %.17g",
          vit_spearman(a, b, 4));
    const float t[4] = {1, 2, 2, 3};
    check(near(vit_spearman(t, a, 4), sqrt(0.9), 1e-15),
          "spearman: ranks 1, 2.5, 2.5, 4 against 1..4: sqrt(0.9), got %.17g",
          vit_spearman(t, a, 4));
    const float mono[4] = {-5, 0.5f, 3, 1e6f};
    check(vit_spearman(mono, a, 4) == 1.0, "spearman: monotone, not linear: 1");
    const float rev[4] = {4, 3, 2, 1};
    check(vit_spearman(rev, a, 4) == -1.0, "spearman: reversed: -1");
    const float flat[4] = {2, 2, 2, 2};
    check(isnan(vit_spearman(flat, a, 4)) && isnan(vit_spearman(a, flat, 4)),
          "spearman: constant -> NaN");
    const float nan[4] = {1, NAN, 2, 3};
    check(isnan(vit_spearman(nan, a, 4)) && isnan(vit_spearman(a, a, 1)) &&
              isnan(vit_spearman(NULL, a, 4)),
          "spearman: NaN value, n 1, NULL -> NaN");
}

static void test_top_iou(void) {
    puts("vit_top_iou");
    VitError err = {0};
    const float a[10] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, b[10] = {0, 8, 9, 1, 2, 3, 4, 5, 6, 7};
    /* k = floor(0.3 * 10 + 0.5) = 3: a's top {0, 1, 2}, b's {2, 1, 9}: 2 of 4 */
    check(vit_top_iou(a, b, 10, 0.3, &err) == 0.5, "top IoU: {0,1,2} vs {2,1,9}: 2/4, got %.17g",
          vit_top_iou(a, b, 10, 0.3, &err));
    check(vit_top_iou(a, a, 10, 0.3, &err) == 1.0, "top IoU: a map with itself: 1");
    /* k = floor(0.1 * 10 + 0.5) = 1: {0} vs {2} */
    check(vit_top_iou(a, b, 10, 0.1, &err) == 0.0, "top IoU: disjoint tops: 0");
    check(vit_top_iou(a, b, 10, 1.0, &err) == 1.0, "top IoU: top_frac 1, every patch: 1");
    /* k = floor(0.04 * 10 + 0.5) = 0, clamped to 1 */
    check(vit_top_iou(a, a, 10, 0.04, &err) == 1.0, "top IoU: k clamped to 1");
    /* k = floor(0.25 * 10 + 0.5) = 3 (2.5 rounds up): ties at the cut go to the lower index:
     * t's top {1, 3, 5} (the 5s), not {5, 7, 9} */
    const float t[10] = {0, 5, 0, 5, 0, 5, 0, 5, 0, 5}, u[10] = {0, 9, 0, 8, 0, 7, 1, 1, 1, 1};
    check(vit_top_iou(t, u, 10, 0.25, &err) == 1.0,
          "top IoU: ties, lower index first: {1,3,5} both, got %.17g",
          vit_top_iou(t, u, 10, 0.25, &err));
    const float w[10] = {0, 0, 0, 0, 0, 9, 0, 9, 0, 9};
    check(vit_top_iou(t, w, 10, 0.25, &err) == 0.2, "top IoU: {1,3,5} vs {5,7,9}: 1/5, got %.17g",
          vit_top_iou(t, w, 10, 0.25, &err));
    /* a constant map has no top patches: NaN, as vit_spearman */
    const float flat[10] = {3, 3, 3, 3, 3, 3, 3, 3, 3, 3};
    err = (VitError){0};
    check(isnan(vit_top_iou(flat, a, 10, 0.1, &err)) && err.code == VIT_ERR_ARG &&
              strstr(err.msg, "map a is constant"),
          "top IoU: constant a -> NaN (\"%s\")", err.msg);
    err = (VitError){0};
    check(isnan(vit_top_iou(a, flat, 10, 0.1, &err)) && strstr(err.msg, "map b is constant"),
          "top IoU: constant b -> NaN (\"%s\")", err.msg);
    const float nan[10] = {0, 1, 2, NAN, 4, 5, 6, 7, 8, 9};
    err = (VitError){0};
    check(isnan(vit_top_iou(a, nan, 10, 0.1, &err)) && strstr(err.msg, "b[3]"),
          "top IoU: NaN names b[3] (\"%s\")", err.msg);
    check(isnan(vit_top_iou(a, b, 10, 0.0, NULL)) && isnan(vit_top_iou(a, b, 10, 1.5, NULL)) &&
              isnan(vit_top_iou(a, b, 10, NAN, NULL)) &&
              isnan(vit_top_iou(NULL, b, 10, 0.1, NULL)) && isnan(vit_top_iou(a, b, 0, 0.1, NULL)),
          "top IoU: top_frac 0, 1.5, NaN, NULL, n 0 -> NaN");
}

static void test_baselines(void) {
    puts("vit_random_map, vit_gaussian_map");
    float r[1000], r2[1000];
    vit_random_map(r, 1000, 0);
    /* splitmix64 from state 0: first output 0xe220a8397b1dcdaf (Vigna's reference) */
    check(r[0] == (float)0xe220a8 / 16777216.0f, "random: first value of seed 0, got %.9g",
          (double)r[0]);
    vit_random_map(r2, 1000, 0);
    check(!memcmp(r, r2, sizeof r), "random: same seed, same map");
    vit_random_map(r2, 1000, 1);
    check(memcmp(r, r2, sizeof r) != 0, "random: another seed, another map");
    double mean = 0.0;
    int in_range = 1;
    for (int i = 0; i < 1000; i++) mean += r[i], in_range = in_range && r[i] >= 0.0f && r[i] < 1.0f;
    mean /= 1000;
    check(in_range && near(mean, 0.5, 0.05), "random: in [0, 1), mean %.3f", mean);

    float g[9];
    vit_gaussian_map(g, 3, 3, 0.5f); /* s = 1.5 */
    double e1 = exp(-1.0 / 4.5), e2 = exp(-2.0 / 4.5);
    check(g[4] == 1.0f && near(g[1], e1, 1e-7) && near(g[3], e1, 1e-7) && near(g[0], e2, 1e-7) &&
              near(g[8], e2, 1e-7),
          "gaussian 3x3: centre 1, edge exp(-1/4.5), corner exp(-2/4.5)");
    float g2[8];
    vit_gaussian_map(g2, 2, 4, 1.0f); /* centre (0.5, 1.5), s = 2 */
    check(near(g2[1], exp(-0.5 / 8.0), 1e-7) && near(g2[0], exp(-2.5 / 8.0), 1e-7) &&
              g2[1] == g2[2] && g2[1] == g2[5] && g2[0] == g2[7],
          "gaussian 2x4: symmetric, d^2 0.5 and 2.5");
    vit_gaussian_map(g, 3, 3, 0.0f);
    int ok = 1;
    for (int i = 0; i < 9; i++) ok = ok && g[i] == (i == 4 ? 1.0f : 0.0f);
    check(ok, "gaussian: sigma_frac 0: 1 at the centre, 0 elsewhere");
    vit_gaussian_map(g, 3, 3, INFINITY);
    ok = 1;
    for (int i = 0; i < 9; i++) ok = ok && g[i] == 1.0f;
    check(ok, "gaussian: sigma_frac inf: all 1");
}

int main(void) {
    test_order();
    test_count();
    test_mix();
    test_blur();
    test_auc();
    test_patches();
    test_localisation();
    test_spearman();
    test_top_iou();
    test_baselines();
    printf("\n%d of %d checks failed\n", failures, checks);
    return failures ? 1 : 0;
}
