/* fuzz_pth.c - libFuzzer target: arbitrary bytes as a PyTorch checkpoint (.pth).
 *
 * vit_load sees a zip (its first bytes "PK\3\4") and reads it as torch.save's format:
 * libzip opens it (ZIP_CHECKCONS), data.pkl goes through the restricted unpickler, the
 * state dict is searched under its wrappers, each storage entry is read into memory after
 * its size (and, compressed, its ratio) is checked, then a layout (assets/layouts/)
 * converts the tensors when the names are not timm's. The checks after the load are
 * fuzz_safetensors's (fuzzlib.c fuzz_model_input): a converted model runs every map too.
 *
 * The zip's CRCs stop most mutations inside data.pkl at the zip layer: fuzz_pickle feeds
 * the unpickler directly. Seeds: pth_seeds.py (torch.save of tiny ViTs in timm's,
 * torchvision's and the notebooks' names, F32, F16, wrapped, a deflated one). */
#include "fuzzlib.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static MemFile f;
    fuzz_model_input(&f, "model.pth", data, size);
    return 0;
}
