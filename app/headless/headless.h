/* headless.h - --top and --export: no window, no display. */
#ifndef VITLENS_HEADLESS_H
#define VITLENS_HEADLESS_H

#include "config/options.h"

/* --top K, --export DIR: the photo o->image_path (--top) or every photo of
 * o->image_args (--export; several go each into DIR/STEM/, with the feature PCA over all
 * of them beside each one's own) with the model of o->model_path. 0, or 1 with a message
 * on stderr (the model, a photo, --class, a file that cannot be written). */
int headless_run(const Options *o);

#endif
