/* fuzz_pickle.c - libFuzzer target: arbitrary bytes as a checkpoint's data.pkl.
 *
 * pth_check_pickle runs pth.c's restricted unpickler on them (every opcode it knows, the
 * memo, marks, the allowed globals, persistent ids, REDUCE of OrderedDict and the tensor
 * rebuilders), then the search for the state dict and the checks of each tensor against
 * its storage (shape, stride, offset). Whatever the bytes, it must refuse with a message
 * or accept, never read out of bounds, leak, or call anything. Seeds: the data.pkl of
 * pth_seeds.py's checkpoints, and pickles of os.system and builtins.eval. */
#include "fuzzlib.h"
#include "internal.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    VitError err;
    memset(&err, 'x', sizeof err);
    VitStatus rc = pth_check_pickle(data, size, "data.pkl", &err);
    fuzz_check_error(rc, &err, "pth_check_pickle");
    return 0;
}
