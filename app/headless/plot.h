/* plot.h - line plots as PNG for vitlens --eval (the perturbation curves and the
 * sanity check) and heatmaps of a matrix (--agreement), drawn into an RGB buffer with the app's
 * font (text.h). */
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

/* A heatmap of a square matrix v [n, n] (row i, column j at v[i*n + j]; NaN: a grey
 * cell "n/a") on a diverging scale, lo blue, the middle white, hi red (values outside
 * clipped), each cell with its value written in it (%.2f), rows labelled with
 * row_labels [n] on the left, columns with col_labels [n] on top, a title and a colour
 * bar; cells of 96 px or wider, so the PNG's size grows with n. Written to path; 0, or 1
 * with a message naming the file on stderr. Without a font, the cells alone. */
int plot_matrix(const char *path, const char *title, const char *const *row_labels,
                const char *const *col_labels, const double *v, int n, double lo, double hi);

#endif
