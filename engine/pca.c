/* pca.c - placeholder: being written (issue 14). */
#include "internal.h"

VitStatus vit_feature_pca(float *rgb, uint8_t *fg, const float *x, int m, int d,
                          const uint8_t *border, VitError *err) {
    (void)rgb, (void)fg, (void)x, (void)m, (void)d, (void)border;
    return vit_set_error(err, VIT_ERR_ARG, "feature PCA: not built yet");
}
