/* window.c - the SDL window: opened with its OpenGL 3.3 context and the renderer,
 * fullscreen with and without a window manager, the mouse's coordinates in framebuffer
 * px, and --stdin-drops' reader thread. */
#include "window/app.h"
#include "window/trace.h"

#include <SDL_syswm.h> /* F without a window manager: Xlib on X11 */
#include <stdio.h>
#include <string.h>

/* --stdin-drops: each line of stdin becomes an SDL_DROPFILE event, handled as a real drop. */
static int stdin_drops(void *unused) {
    (void)unused;
    char line[4096];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0]) continue;
        SDL_Event e;
        SDL_zero(e);
        e.type = SDL_DROPFILE;
        e.drop.file = SDL_strdup(line);
        if (e.drop.file && SDL_PushEvent(&e) != 1) SDL_free(e.drop.file);
    }
    return 0;
}

/* Does a window manager run on the window's X display? An EWMH manager keeps a
 * window named by the root window's _NET_SUPPORTING_WM_CHECK. 1 on other video
 * drivers (Wayland, ...), whose compositor always answers a fullscreen request. */
static int has_window_manager(SDL_Window *win) {
#if defined(SDL_VIDEO_DRIVER_X11) && defined(VITLENS_X11)
    SDL_SysWMinfo info;
    SDL_VERSION(&info.version);
    if (!SDL_GetWindowWMInfo(win, &info) || info.subsystem != SDL_SYSWM_X11) return 1;
    Display *dpy = info.info.x11.display;
    Atom check = XInternAtom(dpy, "_NET_SUPPORTING_WM_CHECK", True);
    Atom type = None;
    int format = 0;
    unsigned long n = 0, left = 0;
    unsigned char *data = NULL;
    int found = check != None &&
                XGetWindowProperty(dpy, DefaultRootWindow(dpy), check, 0, 1, False, XA_WINDOW,
                                   &type, &format, &n, &left, &data) == Success &&
                type == XA_WINDOW && n == 1;
    if (data) XFree(data);
    return found;
#else
    (void)win;
    return 1;
#endif
}

/* F: presenter mode. SDL asks the window manager (_NET_WM_STATE_FULLSCREEN) and
 * reports the display's size at once; with no manager to answer (kiosk, projector,
 * bare X, Xvfb) the X window kept its size and the frame was cut (issue 17). There
 * the window itself turns borderless and covers its display; the next F puts back
 * its place, size and border. One window per process: the saved geometry is static. */
static struct {
    int own; /* 1: fullscreen done here, not by SDL and a window manager */
    int x, y, w, h, bordered;
} fs_saved;

void app_toggle_fullscreen(App *app) {
    int fs = !app->fullscreen;
    char msg[300];
    /* leaving a fullscreen made here: the border, size and place saved on the way in */
    if (!fs && fs_saved.own) {
        SDL_SetWindowBordered(app->win, fs_saved.bordered ? SDL_TRUE : SDL_FALSE);
        SDL_SetWindowSize(app->win, fs_saved.w, fs_saved.h);
        SDL_SetWindowPosition(app->win, fs_saved.x, fs_saved.y);
        fs_saved.own = 0;
        app->fullscreen = 0;
        return;
    }
    /* no window manager: borderless, moved and sized to cover the window's display */
    if (fs && !has_window_manager(app->win)) {
        SDL_Rect r;
        int d = SDL_GetWindowDisplayIndex(app->win);
        if (d < 0 || SDL_GetDisplayBounds(d, &r) != 0) {
            snprintf(msg, sizeof msg, "fullscreen: %s", SDL_GetError());
            app_set_error(app, msg);
            return;
        }
        SDL_GetWindowPosition(app->win, &fs_saved.x, &fs_saved.y);
        SDL_GetWindowSize(app->win, &fs_saved.w, &fs_saved.h);
        fs_saved.bordered = !(SDL_GetWindowFlags(app->win) & SDL_WINDOW_BORDERLESS);
        SDL_SetWindowBordered(app->win, SDL_FALSE);
        SDL_SetWindowPosition(app->win, r.x, r.y);
        SDL_SetWindowSize(app->win, r.w, r.h);
        SDL_RaiseWindow(app->win);
        fs_saved.own = 1;
        app->fullscreen = 1;
        return;
    }
    if (SDL_SetWindowFullscreen(app->win, fs ? SDL_WINDOW_FULLSCREEN_DESKTOP : 0) != 0) {
        snprintf(msg, sizeof msg, "fullscreen: %s", SDL_GetError());
        app_set_error(app, msg);
        return;
    }
    app->fullscreen = fs;
}

/* SDL's mouse positions are in window points; on a HiDPI display the framebuffer has more
 * pixels than that, and everything the renderer keeps (hit tests) is in framebuffer px. */
void app_mouse_px(const App *app, int x, int y, float *fx, float *fy) {
    int ww = 1, wh = 1, fw = 1, fh = 1;
    SDL_GetWindowSize(app->win, &ww, &wh);
    SDL_GL_GetDrawableSize(app->win, &fw, &fh);
    *fx = (float)x * (float)fw / (float)(ww > 0 ? ww : 1);
    *fy = (float)y * (float)fh / (float)(wh > 0 ? wh : 1);
}

int app_open_window(App *app) {
    /* Without a display (an SSH session) SDL falls back to its offscreen driver, whose
     * window nobody sees: say so at once rather than wait invisibly. SDL_VIDEODRIVER set
     * by hand (offscreen on purpose) is the user's choice. */
    const char *asked = SDL_getenv("SDL_VIDEODRIVER");
    if (SDL_InitSubSystem(SDL_INIT_VIDEO) != 0 ||
        (!(asked && asked[0]) && SDL_GetCurrentVideoDriver() &&
         (!strcmp(SDL_GetCurrentVideoDriver(), "offscreen") ||
          !strcmp(SDL_GetCurrentVideoDriver(), "dummy")))) {
        const char *drv = SDL_GetCurrentVideoDriver();
        fprintf(stderr,
                "vitlens: no display to open a window on (%s%s; DISPLAY and WAYLAND_DISPLAY "
                "are %s)\n"
                "vitlens: without a window: --top K IMAGE prints the predictions, --export DIR "
                "IMAGE writes every map as PNG (see --help)\n",
                drv ? "SDL's video driver: " : "", drv ? drv : SDL_GetError(),
                SDL_getenv("DISPLAY") || SDL_getenv("WAYLAND_DISPLAY") ? "set" : "not set");
        return -1;
    }
    trace_startup(app, "video");
    /* OpenGL 3.3 core: what the shaders' #version 330 core asks for */
    SDL_GL_SetAttribute(SDL_GL_CONTEXT_MAJOR_VERSION, 3);
    SDL_GL_SetAttribute(SDL_GL_CONTEXT_MINOR_VERSION, 3);
    SDL_GL_SetAttribute(SDL_GL_CONTEXT_PROFILE_MASK, SDL_GL_CONTEXT_PROFILE_CORE);
    SDL_GL_SetAttribute(SDL_GL_DOUBLEBUFFER, 1);

    /* Square crop + status bar + room for the legend and the side panel (predictions,
     * attention distance); fits the usable display. */
    int h = 860;
    SDL_Rect usable;
    int has_usable = SDL_GetDisplayUsableBounds(0, &usable) == 0 && usable.h > 0;
    if (has_usable && usable.h * 0.88 < h) h = (int)(usable.h * 0.88);
    int w = (int)(h * 1.45f);
    if (has_usable && w > usable.w * 0.95) w = (int)(usable.w * 0.95);
    app->win =
        SDL_CreateWindow("vitlens", SDL_WINDOWPOS_CENTERED, SDL_WINDOWPOS_CENTERED, w, h,
                         SDL_WINDOW_OPENGL | SDL_WINDOW_RESIZABLE | SDL_WINDOW_ALLOW_HIGHDPI);
    if (!app->win) {
        fprintf(stderr, "vitlens: cannot open a window: %s\n", SDL_GetError());
        return -1;
    }
    SDL_SetWindowMinimumSize(app->win, 320, 320);
    /* text input only while CLIP's text box is open (textbox.c): the key that opens it is
     * then not typed into it, and no other key makes text events */
    SDL_StopTextInput();
    trace_startup(app, "window");
    if (!(app->gl = SDL_GL_CreateContext(app->win))) {
        fprintf(stderr, "vitlens: cannot create an OpenGL 3.3 core context: %s\n", SDL_GetError());
        return -1;
    }
    if (SDL_GL_SetSwapInterval(1) != 0) SDL_ClearError(); /* no vsync is fine */
    trace_startup(app, "context");

    char msg[4096], warn[1024];
    if (ren_init(&app->ren, app->win, msg, sizeof msg, warn, sizeof warn)) {
        fprintf(stderr, "vitlens: %s\n", msg);
        /* SDL shows an X11 message box from a forked child, which allocates: no other
         * thread may be running then (see app_init on forks and allocator locks), and
         * the app ends after the box anyway */
        worker_free(&app->worker);
        worker_free(&app->texter);
        text_lookup_end();
        if (SDL_ShowSimpleMessageBox(SDL_MESSAGEBOX_ERROR, "vitlens: cannot start", msg, app->win))
            fprintf(stderr, "vitlens: (no dialog: %s)\n", SDL_GetError());
        return -1;
    }
    if (warn[0]) fprintf(stderr, "vitlens: %s (running without text)\n", warn);
    trace_startup(app, "renderer");

    if (app->opt->stdin_drops) {
        SDL_Thread *t = SDL_CreateThread(stdin_drops, "vitlens-stdin", NULL);
        if (!t) {
            fprintf(stderr, "vitlens: cannot start the stdin reader: %s\n", SDL_GetError());
            return -1;
        }
        SDL_DetachThread(t); /* blocks in fgets; ends with the process */
    }
    return 0;
}
