/* faithful_dump.c - run the faithfulness functions (vit.h, "Faithfulness") on the cases
 * of a request file and write what they return, for test_faithful.py.
 *
 *   faithful_dump REQUESTS RESULTS
 *
 * Both files are a stream of records in this machine's byte order: an int32 op, then
 * its arguments (i32 int32, f32 float32, u8 bytes, u64 uint64, f64 double):
 *   1 order     i32 n, most_first; f32 map[n]          -> i32 status; i32 order[n]
 *   2 count     i32 n_max, steps_max                   -> u16 vit_perturb_count(s, ns, n)
 *               for n 0 .. n_max, ns 1 .. steps_max, s 0 .. ns, in that nesting
 *   3 mix       i32 gh, gw, P, has_fill, k, in_place; f32 base[3*Sh*Sw];
 *               f32 fill[3*Sh*Sw] when has_fill; i32 n_order; i32 order[n_order]
 *                                                      -> f32 out[3*Sh*Sw]
 *   4 blur      i32 C, H, W, radius; f32 sigma; f32 in[C*H*W]
 *                                                      -> i32 status; f32 out[C*H*W]
 *   5 auc       i32 n; f32 y[n]                        -> f64
 *   6 map2p     i32 gh, gw, P, pixels; f32 map[pixels ? Sh*Sw : N]  -> f32 out[N]
 *   7 mask2p    i32 gh, gw, P; u8 mask[Sh*Sw]          -> i32 count; u8 out[N]
 *   8 local     i32 n; f32 map[n]; u8 mask[n]          -> f64 pointing, i32 its status,
 *               f64 energy, i32 status, f64 top-k IoU, i32 status
 *   9 spearman  i32 n; f32 a[n], b[n]                  -> f64
 *  10 random    i32 n; u64 seed                        -> f32 out[n]
 *  11 gaussian  i32 gh, gw; f32 sigma_frac             -> f32 out[gh*gw]
 * Sh = gh*P, Sw = gw*P, N = gh*gw. A malformed request file: a message, exit 2. */
#include "vit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *in_f, *out_f;

static void die(const char *what) {
    fprintf(stderr, "faithful_dump: %s\n", what);
    exit(2);
}

static void get(void *p, size_t bytes) {
    if (bytes && fread(p, 1, bytes, in_f) != bytes) die("request file cut short");
}

static void put(const void *p, size_t bytes) {
    if (bytes && fwrite(p, 1, bytes, out_f) != bytes) die("cannot write the results");
}

static int get_i32(void) {
    int32_t v;
    get(&v, sizeof v);
    return v;
}

static void put_i32(int v) {
    int32_t w = v;
    put(&w, sizeof w);
}

static void put_f64(double v) {
    put(&v, sizeof v);
}

/* A malloc'd array of n elements of `size` bytes read from the request; n in [0, 2^28]. */
static void *get_array(long n, size_t size) {
    if (n < 0 || n > (1L << 28)) die("array size out of range");
    void *p = malloc((size_t)n * size + 1);
    if (!p) die("out of memory");
    get(p, (size_t)n * size);
    return p;
}

static VitConfig grid(int gh, int gw, int P) {
    if (gh < 1 || gw < 1 || P < 1 || gh > 4096 || gw > 4096 || P > 1024) die("grid out of range");
    VitConfig c;
    memset(&c, 0, sizeof c);
    c.grid_h = gh, c.grid_w = gw, c.patch_size = P, c.n_patches = gh * gw;
    c.image_h = gh * P, c.image_w = gw * P;
    return c;
}

static void op_order(void) {
    int n = get_i32(), most_first = get_i32();
    float *map = get_array(n, sizeof *map);
    int *order = calloc((size_t)(n > 0 ? n : 1), sizeof *order);
    if (!order) die("out of memory");
    put_i32(vit_patch_order(order, map, n, most_first, NULL));
    put(order, (size_t)(n > 0 ? n : 0) * sizeof *order);
    free(map), free(order);
}

static void op_count(void) {
    int n_max = get_i32(), steps_max = get_i32();
    if (n_max < 0 || n_max > 1000 || steps_max < 1 || steps_max > 1000) die("count range");
    uint16_t *row = malloc(((size_t)steps_max + 1) * sizeof *row);
    if (!row) die("out of memory");
    for (int n = 0; n <= n_max; n++)
        for (int ns = 1; ns <= steps_max; ns++) {
            for (int s = 0; s <= ns; s++) row[s] = (uint16_t)vit_perturb_count(s, ns, n);
            put(row, ((size_t)ns + 1) * sizeof *row);
        }
    free(row);
}

static void op_mix(void) {
    int gh = get_i32(), gw = get_i32(), P = get_i32(), has_fill = get_i32(), k = get_i32(),
        in_place = get_i32();
    VitConfig c = grid(gh, gw, P);
    long size = 3L * c.image_h * c.image_w;
    float *base = get_array(size, sizeof *base);
    float *fill = has_fill ? get_array(size, sizeof *fill) : NULL;
    int n_order = get_i32();
    int *order = get_array(n_order, sizeof *order);
    if (k > n_order) die("mix: k > n_order");
    float *out = in_place ? base : malloc((size_t)size * sizeof *out);
    if (!out) die("out of memory");
    vit_patch_mix(out, base, fill, &c, order, k);
    put(out, (size_t)size * sizeof *out);
    if (!in_place) free(out);
    free(base), free(fill), free(order);
}

static void op_blur(void) {
    int C = get_i32(), H = get_i32(), W = get_i32(), radius = get_i32();
    float sigma;
    get(&sigma, sizeof sigma);
    if (C < 1 || H < 1 || W < 1 || (long)C * H * W > (1L << 26)) die("blur size");
    long size = (long)C * H * W;
    float *img = get_array(size, sizeof *img), *out = calloc((size_t)size, sizeof *out);
    if (!out) die("out of memory");
    VitError err = {0};
    VitStatus st = vit_blur(out, img, C, H, W, sigma, radius, &err);
    if (st) fprintf(stderr, "  blur: %s\n", err.msg);
    put_i32(st);
    put(out, (size_t)size * sizeof *out);
    free(img), free(out);
}

static void op_auc(void) {
    int n = get_i32();
    float *y = get_array(n, sizeof *y);
    put_f64(vit_auc(y, n));
    free(y);
}

static void op_map2p(void) {
    int gh = get_i32(), gw = get_i32(), P = get_i32(), pixels = get_i32();
    VitConfig c = grid(gh, gw, P);
    float *map = get_array(pixels ? (long)c.image_h * c.image_w : c.n_patches, sizeof *map);
    float *out = malloc((size_t)c.n_patches * sizeof *out);
    if (!out) die("out of memory");
    vit_map_to_patches(out, map, &c, pixels);
    put(out, (size_t)c.n_patches * sizeof *out);
    free(map), free(out);
}

static void op_mask2p(void) {
    int gh = get_i32(), gw = get_i32(), P = get_i32();
    VitConfig c = grid(gh, gw, P);
    uint8_t *mask = get_array((long)c.image_h * c.image_w, 1), *out = malloc((size_t)c.n_patches);
    if (!out) die("out of memory");
    put_i32(vit_mask_to_patches(out, mask, &c));
    put(out, (size_t)c.n_patches);
    free(mask), free(out);
}

static void op_local(void) {
    int n = get_i32();
    float *map = get_array(n, sizeof *map);
    uint8_t *mask = get_array(n, 1);
    VitError err = {0};
    put_f64(vit_pointing_game(map, mask, n, &err));
    put_i32(err.code);
    err = (VitError){0};
    put_f64(vit_energy_pointing(map, mask, n, &err));
    put_i32(err.code);
    err = (VitError){0};
    put_f64(vit_topk_iou(map, mask, n, &err));
    put_i32(err.code);
    free(map), free(mask);
}

static void op_spearman(void) {
    int n = get_i32();
    float *a = get_array(n, sizeof *a), *b = get_array(n, sizeof *b);
    put_f64(vit_spearman(a, b, n));
    free(a), free(b);
}

static void op_random(void) {
    int n = get_i32();
    uint64_t seed;
    get(&seed, sizeof seed);
    if (n < 0 || n > (1 << 26)) die("random size");
    float *out = malloc((size_t)n * sizeof *out + 1);
    if (!out) die("out of memory");
    vit_random_map(out, n, seed);
    put(out, (size_t)n * sizeof *out);
    free(out);
}

static void op_gaussian(void) {
    int gh = get_i32(), gw = get_i32();
    float sigma_frac;
    get(&sigma_frac, sizeof sigma_frac);
    VitConfig c = grid(gh, gw, 1);
    float *out = malloc((size_t)c.n_patches * sizeof *out);
    if (!out) die("out of memory");
    vit_gaussian_map(out, gh, gw, sigma_frac);
    put(out, (size_t)c.n_patches * sizeof *out);
    free(out);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fputs("usage: faithful_dump REQUESTS RESULTS\n", stderr);
        return 2;
    }
    if (!(in_f = fopen(argv[1], "rb"))) die("cannot open the request file");
    if (!(out_f = fopen(argv[2], "wb"))) die("cannot create the results file");
    void (*const ops[])(void) = {NULL,     op_order,    op_count,  op_mix,
                                 op_blur,  op_auc,      op_map2p,  op_mask2p,
                                 op_local, op_spearman, op_random, op_gaussian};
    int32_t op;
    long n_records = 0;
    while (fread(&op, sizeof op, 1, in_f) == 1) {
        if (op < 1 || op >= (int32_t)(sizeof ops / sizeof *ops)) die("unknown op");
        ops[op]();
        n_records++;
    }
    if (ferror(in_f) || fclose(out_f)) die("read or write error");
    fclose(in_f);
    printf("faithful_dump: %ld records\n", n_records);
    return 0;
}
