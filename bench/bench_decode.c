/* bench_decode.c - JPEG decoding time: stb_image against libjpeg-turbo (the engine's).
 *
 *   bench_decode PHOTO.jpg [RUNS]      (bench/decode.sh makes a 12-megapixel one with Pillow)
 *
 * Both decode the same bytes from memory to 8-bit RGB, in turns, RUNS times each (default
 * 7); then vit_image_load does the whole load (read the file, libjpeg-turbo, EXIF). Prints
 * the median and the fastest run of each, in ms, and the largest difference between the
 * two decoders' pixels. stb_image is compiled here, with its JPEG decoder, static: the
 * engine's copy is built without one. */
#include "bench.h"
#include "internal.h" /* vit_decode_jpeg */

#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_JPEG
#include <stb_image.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_RUNS 101

static void report(const char *what, double *t, int n) {
    bench_sort(t, n);
    printf("%-34s median %8.1f ms   fastest %8.1f ms   (%d runs)\n", what, t[n / 2], t[0], n);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: bench_decode PHOTO.jpg [RUNS]\n");
        return 2;
    }
    int runs = argc == 3 ? atoi(argv[2]) : 7;
    if (runs < 1 || runs > MAX_RUNS) runs = 7;
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    uint8_t *data = malloc((size_t)n);
    if (!data || fread(data, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "%s: cannot read\n", argv[1]);
        return 1;
    }
    fclose(f);
    double t_stb[MAX_RUNS], t_turbo[MAX_RUNS], t_load[MAX_RUNS];
    int max_diff = 0, w = 0, h = 0;
    for (int r = 0; r < runs; r++) {
        int c;
        double t0 = now_ms(CLOCK_MONOTONIC);
        uint8_t *a = stbi_load_from_memory(data, (int)n, &w, &h, &c, 3);
        t_stb[r] = now_ms(CLOCK_MONOTONIC) - t0;
        Decoded d = {0};
        VitError err;
        t0 = now_ms(CLOCK_MONOTONIC);
        VitStatus rc = vit_decode_jpeg(&d, argv[1], data, (size_t)n, VIT_MAX_IMAGE_PIXELS, &err);
        t_turbo[r] = now_ms(CLOCK_MONOTONIC) - t0;
        if (!a || rc) {
            fprintf(stderr, "decode failed: %s\n", rc ? err.msg : stbi_failure_reason());
            return 1;
        }
        if (r == 0)
            for (size_t i = 0; i < (size_t)w * h * 3; i++) {
                int diff = abs((int)a[i] - (int)d.rgb[i]);
                if (diff > max_diff) max_diff = diff;
            }
        stbi_image_free(a);
        free(d.rgb);
        VitImage img;
        t0 = now_ms(CLOCK_MONOTONIC);
        rc = vit_image_load(&img, argv[1], &err);
        t_load[r] = now_ms(CLOCK_MONOTONIC) - t0;
        vit_image_free(&img);
        if (rc) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
    }
    printf("%s: %dx%d px (%.1f MP), %ld bytes\n", argv[1], w, h, w * (double)h / 1e6, n);
    report("stb_image 2.27 (from memory)", t_stb, runs);
    report("libjpeg-turbo (from memory)", t_turbo, runs);
    report("vit_image_load (file, EXIF)", t_load, runs);
    printf("largest pixel difference stb_image vs libjpeg-turbo: %d levels\n", max_diff);
    free(data);
    return 0;
}
