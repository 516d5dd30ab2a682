/* perturb.c - the perturbation curve: the model run on a photo whose patches are
 * removed (or put back) one group after another in the order of a map, the class
 * probabilities after each step (Chefer et al. 2021, §4, positive and negative
 * perturbation; Petsiuk et al. 2018, RISE's deletion and insertion). The inputs come
 * from vit_patch_mix (faithful.c), the passes from vit_forward_batch (batch.c), a
 * batch of inputs at a time; the app's --eval and its perturbation animation both
 * call this. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

VitStatus vit_perturb_curve(float *probs, VitBatch *b, const Vit *vit, const float *base,
                            const float *fill, const int *order, const int *counts, int n_counts,
                            VitError *err) {
    const VitConfig *c = &vit->cfg;
    int N = c->n_patches, C = c->n_classes;
    if (!probs || !b || !base || !order || !counts || n_counts < 1)
        return vit_set_error(err, VIT_ERR_ARG,
                             "perturbation curve: %d inputs%s (expected at least 1, and every "
                             "array given)",
                             n_counts, !probs || !b || !base || !order || !counts ? ", NULL" : "");
    for (int i = 0; i < n_counts; i++)
        if (counts[i] < 0 || counts[i] > N)
            return vit_set_error(err, VIT_ERR_ARG,
                                 "perturbation curve: count %d of input %d outside [0, %d]",
                                 counts[i], i, N);
    if (!b->mem || b->max_batch < 1)
        return vit_set_error(err, VIT_ERR_ARG,
                             "%s: batch buffers not made by vit_batch_init for this model",
                             c->name);
    size_t sz = (size_t)3 * c->image_h * c->image_w;
    int B = b->max_batch < n_counts ? b->max_batch : n_counts;
    float *inputs = malloc((size_t)B * sz * sizeof *inputs);
    if (!inputs)
        return vit_set_error(err, VIT_ERR_NOMEM,
                             "perturbation curve: out of memory for %d inputs of [3, %d, %d]", B,
                             c->image_h, c->image_w);
    VitStatus rc = VIT_OK;
    for (int i0 = 0; i0 < n_counts && !rc; i0 += B) {
        int n = n_counts - i0 < B ? n_counts - i0 : B;
        for (int k = 0; k < n; k++)
            vit_patch_mix(inputs + (size_t)k * sz, base, fill, c, order, counts[i0 + k]);
        rc = vit_forward_batch(b, vit, inputs, n, NULL, probs + (size_t)i0 * C, err);
    }
    free(inputs);
    return rc;
}
