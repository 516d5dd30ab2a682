/* settings.h - what the window remembers between runs: colormap, opacity, upsampling,
 * the side panels, the on-screen controls, the last model and the photos it showed, in
 * $XDG_CONFIG_HOME/vitlens/settings
 * (default
 * ~/.config/vitlens/settings), one key=value a line:
 *
 *   colormap=viridis     a name of colormap.h       distance=0   the distance panel
 *   opacity=0.60         in [0, 1]                  model=PATH   the last model's weights
 *   bilinear=0           upsampling, 0 or 1         labels=PATH  its --labels, if any
 *   predictions=1        the top-5 panel        image=PATH   the last model's photos (the
 *   controls=1           the on-screen buttons               command line's IMAGEs, one a line)
 *                                                photo=PATH   the photo it showed last
 *
 * '#' starts a comment line. A line that does not parse is ignored and reported (the
 * first of them, and how many), never fatal. Written whole to a temporary file in the
 * same folder and renamed over the old one, so a crash leaves the old file or the
 * new one, never half of one. The command line's options override what is read
 * (options_apply_settings, options.h: the options know the settings, not the reverse).
 * No SDL, no GL. */
#ifndef VITLENS_SETTINGS_H
#define VITLENS_SETTINGS_H

#include <stddef.h>

#define SETTINGS_MAX_IMAGES 16 /* IMAGE arguments remembered, at most */

typedef struct {
    int colormap;                  /* index into colormap_names, -1: not set */
    float opacity;                 /* [0, 1], -1: not set */
    int bilinear;                  /* 0 / 1, -1: not set */
    int show_preds, show_distance; /* 0 / 1, -1: not set */
    int show_controls;             /* the on-screen controls (Tab), 0 / 1, -1: not set */
    char model[1200];              /* the last model's weights, "": not set */
    char labels[1200];             /* its labels file, "": none */
    /* the photos the last model showed, with it only (the built-in model opens on its demo
     * scenes): the slideshow's IMAGE arguments, files or folders, and the photo on screen */
    char images[SETTINGS_MAX_IMAGES][1200];
    int n_images;
    char photo[1200]; /* "": none */
} Settings;

/* Every field "not set". */
void settings_init(Settings *s);

/* The file's path: $XDG_CONFIG_HOME/vitlens/settings, else ~/.config/vitlens/settings.
 * -1 when neither XDG_CONFIG_HOME (absolute) nor HOME is set. */
int settings_path(char *out, size_t out_bytes);

/* Read path into s (fields the file does not set keep their value). A missing file is
 * not an error. 0: read cleanly; 1: some lines were ignored, msg names the first and
 * how many; -1: the file cannot be read (msg says why). s keeps every good line. */
int settings_load(Settings *s, const char *path, char *msg, size_t msg_bytes);

/* Write s to path atomically (path.tmp.PID, fsync, rename), making its folder. Fields
 * not set are left out. 0, or -1 with msg. */
int settings_save(const Settings *s, const char *path, char *msg, size_t msg_bytes);

/* Remember the model (and its labels file, NULL: none) as absolute paths, so that a
 * run from another folder finds them; NULL model: none (the built-in one). */
void settings_set_model(Settings *s, const char *model, const char *labels);

/* Remember the photos shown with the model: images [n] (the IMAGE arguments, the first
 * SETTINGS_MAX_IMAGES) and the photo on screen (NULL or "": none), as absolute paths. */
void settings_set_photos(Settings *s, const char *const *images, int n, const char *photo);

#endif
