/* colormap.h - the colormaps shared by the GPU overlay and the PNG export.
 *
 * A value v in [0, 1] has colour colormap_luts[cm][colormap_index(v)]; the
 * fragment shader does the same lookup on the same table uploaded as a 256x1
 * texture, so the window and the exported PNGs agree. Generated:
 * tools/gen_colormap.py. Every table runs from dark (low) to bright (high). */
#ifndef VITLENS_COLORMAP_H
#define VITLENS_COLORMAP_H

#include <stdint.h>

#define COLORMAP_SIZE 256

enum {
    COLORMAP_VIRIDIS,
    COLORMAP_INFERNO,
    COLORMAP_MAGMA,
    COLORMAP_TURBO,
    COLORMAP_GREYS,
    COLORMAP_COUNT
};

extern const char *const colormap_names[COLORMAP_COUNT];              /* "viridis", ... */
extern const uint8_t colormap_luts[COLORMAP_COUNT][COLORMAP_SIZE][3]; /* [5, 256, RGB] */

/* LUT index of v in [0, 1] (clamped): round(v * 255), as the shader's texelFetch. */
static inline int colormap_index(float v) {
    if (!(v > 0.0f)) return 0; /* also NaN */
    if (v >= 1.0f) return COLORMAP_SIZE - 1;
    return (int)(v * (float)(COLORMAP_SIZE - 1) + 0.5f);
}

#endif
