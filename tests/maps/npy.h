/* npy.h - float32 arrays to .npy for the numpy side of the map tests. */
#ifndef VITLENS_TESTS_NPY_H
#define VITLENS_TESTS_NPY_H

/* Write data [shape[0], ..., shape[ndim-1]] (row-major float32) to dir/name as
 * NPY v1.0. Returns 1, or 0 with a message on stderr. */
int npy_write(const char *dir, const char *name, const float *data, const int *shape, int ndim);

#endif
