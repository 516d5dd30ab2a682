/* files.h - where the built-in model lives, and the images beside an image.
 *
 * The built-in model and its demo scenes are in ASSETS/default/ (model.safetensors,
 * config.json, demo/ with PNG scenes). ASSETS is $VITLENS_ASSETS when set (and only it),
 * else the source tree's assets/ (a compile-time path; a package build, CMake's
 * VITLENS_USE_SOURCE_TREE=OFF, has the installed folder there instead), else the
 * installed share/vitlens/assets. No SDL, no GL. */
#ifndef VITLENS_FILES_H
#define VITLENS_FILES_H

#include <stddef.h>

/* Set by CMake (app/CMakeLists.txt): the source tree's assets/ and the installed
 * share/vitlens/assets. */
#ifndef VITLENS_ASSETS_DIR_DEFAULT
#define VITLENS_ASSETS_DIR_DEFAULT "assets"
#endif
#ifndef VITLENS_ASSETS_DIR_INSTALLED
#define VITLENS_ASSETS_DIR_INSTALLED "/usr/local/share/vitlens/assets"
#endif

/* The built-in model's weights and its demo folder. Returns 0, or -1 with msg
 * naming every place looked in. */
int files_default_model(char *model, size_t model_bytes, char *demo_dir, size_t demo_bytes,
                        char *msg, size_t msg_bytes);

/* A file the project ships under ASSETS (rel: e.g. "clip/imagenet_classes.txt"), looked
 * for as the built-in model is. 0 and its path, or -1 with msg naming where it looked. */
int files_asset(char *out, size_t out_bytes, const char *rel, char *msg, size_t msg_bytes);

/* The image `step` places (+1 next, -1 previous, wrapping around) after `path`
 * among the image files (by extension, any case: png, jpg, jpeg, bmp, gif, tga,
 * ppm, pgm, pnm, webp, tif, tiff, heic, heif, avif; names starting with '.'
 * skipped) of path's folder, sorted by name (bytewise). When path is a folder, or
 * its file is not there, +1 gives the first image and -1 the last. Returns 0, or
 * -1 when the folder cannot be read or holds no image. */
int files_step(char *out, size_t out_bytes, const char *path, int step);

/* The images of the command line, for the slideshow: each argument that is a
 * folder becomes its images (as files_step orders them), any other is kept as
 * it is (a file that cannot be read fails later, with the engine's message).
 * *paths: [*n] malloc'd strings; free with files_free_list. Returns 0, or -1
 * with msg (a folder that cannot be read or holds no image). */
int files_expand(char ***paths, int *n, const char *const *args, int n_args, char *msg,
                 size_t msg_bytes);
void files_free_list(char **paths, int n);

/* mkdir -p: dir and every missing folder above it, with mode (0777: an output folder the
 * user names, less the umask; 0700: the settings' own). A folder there already is fine.
 * Returns 0, or -1 with msg naming the folder that could not be made and why ("out/run1:
 * cannot create directory: Permission denied", "...: exists and is not a directory"). */
int files_make_dir(const char *dir, unsigned mode, char *msg, size_t msg_bytes);

#endif
