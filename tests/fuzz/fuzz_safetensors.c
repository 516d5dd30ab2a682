/* fuzz_safetensors.c - libFuzzer target: arbitrary bytes as a .safetensors file.
 *
 * vit_load reads the 8-byte header length, the JSON header and the tensor table,
 * checks every tensor against the architecture it infers, converts F16/BF16 and
 * scans for NaN. On a refusal the target checks the error contract (fuzzlib.h)
 * and that *vit was left zeroed; on success it checks the config's identities
 * (T = Np + N, D = H * Dh, ...) and, for a model small enough to run quickly, runs
 * a forward pass and every kind of map: a header that passes the loader must not
 * make anything after it read out of bounds.
 *
 * The file is loaded as `vitlens --heads 2` would: without the option the head
 * count is D / 64, and a model of width 64 is 70 KB of weights around a 2 KB
 * header, where most mutations would land in the weights. The seeds are 1 to 5 KB.
 *
 * Seeds: tiny timm ViTs (F32, F16, BF16, misaligned, backbone) from fuzz_seeds. */
#include "fuzzlib.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static MemFile f;
    fuzz_model_input(&f, "model.safetensors", data, size);
    return 0;
}
