/* npy.c - write float32 arrays as .npy files for the numpy side of the tests. */
#include "npy.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Write a float32 array as NPY v1.0: magic, version 1.0, u16 header length,
 * a Python dict literal padded with spaces and ending in '\n' so that the data
 * starts at a multiple of 64 bytes (numpy's format.py asks for 64). */
int npy_write(const char *dir, const char *name, const float *data, const int *shape, int ndim) {
    char path[4096], dict[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    const uint16_t one = 1;
    int little = *(const uint8_t *)&one == 1;
    int len = snprintf(dict, sizeof dict, "{'descr': '%cf4', 'fortran_order': False, 'shape': (",
                       little ? '<' : '>');
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        len += snprintf(dict + len, sizeof dict - (size_t)len, "%d, ", shape[i]);
        count *= (size_t)shape[i];
    }
    len += snprintf(dict + len, sizeof dict - (size_t)len, "), }");
    size_t total = 10 + (size_t)len + 1; /* magic(6) + version(2) + u16(2) + dict + '\n' */
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = (size_t)len + pad + 1;
    if (hlen > 65535 || (size_t)len + pad + 1 >= sizeof dict) return 0;
    memset(dict + len, ' ', pad);
    dict[hlen - 1] = '\n';

    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "npy: %s: %s\n", path, strerror(errno));
        return 0;
    }
    uint8_t pre[10] = {
        0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(hlen & 0xff), (uint8_t)(hlen >> 8)};
    int ok = fwrite(pre, 1, sizeof pre, f) == sizeof pre && fwrite(dict, 1, hlen, f) == hlen &&
             fwrite(data, sizeof(float), count, f) == count;
    if (fclose(f) != 0) ok = 0;
    if (!ok) fprintf(stderr, "npy: %s: write failed\n", path);
    return ok;
}
