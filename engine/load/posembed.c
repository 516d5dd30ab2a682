/* posembed.c - the position embedding resampled to an input grid other than the
 * training one (engine/load/), bicubically as the checkpoint's library does: timm
 * antialiased, transformers not (but Dinov2WithRegistersModel, antialiased: its layout's
 * "position_antialias"). */
#include "loader.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Keys' cubic convolution kernel with parameter a. */
static double cubic(double x, double a) {
    x = fabs(x);
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}

/* w[n_out, n_in]: 1-D weights of torch's F.interpolate(mode='bicubic',
 * align_corners=False), scale = n_in / n_out (aten/src/ATen/native/UpSample.h
 * and cpu/UpSampleKernel.cpp):
 *   antialias=False: a = -0.75 at the 4 taps around scale * (o + 0.5) - 0.5,
 *     indices clamped to the border;
 *   antialias=True: a = -0.5 (Pillow's), the kernel widened by scale when
 *     downsampling, centre scale * (o + 0.5), taps outside dropped and the
 *     weights renormalised to sum 1. */
static void bicubic_weights(double *w, int n_in, int n_out, int antialias) {
    double scale = (double)n_in / n_out;
    memset(w, 0, (size_t)n_out * n_in * sizeof *w);
    for (int o = 0; o < n_out; o++) {
        double *row = w + (size_t)o * n_in;
        if (!antialias) {
            double x = scale * (o + 0.5) - 0.5, x0 = floor(x), t = x - x0;
            for (int k = 0; k < 4; k++) {
                int i = (int)x0 - 1 + k;
                i = i < 0 ? 0 : i > n_in - 1 ? n_in - 1 : i;
                row[i] += cubic(t - (k - 1), -0.75);
            }
            continue;
        }
        double support = scale >= 1.0 ? 2.0 * scale : 2.0, inv = scale >= 1.0 ? 1.0 / scale : 1.0;
        double center = scale * (o + 0.5), sum = 0.0;
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        lo = lo < 0 ? 0 : lo;
        hi = hi > n_in ? n_in : hi;
        for (int i = lo; i < hi; i++) sum += row[i] = cubic((i - center + 0.5) * inv, -0.5);
        for (int i = lo; i < hi && sum != 0.0; i++) row[i] /= sum;
    }
}

/* out[Npos + gh*gw, D] from pos[Npos + gh0*gw0, D]: the prefix rows copied, the
 * grid resampled separably (rows, then columns) in double.
 * timm (layers/pos_embed.py, resample_abs_pos_embed):
 *   posemb = F.interpolate(posemb, size=new_size, mode='bicubic', antialias=True)
 * transformers (ViTEmbeddings.interpolate_pos_encoding): the same, antialias=False.
 * 0 on out of memory. */
int ld_resample_pos_embed(float *out, const float *pos, int n_prefix, int gh0, int gw0, int gh,
                          int gw, int D, int antialias) {
    /* the grids and D are bounded by vit.h's limits, but checked as sizes from a file */
    size_t n_wy, n_wx, n_tmp, n_acc;
    int sized =
        vit_size_mul(&n_wy, (size_t)gh, (size_t)gh0) && vit_size_mul(&n_wy, n_wy, sizeof(double)) &&
        vit_size_mul(&n_wx, (size_t)gw, (size_t)gw0) && vit_size_mul(&n_wx, n_wx, sizeof(double)) &&
        vit_size_mul(&n_tmp, (size_t)gh, (size_t)gw0) && vit_size_mul(&n_tmp, n_tmp, (size_t)D) &&
        vit_size_mul(&n_tmp, n_tmp, sizeof(double)) &&
        vit_size_mul(&n_acc, (size_t)D, sizeof(double));
    double *wy = sized ? malloc(n_wy) : NULL, *wx = sized ? malloc(n_wx) : NULL;
    double *tmp = sized ? malloc(n_tmp) : NULL, *acc = sized ? malloc(n_acc) : NULL;
    int ok = wy && wx && tmp && acc;
    if (ok) {
        memcpy(out, pos, (size_t)n_prefix * D * sizeof *out);
        const float *grid = pos + (size_t)n_prefix * D;
        bicubic_weights(wy, gh0, gh, antialias);
        bicubic_weights(wx, gw0, gw, antialias);
        for (int y = 0; y < gh; y++) /* tmp[y, x0, :] = sum_y0 wy[y, y0] grid[y0, x0, :] */
            for (int x0 = 0; x0 < gw0; x0++) {
                double *t = tmp + ((size_t)y * gw0 + x0) * D;
                for (int d = 0; d < D; d++) t[d] = 0.0;
                for (int y0 = 0; y0 < gh0; y0++) {
                    double k = wy[(size_t)y * gh0 + y0];
                    if (k == 0.0) continue;
                    const float *g = grid + ((size_t)y0 * gw0 + x0) * D;
                    for (int d = 0; d < D; d++) t[d] += k * g[d];
                }
            }
        for (int y = 0; y < gh; y++) /* out[y, x, :] = sum_x0 wx[x, x0] tmp[y, x0, :] */
            for (int x = 0; x < gw; x++) {
                for (int d = 0; d < D; d++) acc[d] = 0.0;
                for (int x0 = 0; x0 < gw0; x0++) {
                    double k = wx[(size_t)x * gw0 + x0];
                    if (k == 0.0) continue;
                    const double *t = tmp + ((size_t)y * gw0 + x0) * D;
                    for (int d = 0; d < D; d++) acc[d] += k * t[d];
                }
                float *o = out + ((size_t)n_prefix + (size_t)y * gw + x) * D;
                for (int d = 0; d < D; d++) o[d] = (float)acc[d];
            }
    }
    free(wy), free(wx), free(tmp), free(acc);
    return ok;
}
