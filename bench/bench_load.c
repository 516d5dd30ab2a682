/* bench_load.c - vit_load of the same weights as .safetensors and as a PyTorch checkpoint
 * (.pth: torch.save's zip, read by engine/load/pth.c, named by a layout), best and median
 * of N runs each, alternating so that the page cache and the machine's load treat both
 * alike. bench/load.sh writes ViT-B/16 both ways (torchvision's names in the .pth).
 *
 * Then the zip's own read of B alone, as a floor: libzip opening it and reading every
 * entry (with its CRC-32 check) into one buffer, as pth.c does, without the pickle, the
 * checks or the NaN scan.
 *
 *   bench_load A.safetensors B.pth [N]      (default N 9) */
#include "vit.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zip.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Seconds for libzip to read every entry of path into memory; < 0 on error. */
static double zip_read_all(const char *path) {
    int fd = open(path, O_RDONLY);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb)) return -1;
    double t0 = now();
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return -1;
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *src = zip_source_buffer_create(map, (zip_uint64_t)sb.st_size, 0, &ze);
    zip_t *za = src ? zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze) : NULL;
    uint8_t *buf = malloc((size_t)sb.st_size);
    size_t at = 0;
    for (zip_int64_t i = 0; za && buf && i < zip_get_num_entries(za, 0); i++) {
        zip_file_t *f = zip_fopen_index(za, (zip_uint64_t)i, 0);
        zip_int64_t r;
        while (f && (r = zip_fread(f, buf + at, (zip_uint64_t)sb.st_size - at)) > 0)
            at += (size_t)r;
        if (f) zip_fclose(f);
    }
    if (za) zip_discard(za);
    free(buf);
    munmap(map, (size_t)sb.st_size);
    zip_error_fini(&ze);
    return at ? now() - t0 : -1;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_load A.safetensors B.pth [N]\n");
        return 2;
    }
    int n = argc > 3 ? atoi(argv[3]) : 9;
    if (n < 1 || n > 1000) n = 9;
    double *t = malloc(sizeof(double) * 2 * (size_t)n);
    if (!t) return 1;
    for (int i = 0; i < n; i++)
        for (int f = 0; f < 2; f++) {
            Vit vit;
            VitError err;
            double t0 = now();
            if (vit_load(&vit, argv[1 + f], NULL, &err)) {
                fprintf(stderr, "bench_load: %s\n", err.msg);
                return 1;
            }
            t[f * n + i] = now() - t0;
            vit_free(&vit);
        }
    for (int f = 0; f < 2; f++) {
        qsort(t + f * n, (size_t)n, sizeof *t, cmp);
        printf("%-40s best %7.1f ms  median %7.1f ms  (%d runs)\n", argv[1 + f], 1e3 * t[f * n],
               1e3 * t[f * n + n / 2], n);
    }
    for (int i = 0; i < n; i++) t[i] = zip_read_all(argv[2]);
    qsort(t, (size_t)n, sizeof *t, cmp);
    printf("%-40s best %7.1f ms  median %7.1f ms  (libzip reading every entry alone)\n", argv[2],
           1e3 * t[0], 1e3 * t[n / 2]);
    free(t);
    return 0;
}
