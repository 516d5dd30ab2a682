/* probe_dump.c - SigLIP's attention-pooling head (engine/passes/probe.c) once, for
 * test_siglip_probe.py.
 *
 *   probe_dump IN.f32 OUT.f32 N D H F [gelu|gelu_tanh]
 *
 * IN.f32: raw float32, one after another: probe [D], in_proj_weight [3D, D], in_proj_bias
 * [3D], out_proj weight [D, D] and bias [D], layernorm weight [D] and bias [D], fc1 [F, D]
 * and [F], fc2 [D, F] and [D], then the tokens y [N, D]. OUT.f32: the pooled embedding [D]
 * then the probe's attention [H, N]. Exit 1 on a short file, 2 on a usage error. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 7) return fputs("usage: probe_dump IN OUT N D H F [gelu|gelu_tanh]\n", stderr), 2;
    int N = atoi(argv[3]), D = atoi(argv[4]), H = atoi(argv[5]), F = atoi(argv[6]);
    VitActivation act = argc > 7 && !strcmp(argv[7], "gelu") ? VIT_ACT_GELU : VIT_ACT_GELU_TANH;
    if (N < 1 || D < 1 || H < 1 || D % H || F < 1)
        return fputs("probe_dump: bad sizes\n", stderr), 2;
    size_t n = (size_t)D * (1 + 3 * D + 3 + D + 1 + 2) + (size_t)F * D * 2 + F + D + (size_t)N * D;
    float *in = malloc(n * sizeof *in);
    FILE *f = fopen(argv[1], "rb");
    if (!in || !f || fread(in, sizeof *in, n, f) != n)
        return fprintf(stderr, "probe_dump: %s: expected %zu floats\n", argv[1], n), 1;
    fclose(f);
    VitProbeHead w;
    float *p = in;
    size_t Dz = (size_t)D, Fz = (size_t)F;
    w.probe = p, p += Dz;
    w.in_w = p, p += 3 * Dz * Dz;
    w.in_b = p, p += 3 * Dz;
    w.out_w = p, p += Dz * Dz;
    w.out_b = p, p += Dz;
    w.ln_w = p, p += Dz;
    w.ln_b = p, p += Dz;
    w.fc1_w = p, p += Fz * Dz;
    w.fc1_b = p, p += Fz;
    w.fc2_w = p, p += Dz * Fz;
    w.fc2_b = p, p += Dz;
    const float *y = p;
    float *out = malloc((Dz + (size_t)H * N) * sizeof *out);
    float *scratch = malloc(vit_probe_scratch(N, D, F) * sizeof *scratch);
    VitPool *pool = vit_pool_new(2);
    if (!out || !scratch || !pool) return fputs("probe_dump: out of memory\n", stderr), 1;
    vit_probe_forward(pool, out, out + D, y, &w, N, D, H, F, 1e-6f, act, scratch);
    f = fopen(argv[2], "wb");
    if (!f || fwrite(out, sizeof *out, Dz + (size_t)H * N, f) != Dz + (size_t)H * N || fclose(f))
        return fprintf(stderr, "probe_dump: %s: cannot write\n", argv[2]), 1;
    vit_pool_free(pool);
    free(in), free(out), free(scratch);
    return 0;
}
