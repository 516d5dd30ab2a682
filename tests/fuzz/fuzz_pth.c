/* fuzz_pth.c - libFuzzer target: arbitrary bytes as a PyTorch checkpoint (.pth).
 *
 * vit_load sees a zip (its first bytes "PK\3\4") and reads it as torch.save's format:
 * libzip opens it (ZIP_CHECKCONS), data.pkl goes through the restricted unpickler, the
 * state dict is searched under its wrappers, each storage entry is read into memory after
 * its size (and, compressed, its ratio) is checked, then a layout (assets/layouts/)
 * converts the tensors when the names are not timm's. On a refusal the target checks the
 * error contract and that *vit was left zeroed; on success, the config's identities.
 *
 * The zip's CRCs stop most mutations inside data.pkl at the zip layer: fuzz_pickle feeds
 * the unpickler directly. Seeds: pth_seeds.py (torch.save of tiny ViTs in timm's,
 * torchvision's and the notebooks' names, F32, F16, wrapped, a deflated one). */
#include "fuzzlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what) {
    fprintf(stderr, "fuzz_pth: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static MemFile f;
    if (!f.path[0]) memfile_init(&f, "model.pth");
    memfile_set(&f, data, size);
    Vit vit;
    VitError err;
    memset(&err, 'x', sizeof err); /* a refusal must write its own code and message */
    VitLoadOptions opt = {.n_heads = 2};
    VitStatus rc = vit_load(&vit, f.path, &opt, &err);
    fuzz_check_error(rc, &err, "vit_load");
    if (rc) {
        static const Vit zero;
        if (memcmp(&vit, &zero, sizeof vit) != 0) fail("vit_load failed but left *vit not zeroed");
        return 0;
    }
    const VitConfig *c = &vit.cfg;
    if (c->n_tokens != c->n_prefix + c->n_patches || c->dim != c->n_heads * c->head_dim ||
        c->n_layers < 1 || c->n_layers > VIT_MAX_LAYERS)
        fail("vit_load accepted a model whose config does not add up");
    vit_free(&vit);
    return 0;
}
