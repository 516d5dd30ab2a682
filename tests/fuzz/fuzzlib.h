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
/* The same checks on the model file at `path`, loaded with `opt` (a layout file, say). */
void fuzz_model_load(const char *path, const VitLoadOptions *opt);

/* --- structure-aware targets: the input as a stream of choices ------------------ */

/* fuzz_pickle_ops and fuzz_layout read their input as decisions (which opcode, which
 * role, how many items) and write a file from them: libFuzzer's byte mutations then
 * change the file's structure, not its bytes. Past the input's end every choice is 0,
 * so that any input, the empty one too, writes a complete file. */
typedef struct {
    const uint8_t *p;
    size_t n, at;
} Choices;

/* A choice in [0, n) (n >= 1): one byte, two when n > 256. */
unsigned pick(Choices *c, unsigned n);

/* What a structured target writes: a growing buffer that stops at `max` bytes (`over`
 * set, the rest dropped) and aborts when out of memory. */
typedef struct {
    uint8_t *p;
    size_t n, cap, max;
    int over;
} Out;

void out_put(Out *o, const void *b, size_t k);
void out_str(Out *o, const char *s);
/* The bytes written since `from` (one unit: an opcode, an item), `times` more times, by
 * doubling copies: megabytes in milliseconds, where writing them one by one would take
 * the target's whole time limit. Over `max`: `over` set, nothing written. */
void out_repeat(Out *o, size_t from, size_t times);
void out_printf(Out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* With $VITLENS_FUZZ_DUMP set, a structured target writes the file it made there (run it
 * on one found input: the pickle or layout to read, or to add to regress/ of the target
 * that reads such files). Nothing otherwise. */
void fuzz_dump(const uint8_t *b, size_t n);

#endif
