/* test_files.c - app/config/files.c's folder stepping (N / P, the slideshow) and files_expand:
 * a folder holding one file of every extension the engine decodes, in lower and upper
 * case, and files that are not images, is stepped through in name order, wrapping.
 *
 * usage: test_files SCRATCH_DIR   exit 1 on any failed check */
#include "config/files.h"
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* In byte order, as files_step sorts: one of each extension, then the new formats'
 * extensions in capitals. The files are empty: the names decide. */
static const char *const images[] = {"a.png",  "b.jpg",  "c.jpeg", "d.bmp",  "e.gif",  "f.tga",
                                     "g.ppm",  "h.pgm",  "i.pnm",  "j.webp", "k.tif",  "l.tiff",
                                     "m.heic", "n.heif", "o.avif", "p.PNG",  "q.WEBP", "r.TIF",
                                     "s.TIFF", "t.HEIC", "u.HEIF", "v.AVIF", "w.WebP", "x.Avif"};
#define N_IMAGES (int)(sizeof images / sizeof images[0])

/* Skipped: other extensions, a name that only ends in a known word, hidden files. */
static const char *const others[] = {"notes.txt", "y.webp.txt", "webp",  ".hidden.webp",
                                     "z.tiff~",   "z.heics",    "z.avi", "z.jp2"};

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_files SCRATCH_DIR\n");
        return 2;
    }
    char dir[1024], path[1100];
    path_join(dir, sizeof dir, argv[1], "folder");
    if (make_dir(dir) != 0) return check(0, "cannot create %s", dir), t_finish("test_files");
    for (int i = 0; i < N_IMAGES; i++) {
        path_join(path, sizeof path, dir, images[i]);
        write_bytes(path, "", 0);
    }
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        path_join(path, sizeof path, dir, others[i]);
        write_bytes(path, "", 0);
    }

    /* N from the folder: the first image; then each in turn, back to the first. */
    char at[1100], want[1100];
    int ok = files_step(at, sizeof at, dir, 1) == 0;
    path_join(want, sizeof want, dir, images[0]);
    check(ok && strcmp(at, want) == 0, "N from the folder gives %s (got %s)", images[0],
          ok ? at : "an error");
    for (int i = 1; i <= N_IMAGES && ok; i++) {
        char next[1100];
        ok = files_step(next, sizeof next, at, 1) == 0;
        path_join(want, sizeof want, dir, images[i % N_IMAGES]);
        ok = check(ok && strcmp(next, want) == 0, "N after %s gives %s (got %s)", images[i - 1],
                   images[i % N_IMAGES], ok ? next : "an error");
        snprintf(at, sizeof at, "%s", next);
    }
    /* P from the folder: the last image; P from the first wraps to the last too. */
    ok = files_step(at, sizeof at, dir, -1) == 0;
    path_join(want, sizeof want, dir, images[N_IMAGES - 1]);
    check(ok && strcmp(at, want) == 0, "P from the folder gives %s", images[N_IMAGES - 1]);
    path_join(path, sizeof path, dir, images[0]);
    ok = files_step(at, sizeof at, path, -1) == 0;
    check(ok && strcmp(at, want) == 0, "P from %s gives %s", images[0], images[N_IMAGES - 1]);
    for (int i = N_IMAGES - 1; i > 0; i--) {
        path_join(path, sizeof path, dir, images[i]);
        path_join(want, sizeof want, dir, images[i - 1]);
        ok = files_step(at, sizeof at, path, -1) == 0;
        if (!check(ok && strcmp(at, want) == 0, "P from %s gives %s", images[i], images[i - 1]))
            break;
    }

    /* The slideshow of that folder: the same images, in the same order. */
    char **paths = NULL, msg[256] = "";
    int n = 0;
    const char *args[1] = {dir};
    ok = files_expand(&paths, &n, args, 1, msg, sizeof msg) == 0;
    check(ok && n == N_IMAGES, "files_expand lists %d images (got %d%s%s)", N_IMAGES, n,
          ok ? "" : ": ", msg);
    for (int i = 0; ok && i < n && i < N_IMAGES; i++) {
        path_join(want, sizeof want, dir, images[i]);
        if (!check(strcmp(paths[i], want) == 0, "slideshow image %d is %s (got %s)", i, images[i],
                   paths[i]))
            break;
    }
    files_free_list(paths, n);

    /* Output folders (files_make_dir, --export's and the others'): every missing level made,
     * a trailing '/' and a folder there already fine, a file in the way named */
    char deep[1200], file[1200], under[1300];
    snprintf(deep, sizeof deep, "%s/out/run1/maps/", dir);
    ok = files_make_dir(deep, 0777, msg, sizeof msg) == 0;
    struct stat sb;
    snprintf(want, sizeof want, "%s/out/run1/maps", dir);
    check(ok && stat(want, &sb) == 0 && S_ISDIR(sb.st_mode),
          "files_make_dir makes out/run1/maps/ and the folders above it%s%s", ok ? "" : ": ", msg);
    check(files_make_dir(deep, 0777, msg, sizeof msg) == 0,
          "files_make_dir: a folder there is fine");
    path_join(file, sizeof file, dir, images[0]); /* a file, not a folder */
    snprintf(under, sizeof under, "%s/sub", file);
    check(files_make_dir(file, 0777, msg, sizeof msg) == -1 && strstr(msg, images[0]) &&
              strstr(msg, "exists and is not a directory"),
          "files_make_dir on a file: refused, naming it (%s)", msg);
    check(files_make_dir(under, 0777, msg, sizeof msg) == -1 && strstr(msg, images[0]) &&
              strstr(msg, "exists and is not a directory") && !strstr(msg, "/sub"),
          "files_make_dir below a file: refused, naming the file in the way (%s)", msg);
    check(files_make_dir("", 0777, msg, sizeof msg) == -1,
          "files_make_dir of an empty name: refused");
    return t_finish("test_files");
}
