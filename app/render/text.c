/* text.c - a font via fontconfig, text via SDL2_ttf. */
#include "render/text.h"

#include <fontconfig/fontconfig.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Path of the font fontconfig matches for `family`, into path. 0 on success.
 * FcFontMatch always returns something (its best guess), so the caller tries
 * the family it wants first and accepts the fallback second. */
static int find_font(char *path, size_t n, const char *family) {
    int rc = -1;
    FcPattern *pat = FcNameParse((const FcChar8 *)family);
    if (!pat) return -1;
    FcPatternAddInteger(pat, FC_WEIGHT, FC_WEIGHT_REGULAR);
    FcConfigSubstitute(NULL, pat, FcMatchPattern);
    FcDefaultSubstitute(pat);
    FcResult res;
    FcPattern *match = FcFontMatch(NULL, pat, &res);
    FcChar8 *file = NULL;
    if (match && FcPatternGetString(match, FC_FILE, 0, &file) == FcResultMatch && file) {
        snprintf(path, n, "%s", (const char *)file);
        rc = 0;
    }
    if (match) FcPatternDestroy(match);
    FcPatternDestroy(pat);
    return rc;
}

/* The fonts fontconfig matches for the families text_init tries, in order; found on a
 * thread of its own (text_lookup_start) while the window opens, or by text_init. */
static const char *const families[] = {"DejaVu Sans", "sans-serif"};
static struct {
    SDL_Thread *thread;
    char path[2][1024]; /* "": no match */
    int ok;             /* FcInit succeeded */
} lookup;

/* The lookup (SDL thread function; also called directly): FcInit, which reads
 * fontconfig's cache and configuration, then each family's match into lookup.path;
 * FcFini after, since only the paths are needed. */
static int lookup_fonts(void *unused) {
    (void)unused;
    lookup.ok = FcInit();
    for (int i = 0; i < 2 && lookup.ok; i++)
        if (find_font(lookup.path[i], sizeof lookup.path[i], families[i])) lookup.path[i][0] = 0;
    if (lookup.ok) FcFini();
    return 0;
}

void text_lookup_start(void) {
    const char *env = getenv("VITLENS_FONT"); /* a font given by hand needs no lookup */
    if (lookup.thread || (env && *env)) return;
    lookup.thread = SDL_CreateThread(lookup_fonts, "vitlens-fonts", NULL);
}

void text_lookup_end(void) {
    if (lookup.thread) SDL_WaitThread(lookup.thread, NULL);
    lookup.thread = NULL;
}

int text_init(Text *t, char *msg, size_t msg_bytes) {
    memset(t, 0, sizeof *t);
    if (TTF_Init() != 0) {
        snprintf(msg, msg_bytes, "SDL_ttf: cannot initialise: %s", TTF_GetError());
        return -1;
    }
    t->size_px = 16;
    const char *env = getenv("VITLENS_FONT");
    if (env && *env) {
        snprintf(t->path, sizeof t->path, "%s", env);
        if (!(t->font = TTF_OpenFont(t->path, t->size_px))) {
            snprintf(msg, msg_bytes, "VITLENS_FONT=%s: cannot open font: %s", env, TTF_GetError());
            goto fail;
        }
        return 0;
    }
    /* the lookup started early, finished here; or, never started (headless), run now */
    if (lookup.thread)
        text_lookup_end();
    else
        lookup_fonts(NULL);
    if (!lookup.ok) {
        snprintf(msg, msg_bytes, "fontconfig: cannot initialise");
        goto fail;
    }
    for (int i = 0; i < 2 && !t->font; i++)
        if (lookup.path[i][0]) {
            snprintf(t->path, sizeof t->path, "%s", lookup.path[i]);
            t->font = TTF_OpenFont(t->path, t->size_px);
        }
    if (t->font) return 0;
    snprintf(msg, msg_bytes,
             "no usable font: fontconfig has none for \"DejaVu Sans\" or \"sans-serif\" that "
             "SDL_ttf can open (%s%s%s); install fonts-dejavu-core or set VITLENS_FONT=file.ttf",
             t->path[0] ? t->path : "no match", t->path[0] ? ": " : "",
             t->path[0] ? TTF_GetError() : "");
fail:
    TTF_Quit();
    memset(t, 0, sizeof *t);
    return -1;
}

void text_free(Text *t) {
    if (!t) return;
    if (t->font) { /* TTF_Init is counted: a successful text_init's TTF_Quit pairs with it */
        TTF_CloseFont(t->font);
        TTF_Quit();
    }
    memset(t, 0, sizeof *t);
}

SDL_Surface *text_render(Text *t, const char *utf8, int size_px) {
    if (!t->font || !utf8 || !*utf8) return NULL;
    if (size_px < 6) size_px = 6;
    /* one TTF_Font, resized on demand (SDL_ttf 2.0.18+), rather than a font per size */
    if (size_px != t->size_px) {
        if (TTF_SetFontSize(t->font, size_px) != 0) return NULL;
        t->size_px = size_px;
    }
    /* white glyphs, the coverage in alpha: the caller tints them (the ui shader's colour,
     * export_text's rgb); ABGR8888 is R, G, B, A bytes in memory on a little-endian host,
     * as glTexImage2D's GL_RGBA reads them */
    SDL_Color white = {255, 255, 255, 255};
    SDL_Surface *s = TTF_RenderUTF8_Blended(t->font, utf8, white);
    if (!s) return NULL;
    SDL_Surface *rgba = SDL_ConvertSurfaceFormat(s, SDL_PIXELFORMAT_ABGR8888, 0);
    SDL_FreeSurface(s);
    return rgba;
}
