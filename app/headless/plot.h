/* plot.h - line plots as PNG for vitlens --eval (the perturbation curves and the
 * sanity check), drawn into an RGB buffer with the app's font (text.h). */
#ifndef VITLENS_PLOT_H
#define VITLENS_PLOT_H

typedef struct {
    const char *name; /* in the legend */
    const float *y;   /* [n] values at x0 + k (x1 - x0) / (n - 1); NaN: no point */
    int n;            /* >= 2 */
    int dashed;       /* 1: a dashed line (the baselines) */
} PlotSeries;

#define PLOT_W_PX 1100
#define PLOT_H_PX 640

/* One plot of n series over [x0, x1] x [y0, y1] (values outside are clipped), with a
 * title, the x axis's label, 5 ticks on each axis and a legend, written as a PNG of
 * PLOT_W_PX x PLOT_H_PX to path. Without a font, the lines alone. Returns 0, or 1
 * with a message naming the file on stderr. */
int plot_lines(const char *path, const char *title, const char *x_label, float x0, float x1,
               float y0, float y1, const PlotSeries *s, int n);

#endif
