/* fuzzlib.h - what the fuzz targets share: an in-memory file the engine opens
 * by path, and the entry point every target defines.
 *
 * The engine takes paths (vit_load maps its file, vit_image_load stats and
 * reads it), so a target writes each input into a memfd and hands the engine
 * /proc/self/fd/N: the real path-based code runs, and no input touches the disk. */
#ifndef VIT_FUZZLIB_H
#define VIT_FUZZLIB_H

#include "vit.h"

#include <stddef.h>
#include <stdint.h>

/* libFuzzer's entry point, defined by each fuzz_<target>.c; fuzz_main.c calls it
 * on files when the target is built without libFuzzer (the replay tests). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    int fd;
    char path[64]; /* "/proc/self/fd/N" */
} MemFile;

/* Create the file (memfd named `name`, for /proc listings only). Aborts on failure:
 * a fuzz target without its file cannot run at all. */
void memfile_init(MemFile *f, const char *name);
/* Replace the file's content by data[0..n). Aborts on failure. */
void memfile_set(MemFile *f, const uint8_t *data, size_t n);

/* The engine's contract for a refused input (rc != VIT_OK): err.code is rc and the
 * message is NUL-terminated and not empty. Aborts (a finding) otherwise. */
void fuzz_check_error(VitStatus rc, const VitError *err, const char *what);

/* One model-file input, as `vitlens --heads 2` loads it: data written to f (made on the
 * first call, named `name`; vit_load tells .safetensors from a checkpoint's zip by the
 * first bytes). A refusal must keep the error contract and leave the Vit zeroed; a
 * loaded model must have a config that adds up and, when small enough to run quickly,
 * run a forward pass and every kind of map. Aborts (a finding) otherwise. */
void fuzz_model_input(MemFile *f, const char *name, const uint8_t *data, size_t size);

#endif
