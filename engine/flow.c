/* flow.c - placeholder: being written (issue 14). */
#include "internal.h"

VitStatus vit_max_flow_layers(float *out, const float *cap, int n_layers, int T, int query,
                              int n_threads, VitError *err) {
    (void)out, (void)cap, (void)n_layers, (void)T, (void)query, (void)n_threads;
    return vit_set_error(err, VIT_ERR_ARG, "attention flow: not built yet");
}

VitStatus vit_attention_flow(float *out, const VitRun *run, int layer, int query, VitError *err) {
    (void)out, (void)run, (void)layer, (void)query;
    return vit_set_error(err, VIT_ERR_ARG, "attention flow: not built yet");
}
