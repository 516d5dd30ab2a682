/* models.h - the downloaded models: where they are kept and --model NAME.
 *
 * A downloaded model is a folder NAME/ holding model.safetensors, perhaps labels.txt
 * and config.json (scripts/download-model.sh makes them). The folders of such models,
 * in the order they are looked in:
 *   $VITLENS_MODELS_DIR                      (if set: the script installs there too)
 *   $XDG_DATA_HOME/vitlens/models            (default ~/.local/share/vitlens/models)
 *   the source tree's models/                (a compile-time path, VITLENS_MODELS_DIR_SOURCE;
 *                                             "" in a package build)
 * A name found in several is the first one's. No SDL, no GL. */
#ifndef VITLENS_MODELS_H
#define VITLENS_MODELS_H

#include <stddef.h>

/* Set by CMake (app/CMakeLists.txt): the source tree's models/, or "". */
#ifndef VITLENS_MODELS_DIR_SOURCE
#define VITLENS_MODELS_DIR_SOURCE ""
#endif

#define MODELS_MAX_DIRS 3
#define MODELS_MAX      128

typedef struct {
    char name[128];     /* the folder's name: --model NAME */
    char weights[1200]; /* DIR/NAME/model.safetensors */
    char labels[1200];  /* DIR/NAME/labels.txt, "" if there is none */
} ModelEntry;

/* The folders looked in, in order, into dirs[MODELS_MAX_DIRS]; returns how many. A folder
 * that does not exist is still named (error messages list them). */
int models_dirs(char dirs[MODELS_MAX_DIRS][1024]);

/* The downloaded models of every folder of models_dirs, each name once (the first
 * folder's), sorted by name within a folder; at most max. Returns how many. */
int models_list(ModelEntry *out, int max);

/* --model ARG: a path that exists is taken as it is (weights = ARG, labels ""); else
 * ARG is a name from models_list (weights and labels from it). 0, or -1 with msg naming
 * the places looked in. */
int models_resolve(char *weights, size_t weights_bytes, char *labels, size_t labels_bytes,
                   const char *arg, char *msg, size_t msg_bytes);

#endif
