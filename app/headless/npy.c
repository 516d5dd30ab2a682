/* npy.c - write float32 arrays as .npy files (NumPy's format, version 1.0). */
#include "headless/npy.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The layout (numpy/lib/format.py): the magic "\x93NUMPY", version 1.0, a
 * little-endian u16 header length, then the header, a Python dict literal padded
 * with spaces and ending in '\n' so that the data starts at a multiple of 64
 * bytes (format.py asks for 64), then the data. */
int npy_write(const char *dir, const char *name, const float *data, const int *shape, int ndim,
              char *msg, size_t msg_bytes) {
    char path[4096], dict[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (ndim < 1 || ndim > 8) {
        snprintf(msg, msg_bytes, "%s: %d dimensions, expected 1 to 8", path, ndim);
        return -1;
    }
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
    memset(dict + len, ' ', pad); /* fits: at most 8 dimensions of 11 characters, 63 spaces */
    dict[hlen - 1] = '\n';

    errno = 0;
    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(msg, msg_bytes, "%s: cannot write: %s", path, strerror(errno));
        return -1;
    }
    uint8_t pre[10] = {
        0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(hlen & 0xff), (uint8_t)(hlen >> 8)};
    int ok = fwrite(pre, 1, sizeof pre, f) == sizeof pre && fwrite(dict, 1, hlen, f) == hlen &&
             fwrite(data, sizeof(float), count, f) == count;
    if (fclose(f) != 0) ok = 0;
    if (!ok) {
        snprintf(msg, msg_bytes, "%s: cannot write: %s", path,
                 errno ? strerror(errno) : "write failed");
        return -1;
    }
    return 0;
}
