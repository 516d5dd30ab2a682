/* npy.h - float32 arrays as .npy files (NumPy's format, version 1.0), for
 * --export's raw maps and the numpy side of the tests (tests/maps). */
#ifndef VITLENS_NPY_H
#define VITLENS_NPY_H

#include <stddef.h>

/* Write data [shape[0], ..., shape[ndim-1]] (row-major float32, host byte order,
 * which the header states) to dir/name. ndim 1 .. 8. Returns 0, or -1 with a
 * message naming the file in msg. */
int npy_write(const char *dir, const char *name, const float *data, const int *shape, int ndim,
              char *msg, size_t msg_bytes);

#endif
