/* text.h - text as SDL surfaces: a font found with fontconfig, drawn with SDL2_ttf.
 * The renderer turns the surfaces into textures (render.c). */
#ifndef VITLENS_TEXT_H
#define VITLENS_TEXT_H

#include <SDL.h>
#include <SDL_ttf.h>

typedef struct Text {
    TTF_Font *font; /* NULL: no font, text is not drawn */
    int size_px;    /* the size font is set to now */
    char path[1024];
} Text;

/* Find "DejaVu Sans" (else fontconfig's best "sans-serif") and open it. The
 * env var VITLENS_FONT, if set, names a font file to use instead. Returns 0, or
 * -1 with a message in msg (then the app runs without text). */
int text_init(Text *t, char *msg, size_t msg_bytes);
/* Start fontconfig's lookup of the font on a thread of its own, so that it runs while
 * the window opens; text_init waits for it (and does it itself when not started). */
void text_lookup_start(void);
/* Wait for a lookup started and not used (the app ends before it opens its window). */
void text_lookup_end(void);
void text_free(Text *t);

/* Render a UTF-8 string at size_px as white text with alpha, RGBA bytes
 * (SDL_PIXELFORMAT_ABGR8888). NULL when there is no font or on error.
 * Free with SDL_FreeSurface. */
SDL_Surface *text_render(Text *t, const char *utf8, int size_px);

#endif
