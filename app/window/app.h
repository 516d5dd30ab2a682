/* app.h - the window's state: one App, and the functions of window/ that act on it.
 *
 * The App holds everything the window shows and where it stands: the model and its
 * two Scenes (the front one on screen, the back one the worker's), the View and its
 * maps as they were uploaded, the panels' texts, the perturbation animation, the
 * window and the renderer. It is made once (app.c), changed only on the GUI thread,
 * by the event switch (input.c) and the worker's results (jobs.c), and drawn as one
 * frame (frame.c). Which file does what:
 *
 *   app.c       the state: made from the options, saved on quit, freed
 *   window.c    the SDL window, its OpenGL context and renderer, fullscreen, stdin drops
 *   input.c     every key and mouse event: the one event switch
 *   controls.c  the on-screen controls: buttons for what the keys do most
 *   textbox.c   CLIP's text box (/): a phrase typed becomes the class the maps explain
 *   palette.c   the command palette (Ctrl+P): every command by name, filtered, run as its key
 *   requests.c  view -> requests: what the view on screen needs computed, here or on
 *               the worker, and its maps uploaded once they are there
 *   jobs.c      photos and models opened on the worker, and the worker's results
 *   perturb.c   Shift+P: the perturbation test of the map on screen, as an animation
 *   compare.c   the compare view: two panes (a second model or photo), one patch cursor
 *   score.c     --contrast A,B and --similar IMAGE2: the score the class-specific maps
 *               explain instead of a class, kept on the Scenes as the model and photos change
 *   status.c    the status line: what the view shows, the job running, the top-1 class
 *   frame.c     one frame: the RenFrame built from the App, drawn, saved (S), presented
 *   trace.c     VITLENS_TRACE: the launch's timeline, every frame's state, maps, curves
 *   live.c      a video file or a camera: the frame thread, its newest frame to the worker
 *   recording.c Ctrl+R: the window as drawn, frame by frame, into a video file
 *
 * No file here computes a map: they ask view/ (view_compute) and window/worker.c. */
#ifndef VITLENS_APP_H
#define VITLENS_APP_H

#include "config/keys.h"
#include "config/models.h"
#include "config/options.h"
#include "headless/lesson.h"
#include "media/media.h"
#include "media/recorder.h"
#include "render/render.h"
#include "view/compare.h"
#include "view/maps.h"
#include "window/worker.h"

#include <SDL.h>

/* A lesson step's picture drawn ahead (lesson.c): step `at` at a selection, for the
 * photo of app->loads, in a colormap; used: when last shown or drawn (LRU) */
typedef struct {
    uint8_t *rgb; /* [LESSON_H, LESSON_W, 3] as lesson_draw draws it (and --lesson-export) */
    uint8_t *fit; /* [h, w, 3] the same resampled to the size it is drawn at, or NULL */
    int w, h;     /* the size on the GPU: the picture's place in the window (1:1 sampling) */
    int valid, at, layer, head, row, col, colormap;
    unsigned long loads, used;
} LessonPicture;

/* Shift+P: where the perturbation test of the map on screen is */
typedef enum { PERT_OFF = 0, PERT_COMPUTING, PERT_PLAYING, PERT_DONE } PerturbPhase;

/* A video file or a camera on screen (live.c). The frame thread alone touches GStreamer (the
 * MediaSource lives on its stack); it keeps the newest frame here under `lock` and posts
 * `event`; the GUI thread hands that frame to the worker whenever the worker is idle. */
typedef struct {
    SDL_Thread *thread;
    SDL_mutex *lock;
    SDL_cond *wake;
    Uint32 event;    /* the frame thread's SDL event: a frame, the end or an error */
    MediaKind kind;  /* MEDIA_FILE or MEDIA_CAMERA */
    char what[1024]; /* the file or device, as given */
    /* under lock: the GUI's asks */
    int quit, paused;
    long seek; /* -1: none; else go to the frame of this index and publish it (a step) */
    /* under lock: the frame thread's newest frame and what it knows */
    uint8_t *rgb; /* [h, w, 3] the newest frame */
    size_t rgb_bytes;
    int w, h, have; /* have: rgb holds a frame the GUI has not taken yet */
    long index;     /* its index in the stream (media.h MediaFrame.index) */
    int64_t pts_ns; /* its timestamp */
    long dropped;   /* frames read that the model never ran (replaced before being taken) */
    Uint64 read_t;  /* when the frame thread got it from the source (performance counter) */
    int ended, notified;
    int64_t duration_ns; /* a file's length, -1 unknown */
    VitError err;        /* code != 0: the source failed or did not open */
    /* the GUI thread's own */
    int on;           /* a source is open (thread running) */
    uint8_t *job_rgb; /* [job_h, job_w, 3] the frame the worker runs or ran last (kept across
                         sources: a job may still read it) */
    size_t job_bytes;
    int job_w, job_h;
    long job_index;
    int64_t job_pts_ns;
    Uint64 job_read_t;   /* its read_t */
    Uint64 shown_read_t; /* a frame's read_t once its Scene is in front, until it is on screen */
    long shown_index;    /* the frame on screen, -1: none yet */
    int64_t shown_pts_ns;
    long n_shown;
    Uint64 shown_t[16]; /* when the last 16 frames were shown (performance counter) */
    double fps;         /* frames shown per second, over them */
    int rerun;          /* the frame on screen again once the worker is idle (an intervention) */
    int stepping;       /* a step asked, its frame not run yet (or the file ended first) */
    int paused_traced;  /* the trace's "live paused" line printed for this pause */
} Live;

/* Ctrl+R: the window recorded to a video file (recording.c). The frames drawn while it is on
 * are read back from the canvas and queued for GStreamer's encoder (media/recorder.h), each
 * at the time it was drawn; the encoding runs on GStreamer's threads. */
typedef struct {
    int on;                /* 1: each frame drawn goes to the file */
    int saving;            /* stopped: the file being finished (the event says when) */
    Recorder rec;          /* its file's path, frames, dropped */
    Uint32 event;          /* posted from GStreamer's thread: the file done, or an error */
    Uint64 t0;             /* performance counter at the first frame (its timestamp 0) */
    char name[512];        /* the file's name without its folder, for the status line */
    char dump[1024];       /* $VITLENS_RECORD_DUMP: each frame also as DIR/rec_NNNNNN.ppm (tests) */
    long n_timed;          /* frames drawn while on (recorded or dropped) */
    double ms_sum, ms_max; /* the GUI thread's time per frame: the read and the hand-over */
} Recording;

typedef struct App {
    const Options *opt;
    SDL_Window *win;
    SDL_GLContext gl;
    Ren ren;
    Worker worker;
    /* the zero-shot classes' texts (classes.c): a second worker embeds them (--classes
     * imagenet: a minute the first time) while the window and the first worker go on */
    Worker texter;
    struct {
        int busy;        /* the texter runs a classes job */
        int again;       /* a newer model's classes: started when the texter is idle */
        int ready;       /* its result waits for the worker to be idle to make the head */
        const Model *of; /* the model the running or ready job embeds for */
        Model *retired;  /* a model replaced while the texter read it: freed at its event */
        int done, total; /* the progress last drawn (texts) */
        Uint64 t0;       /* when the job started (trace) */
    } classes;
    Uint32 ev_done; /* worker finished a job (either worker: user.data1 says which) */
    Uint32 ev_live; /* the frame thread has a frame, an end or an error (live.c) */
    Live live;
    Recording rec; /* Ctrl+R (recording.c) */

    Model *model;    /* current model (heap) */
    Scene scenes[2]; /* scenes[front] is on screen, the other is the worker's back buffer */
    /* What if? The interventions asked (--ablate, ..., then the keys: Delete, 7, 8, 9,
     * Backspace, Ctrl+click), and each Scene's own copy built for the model when its photo
     * job starts (app_open), so that changing them never touches the Scene on screen */
    IntervSpec iv_spec;
    Interv interv[2]; /* scenes[i].interv */
    int patch_fill;   /* Ctrl+click / drag: 0 drops patches, 1 fills them (key 7) */
    int drag_on;      /* Ctrl+drag: the patches crossed get this state (1 set, 0 cleared) */
    int drag_active, drag_moved;
    /* the modifiers as of the last key event handled: a click is read with the keys held when
     * it happened (SDL_GetModState() is already past the queued key-ups when events pile up) */
    SDL_Keymod key_mod;
    int front, has_scene;
    float *map;      /* [h, w] raw values of the current map (w x h: map_kind_size) */
    float *map_norm; /* [h, w] normalised for display */
    uint8_t *mask;   /* [h, w] the attention mask */
    float *atlas;    /* [L * (H + 3), h, w] the overview's maps, normalised */
    ViewMaps vm;     /* the maps being computed (here, or by the worker during a view job)
                        into its own buffers, which then swap with map, map_norm, atlas */
    ViewMaps shown;  /* what view_compute said of the maps on screen (status, list) */
    /* what the atlas on the GPU was computed for: a key that changes only the
     * selection (the table's layer or head, the heads' head) redraws it, no more */
    struct {
        unsigned long loads; /* the scene (0: none) */
        ViewOverview mode;
        View view; /* the fields its kind reads; layer: VIEW_HEADS only */
        int shared;
        char legend_hi[32], legend_lo[32], legend_caption[32];
    } atlas_of;
    float map_lo, map_hi;
    int map_w, map_h;                    /* of the current map */
    int has_prefix;                      /* the kind has a prefix-token share */
    float prefix_share[VIT_MAX_PREFIX];  /* [Np] the view's row at the prefix tokens */
    char prefix_name[VIT_MAX_PREFIX][8]; /* "CLS", "reg1", ... */
    const char *prefix_names[VIT_MAX_PREFIX];

    View view;
    KeyList keys;        /* for the help overlay, as --help lists them */
    KeyList lesson_keys; /* the lesson's help overlay */
    int overlay, grid, help;
    int help_page; /* the help's page (H turns them when the keys take more than one) */
    float opacity;
    ViewOverview overview;
    int colormap, shared_scale, bilinear;
    int show_mask, mask_pct, mask_kept; /* mask fraction in percent */
    int show_preds, show_distance;
    char model_path[1024];  /* the current model's weights: remembered on quit */
    char labels_path[1024]; /* and its labels file, "" if none */
    char next_labels[1200]; /* labels for the next model app_open starts ("": --labels) */
    /* W: the downloaded models in the list panel, Up / Down, Enter opens one, Esc closes */
    int picking, n_picks, pick;
    ModelEntry picks[REN_MAX_LIST];
    int cursor_row, cursor_col; /* the keyboard's patch cursor */
    int hover_row, hover_col;   /* the patch under the mouse, -1: none */
    int hover_cell;             /* the overview cell under the mouse, -1: none */
    float mouse_x, mouse_y;     /* framebuffer px */
    int fullscreen;
    /* the on-screen controls (controls.c): on / off (Tab, remembered); the items of the
     * last frame (RenFrame.controls) with the table row each shows; the row under the
     * mouse and the one held down (-1: none) */
    int show_controls;
    int n_ctrl, ctrl_row[REN_MAX_CONTROLS];
    RenControl ctrl[REN_MAX_CONTROLS];
    char ctrl_label[REN_MAX_CONTROLS][64], ctrl_sizer[REN_MAX_CONTROLS][64];
    int ctrl_hover, ctrl_pressed;
    /* the map kinds' menu (a click on the kind's name): open; its rows as last drawn, the
     * kind of each (MAP_KINDS' order) and the row under the mouse (-1: none) */
    int kind_menu, n_menu, menu_hover;
    RenControl menu[REN_MAX_MENU];
    int save_pending;
    unsigned long saves;

    char **images; /* the command line's images (slideshow), [n_images] */
    int n_images, image_at;
    JointFeatures joint; /* the slideshow's features, for the feature PCA over every photo */
    PcaHold pca_hold;    /* the feature PCA's basis held over the video's frames (Shift+C refits) */

    /* the list panel: the logit lens's class per layer, the high-norm tokens */
    int n_list, list_marked, n_high_norm;
    int high_norm[VIT_MAX_PREFIX + 1024]; /* the high-norm tokens of the view (token norms) */
    char list_title[96];
    char list_text[REN_MAX_LIST][96];
    const char *list_labels[REN_MAX_LIST];
    float list_values[REN_MAX_LIST];
    char list_right_text[REN_MAX_LIST][16];
    const char *list_right[REN_MAX_LIST];

    int busy;           /* a job is running */
    int class_kind;     /* the class-specific kind 1-5 and a click on the panel switch to */
    int shown_kind;     /* the kind of the map on screen (a class-specific view waiting for
                           its maps keeps showing the one before), -1: none */
    char pending[1024]; /* dropped while busy: started next (the latest wins) */
    char photo[1024];   /* the photo last asked for (N steps on from it), "" if none */
    char error[600];    /* shown on the error line until the next success */
    char notice[600];   /* shown on the right of the status line until the next key */
    char status_left[1024], status_right[256]; /* left: room for every part in full */
    char legend_hi[32], legend_lo[32], legend_caption[32];
    char pred_text[REN_MAX_PREDS][128];
    char dist_caption[96], tooltip[128];
    char cell_labels[VIT_MAX_LAYERS * 4][32]; /* overview labels: "head " + an int + ", ablated" */
    const char *cell_label_ptrs[VIT_MAX_LAYERS * 4];
    char col_text[VIT_MAX_LAYERS][12];
    const char *col_ptrs[VIT_MAX_LAYERS], *row_ptrs[VIT_MAX_LAYERS * 4];
    int announce;        /* print "ready" after the next frame */
    int announce_maps;   /* set announce once the view job of a new photo is shown */
    unsigned long loads; /* worker jobs finished, for the trace */
    int trace;           /* VITLENS_TRACE */
    unsigned long frames;
    /* Shift+P: the perturbation test of the map on screen, as an animation */
    struct {
        PerturbPhase phase;
        int most_first;       /* the order of the run asked for last */
        unsigned long id;     /* the run asked for last: a finished job of another is dropped */
        Perturbation *job;    /* the run the worker computes (its own until the event), or NULL */
        Perturbation *queued; /* asked for while the worker was busy: started next, or NULL */
        Perturbation run;     /* the run on screen (PERT_PLAYING, PERT_DONE) */
        Perturbation ghost;   /* the other order's run of the same map, drawn dim, or zeroed */
        Uint32 t0;            /* SDL_GetTicks when the animation started */
        int step;             /* the step on screen, -1: none yet */
        int announce;         /* print the trace's "perturb done" line after the next frame */
        uint8_t *removed;     /* [N] 1: removed at `step` */
        char title[64], subtitle[160], caption[96], ghost_caption[96];
    } pert;
    /* the lesson view (lesson.c): a mode of the window, Page Down opens it, Esc leaves */
#define LESSON_CACHE 3
    struct {
        int on, loaded;      /* in the lesson view; its script read */
        LessonScript script; /* the steps (--lesson FILE, else the default lesson) */
        int at;              /* the step on screen, 0 .. script.n - 1 */
        int layer, head;     /* the selection, 0-based: the script line's, moved by keys */
        int row, col;        /* the patch (the query token inside the block) */
        /* the selection each step was left at (layer, head, row, col), for paging back:
         * valid where visited[i]; forgotten when the model or the steps change (sel_of) */
        int chosen[LESSON_MAX_LINES][4];
        unsigned char visited[LESSON_MAX_LINES];
        int sel_of[5]; /* n_layers, n_heads, grid_h, grid_w, steps: what chosen is for */
        LessonData ld; /* the numbers, for the front Scene of loads ld_loads */
        int ld_ok;
        unsigned long ld_loads;
        /* pictures drawn ahead: the step shown and its neighbours (app_lesson_prefetch),
         * each [LESSON_H, LESSON_W, 3] for the selection it was drawn with */
        LessonPicture cache[LESSON_CACHE];
        unsigned long cache_clock;
        int shown;                   /* the picture on the GPU is the step's */
        int ahead;                   /* neighbouring steps may still be drawn ahead */
        float ms_picture, ms_upload; /* the last step's drawing on the CPU, its upload (trace) */
        float ms_gui; /* the GUI thread's time for the last key: its handling, and the picture
                         drawn when its block job is done (trace) */
        /* the explorer as the lesson found it: Esc goes back there */
        View back_view;
        ViewOverview back_overview;
        int back_row, back_col;
    } lesson;
    /* CLIP's text box (textbox.c): / opens it on the status line, Enter applies, Esc
     * cancels; the phrase's embedding is a worker job, its head made when it is done */
    int typing;                          /* the box is open: the keys type */
    char typed[CLIP_TEXT_BYTES];         /* its text, UTF-8 */
    int typed_all;                       /* typed is the last phrase, selected: a character or
                                            Backspace replaces it, an arrow keeps it to edit */
    char queued_phrase[CLIP_TEXT_BYTES]; /* applied while the worker was busy: next, "" none */
    char pred_wait[96]; /* the top-5 panel's title while the classes' texts are embedded */
    Uint64 t_phrase;    /* when Enter applied the phrase whose map is awaited (trace), 0: none */
    /* the command palette (palette.c): Ctrl+P or its button opens it over the window; the
     * commands of the view it opened in (keys_commands), the filter typed, the rows that
     * match it (indices into cmds), the selection and the first row shown (indices into
     * match), the rows as last drawn */
    struct {
        int open, lesson;
        char filter[64];
        CommandList cmds;
        int match[COMMANDS_MAX], n_match, sel, first;
        RenControl rows[COMMANDS_MAX];
        char count[32];
    } palette;
    /* the compare view (compare.c): --compare MODEL2, --compare-image IMAGE2 or \ open it
     * (once pane B's model and photo have run on the worker), Esc leaves. Pane A is the
     * explorer's view (app->view on the front Scene), pane B the same settings on Scene
     * `scene` through `model` (the app's for a second photo); both drawn on the CPU into one
     * picture (renderer slot COMPARE_SLOT), the maps as view_compute gives them. */
    struct {
        int on;        /* in the compare view */
        int by_image;  /* pane B's photo: image_path (1), else the one on screen */
        int linked;    /* layer, head and query move together (;: apart) */
        int show_diff; /* the difference pane (A - B) on, when the grids are one */
        int loading;   /* pane B's job runs on the worker */
        int queued;    /* asked while the worker was busy: started when it is idle */
        int want;      /* open the view when pane B's job is done */
        int has_scene; /* scene holds pane B's run */
        Model *model;  /* pane B's second model (heap), NULL: the app's */
        Scene scene;   /* pane B's photo through it */
        char model_path[1024], image_path[1024]; /* the last second model / photo, "" */
        char model_loaded_from[1024];            /* the path `model` was loaded from */
        char labels_path[1200];                  /* the second model's labels, "" */
        View view_b;                             /* pane B's view (linked: made from app->view) */
        ViewMaps m[2];      /* the panes' maps (view_compute), into their own buffers */
        int ok[2];          /* m[i] holds the pane's map */
        char why[2][160];   /* why not, for the status line */
        float *diff;        /* [N] A - B of the normalised maps, when the grids are one */
        int has_diff;       /* the difference pane is drawn */
        CompareStats stats; /* of the two maps on A's grid (B resampled when grids differ) */
        uint8_t *base;      /* [h, w, 3] the panes as drawn (the renderer draws the boxes) */
        uint8_t *fit[2];    /* [fit_h, fit_w, 3] panes A's and B's crops fitted to the pane */
        const void *fit_sc[2];
        unsigned long fit_gen[2]; /* what each was fitted from (app->loads, gen) */
        int fit_w[2], fit_h[2];
        int w, h, n_panes;
        int pane_x[3], pane_y[3], pane_w[3], pane_h[3]; /* each crop's place in the picture */
        unsigned long gen;               /* pane B's runs so far (a new one redraws) */
        int hover_pane, hover_patch;     /* the patch under the mouse (-1: none) */
        int box_patch;                   /* the patch at the same place in the other pane, -1 */
        unsigned char key[512];          /* what base was drawn from (a CompareKey) */
        float box[3][4], box_rgba[3][4]; /* the cursor's boxes of the last frame */
        int uploaded;                    /* base is on the GPU */
        double ms_maps, ms_picture;      /* the last maps and picture took (trace) */
    } cmp;
    /* --contrast A,B and --similar IMAGE2 (score.c): the score the class-specific maps explain
     * instead of a class. Set on the Scenes (Scene.score) only while the worker is idle:
     * asked while it is busy, `pending` until its event. */
    struct {
        int kind;          /* APP_SCORE_NONE, APP_SCORE_CONTRAST, APP_SCORE_SIMILAR */
        char arg[512];     /* --contrast's A,B, resolved again for every model */
        SceneScore a, b;   /* pane A's (the app's Scenes); pane B's (--similar: seen from
                              IMAGE2, the cosine with pane A's photo) */
        float *e_a, *e_b;  /* [E] the pooled embeddings of pane A's and B's photos (--similar:
                              b's reference and a's), NULL until both have run */
        int dim;           /* E of e_a and e_b */
        double cosine;     /* cos(e_a, e_b) */
        int pending;       /* asked while the worker was busy: app_score_sync when it is idle */
        unsigned long gen; /* changes whenever a Scene's score does (what a picture was of) */
    } score;
    int running, dirty;
    Uint64 t_input; /* when the first key since the last frame was handled, 0: none */
    int again;      /* ren_present asked for another frame */
} App;

/* ---------------------------------------------------------------------------
 * app.c: the state */

/* Make the App from the options: the model loaded, the first photo handed to the worker,
 * the window, its OpenGL context and the renderer made (app_open_window). 0; -1 with a
 * message on stderr (then app_free what was made); -2 likewise when an option's value does
 * not fit the model (--ablate 13:1 on 12 layers: bad usage, exit 2). */
int app_init(App *app, const Options *o);

/* On quit: what the window shows, for the next run (settings.h); the built-in model is
 * not remembered, so that a run without --model stays on it. */
void app_save_settings(const App *app);

/* Stop the worker (first: it may still use the model and a Scene), free everything,
 * close the window. Accepts a half-made App. */
void app_free(App *app);

/* The Scene on screen, or NULL before the first photo. */
const Scene *app_scene(const App *app);

/* msg on the error line (until the next success) and on stderr. */
void app_set_error(App *app, const char *msg);

/* The query patch's (row, col) on the grid: 1, or 0 when the query is a prefix token. */
int app_query_patch(const App *app, int *row, int *col);

/* The class's first name ("tabby" of "tabby, tabby cat"), or "class 281". */
void app_class_name(char *buf, size_t n, const App *app, int cls);

/* ---------------------------------------------------------------------------
 * window.c: the SDL window */

/* SDL's video, the window (sized to the usable display), an OpenGL 3.3 core context,
 * the renderer (ren_init), and --stdin-drops' reader. 0, or -1 with a message on stderr
 * (no display, no context, a shader that does not compile: also in a dialog). */
int app_open_window(App *app);

/* F: fullscreen on / off; without a window manager the window itself covers the display. */
void app_toggle_fullscreen(App *app);

/* Window coordinates (SDL's mouse events) to framebuffer px (high-DPI). */
void app_mouse_px(const App *app, int x, int y, float *fx, float *fy);

/* ---------------------------------------------------------------------------
 * input.c: the one event switch, and the actions keys and the on-screen controls share */

/* A key, a click, a mouse move, a dropped file, a window event or the worker's event. */
void app_handle_event(App *app, const SDL_Event *e);

/* A key pressed: what it does in the view on screen (the lesson's keys there), as from the
 * keyboard; one that moves the view ends a perturbation test. The palette runs its commands
 * through here. */
void app_key_press(App *app, const SDL_Keysym *ks);

/* The actions a key and an on-screen button both perform (controls.c's table holds them):
 * each changes the View and returns 1 when the map changed (the caller then asks for it:
 * app_update_map), 0 when it changed nothing (the end of the layers, ...). */
int app_step_layer(App *app, int step);   /* Left / Right: the layer -1 / +1 */
int app_step_head(App *app, int step);    /* Up / Down: the head -1 / +1, past the last head
                                             the fusions (mean, max, min) */
int app_set_fusion(App *app, int fusion); /* the VitFusion of the heads (Up / Down reach it) */
/* E / Shift+E: the next / previous kind of the table (step +1 / -1); without a
 * classification head the class-specific ones are passed over, and the status line says
 * why. Returns 1. */
int app_step_kind(App *app, int step);
/* H: the help overlay on, its next page (Ren.help_pages), off after the last; returns 0 */
int app_toggle_help(App *app, int unused);
/* The map kind `kind` (a row of MAP_KINDS), as its own key or E lands on it: 0 when it is on
 * screen already or the model cannot have it (map_kind_usable: a class-specific kind without
 * a classification head), else 1. */
int app_set_kind(App *app, int kind);
/* The lesson's next / previous step (step +1 / -1): what Page Down / Page Up do, through
 * the key's own path. Returns 0 (that path asks for the map itself). */
int app_lesson_step(App *app, int step);

/* ---------------------------------------------------------------------------
 * controls.c: the on-screen controls */

/* Is a lesson on screen (its steps' buttons shown)? 0 until the lesson view is merged. */
int app_lesson_active(const App *app);

/* The controls shown (none when app->show_controls is 0) into f, with their labels made
 * from the View; the items and their rows kept in the App for the mouse. */
void app_controls_frame(App *app, RenFrame *f);

/* The table row of the control under framebuffer point (x, y) in the last frame, or -1. */
int app_control_at(const App *app, float x, float y);

/* A click on control `row`: its action, the one its key performs (nothing for a read-out
 * or a dimmed button); the map asked for when it changed. */
void app_control_press(App *app, int row);

/* The tooltip of the control under the mouse (what it does and its key), or NULL. */
const char *app_control_tip(const App *app);

/* A control row's name for the trace ("layer-next"), "-" for none. */
const char *app_control_name(int row);

/* The kind of the map kinds' menu row under framebuffer point (x, y) in the last frame, or
 * -1 (no menu open, or not on a row). */
int app_menu_at(const App *app, float x, float y);

/* A click while the kinds' menu is open: on a row, that kind (app_set_kind) and the menu
 * closes; on the kind's button, the menu closes; elsewhere too, and the click does nothing
 * more. */
void app_menu_click(App *app, float x, float y);

/* ---------------------------------------------------------------------------
 * textbox.c: CLIP's text box */

/* /: open the text box (the phrase on screen in it, to edit); for a model that cannot
 * embed a phrase (not CLIP, no text tower, no vocabulary) the status line says why.
 * Returns 0 (the map changes when the phrase is applied). */
int app_text_open(App *app, int unused);
/* Can the model on screen embed a phrase (a CLIP model with its text tower and vocabulary)? */
int app_text_can(const App *app);
/* Why it cannot ("is not a CLIP model: ..."), or NULL when it can. Static or the model's. */
const char *app_text_why(const App *app);
/* A key while the box is open: Esc, Enter, Backspace, Ctrl+U (clear), Ctrl+V (paste);
 * every key is the box's then. 1 when it was open. */
int app_text_key(App *app, const SDL_Keysym *ks);
/* SDL_TEXTINPUT while the box is open: the characters typed, appended. */
void app_text_input(App *app, const char *utf8);
/* The phrase's embedding on the worker, or after the running job when busy. */
void app_phrase_start(App *app, const char *phrase);
/* The worker's phrase job is done: the phrase becomes the head's last class, the view
 * explains it (the photo runs again when the head's size changed). */
void app_phrase_done(App *app);

/* ---------------------------------------------------------------------------
 * classes.c: the zero-shot classes embedded on the second worker */

/* Start embedding the model's pending classes (ClipSpec.defer), cancelling a job for an
 * older model (it starts when that one has stopped). Nothing when none are pending. */
void app_classes_start(App *app);
/* The texter's event: its classes made the head (when the worker is idle, else later by
 * app_classes_idle), or its error shown; a cancelled job's model freed, the next started. */
void app_classes_done(App *app);
/* The worker is idle: a result that waited for it made the head. */
void app_classes_idle(App *app);
/* A model about to be replaced: 1 when the texter still reads it (kept in classes.retired,
 * freed at the texter's event; its job cancelled), 0 when the caller frees it. */
int app_classes_retire(App *app, Model *old);
/* While classes are pending: "waiting for the class texts (1200 / 7000)" into buf, 1; else 0. */
int app_classes_waiting(const App *app, char *buf, size_t n);
/* The status line and the trace: the progress drawn last changed? (redraw then) */
int app_classes_tick(App *app);

/* ---------------------------------------------------------------------------
 * palette.c: the command palette */

/* Ctrl+P, the ☰ button: open the palette on every command of the view on screen (the
 * explorer's, the lesson's), or close it. Returns 0. */
int app_palette_toggle(App *app, int unused);
void app_palette_close(App *app);
/* A key while the palette is open: Esc closes, Enter runs the selection (a greyed one says
 * why on the status line), Up / Down / Page Up / Page Down / Home / End move it, Backspace
 * and Ctrl+U edit the filter; every key is the palette's then. 1 when it was open. */
int app_palette_key(App *app, const SDL_Keysym *ks);
/* SDL_TEXTINPUT while it is open: the characters typed, appended to the filter. */
void app_palette_input(App *app, const char *utf8);
/* The pointer at framebuffer (x, y): the row under it selected. */
void app_palette_hover(App *app, float x, float y);
/* A click while it is open: on a row, that command runs; beside the palette, it closes. */
void app_palette_click(App *app, float x, float y);
/* The mouse wheel: the rows scrolled by `rows` (positive: down), the selection kept on one. */
void app_palette_wheel(App *app, int rows);
/* The palette's field and rows into f (nothing when closed). */
void app_palette_frame(App *app, RenFrame *f);
/* The selected command's tag for the trace, "-" for none. */
const char *app_palette_selected(const App *app);
/* VITLENS_TRACE's "palette ..." line, when it changed since the last one printed. */
void app_palette_trace(const App *app);

/* ---------------------------------------------------------------------------
 * requests.c: view -> requests */

/* Recompute the maps of the current view (and the overview, the mask) and upload them:
 * here when that is quick, else on the worker (the old maps stay on screen meanwhile). */
void app_update_map(App *app);

/* The maps app->vm holds (computed here or by the worker: by "gui" or "worker") go on
 * screen: its buffers swap with the ones shown, then the uploads, the legend, the mask,
 * the list, the overview. */
void app_show_maps(App *app, const char *by);

/* Is a view job's result m what the window shows now: the single map of the view, with
 * the overview's atlas, if one is on, already on the GPU? */
int app_maps_current(const App *app, const ViewMaps *m);

/* The list panel: the downloaded models while W's list is open, else the view's list
 * as view_compute made it (the logit lens per layer, the high-norm tokens). */
void app_update_list(App *app);

/* ---------------------------------------------------------------------------
 * jobs.c: the worker's jobs and results */

/* Start loading a photo, or a model when path ends in .safetensors (the current
 * photo is then run through it). While busy, the path waits for the running job. */
void app_open(App *app, const char *path);

/* Shift+drop: a model (as app_open tells one) for the compare view's pane B on the photo
 * on screen, or a photo for pane B through the app's model (app_compare_open). */
void app_compare_drop(App *app, const char *path);

/* The worker is done: its result; then a perturbation test asked for meanwhile. */
void app_job_done(App *app);

/* The worker on a video's frame: rgb [h, w, 3] (the caller's, unchanged until the event) runs
 * as the photo named name ("clip.webm#12"), into the back Scene as a photo's does (idle
 * worker only). */
void app_open_frame(App *app, const char *name, const uint8_t *rgb, int w, int h);

/* ---------------------------------------------------------------------------
 * live.c: a video file or a camera */

/* Open a video file (MEDIA_FILE: a path or URI) or a camera (MEDIA_CAMERA: a V4L2 device) in
 * the window, closing the one open before: its frame thread starts (the opening happens there:
 * the window never waits), its frames go to the worker as it gets idle. A file plays at its
 * pace and stops on its last frame. Errors come as the event (app_live_event). */
void app_live_open(App *app, MediaKind kind, const char *what);
/* Close the source (its thread joined); the picture on screen stays. Accepts none open. */
void app_live_close(App *app);
/* The frame thread's event: an error on the error line (the source closed), else the frame
 * to the worker if it is idle (app_live_feed). */
void app_live_event(App *app);
/* The worker idle (after its event, or now): the newest frame not yet run goes to it (not
 * while paused, except a step's); or the frame on screen again when asked (rerun). */
void app_live_feed(App *app);
/* Is a frame waiting for the worker? The worker's other jobs for the view (the class-specific
 * maps, a worker's map) wait then: the frames go first, those maps follow when it is idle or
 * paused (app_live_feed asks for them). */
int app_live_waiting(const App *app);
/* The worker's frame job swapped its Scene in front: the frame shown's index, time, the
 * frames per second; VITLENS_TRACE's "live frame" line. */
void app_live_shown(App *app);
/* The frame drawn at `shown` (performance counter, after the swap) is the first to show a new
 * video frame: its latency, from the frame thread's read to the swap, as VITLENS_TRACE's "live
 * latency index=N ms=M" line (issue 37's camera-to-screen time; bench/live.py). */
void app_live_presented(App *app, Uint64 shown);
/* Space, `,` and `.` while a source is open: pause / play, one frame back / forward (a file;
 * pauses). 1 when the key was one of them. */
int app_live_key(App *app, SDL_Keycode key, int shift);
/* Shift+C: the features PCA's colours held over the video's frames (PcaHold) fitted again,
 * on the frame on screen when the map shows (else on the next frame drawn); on a photo a
 * notice says they are its own. */
void app_pca_refit(App *app);
/* The status line's part for the source: "video 0:03.2 / 0:06.0, 9.8 fps, 3 dropped, paused",
 * "" when none is open. */
void app_live_status(const App *app, char *buf, size_t n);

/* ---------------------------------------------------------------------------
 * recording.c: Ctrl+R, the window into a video file */

/* Ctrl+R: start recording into --save-dir (STEM_MODEL_recN.webm, the first N free), or stop:
 * the file is finished on GStreamer's threads and the event says when. Start and stop go on
 * the status line; an error (no encoder, a folder that cannot be written) on the error line,
 * the window as it was. */
void app_record_toggle(App *app);
/* A frame was drawn (the canvas holds it): while recording, its pixels to the encoder with
 * the time since the first frame; VITLENS_TRACE's "record frame" line. */
void app_record_frame(App *app);
/* The recorder's event: the file finished ("saved NAME, N frames") or the recording failed
 * (the disk full: the error line). */
void app_record_event(App *app);
/* The status line's part: "recording to NAME", "saving NAME...", or "". */
void app_record_status(const App *app, char *buf, size_t n);
/* Quitting: a recording stopped and its file finished (waits at most a few seconds). */
void app_record_close(App *app);

/* ---------------------------------------------------------------------------
 * lesson.c: the lesson view */

/* Open the lesson view (Page Down in the explorer, --lesson at start): the script's step
 * where it was left, step 1 the first time. */
void app_lesson_open(App *app);
/* A key: in the lesson view its keys (Page Down / Right / Space next, Page Up / Left /
 * Backspace previous, Home, End, Up / Down block, Shift+Up / Down head, I J K L patch,
 * Esc back to the explorer at the same layer, head and query token, F, S, Q); in the
 * explorer Page Down / Page Up open it. 1 when the key was the lesson's. */
int app_lesson_key(App *app, const SDL_Keysym *ks);
/* The step's numbers and picture again (a new photo or model, the worker done). */
void app_lesson_show(App *app);
/* The worker's lesson job (the block rerun) is done: the step drawn at the newest
 * selection (another job when the keys moved on to another block), or, out of the lesson
 * meanwhile, the explorer's map. */
void app_lesson_job_done(App *app);
/* Between events (the main loop, idle): one neighbouring step's picture drawn ahead and
 * put on the GPU (the worker idle), so that the next Page Down or Page Up is a frame.
 * 1 when it drew one (call again), 0 when there is nothing left (lesson.ahead cleared). */
int app_lesson_prefetch(App *app);
/* The frame in the lesson view: the picture alone, no overlay, panels or tooltip. */
void app_lesson_frame(App *app, RenFrame *f);
/* The status line in the lesson view: "lesson · step 4 of 17: ...". */
void app_lesson_status(App *app);
void app_lesson_free(App *app);

/* ---------------------------------------------------------------------------
 * compare.c: the compare view */

#define COMPARE_SLOT (REN_PICTURES - 1) /* the renderer's picture slot (the lesson's below) */

/* Start pane B's job on the worker (now, or once it is idle): model_path's model (NULL: the
 * app's) with labels_path's class names (NULL: its config's) on image_path (NULL: the photo
 * on screen, followed as it changes). The compare view
 * opens when it is done; a model or photo that fails leaves pane A as it was, the message
 * on the error line. Both NULL: nothing. */
void app_compare_open(App *app, const char *model_path, const char *labels_path,
                      const char *image_path);
/* \: the compare view with the last second model or photo, or out of it. Returns 0. */
int app_compare_toggle(App *app, int unused);
/* The worker finished pane B's job. */
void app_compare_done(App *app);
/* The worker is idle: a queued compare job starts. 1 when it did. */
int app_compare_start_queued(App *app);
/* A key in the compare view: Esc and \ leave, ; links / unlinks, ' the difference pane,
 * arrows on pane B while unlinked with the mouse over it; the keys that open another
 * view are refused with a notice. 1 when the key was the compare view's. */
int app_compare_key(App *app, const SDL_Keysym *ks);
/* The mouse at (app->mouse_x, mouse_y): the pane and patch under it, the mapped box. */
void app_compare_hover(App *app);
/* Pane A's patch at the place of the photo under the mouse (its own, or the one pane B's
 * patch there maps to), -1: none. A click makes it the query (pane B's follows, linked). */
int app_compare_patch_a(const App *app);
/* Before a frame: the panes' maps and picture brought up to date, uploaded. */
void app_compare_prepare(App *app);
/* The frame and status line in the compare view. */
void app_compare_frame(App *app, RenFrame *f);
void app_compare_status(App *app);
/* Back to the single view of pane A. */
void app_compare_leave(App *app);
/* The app's model changed: pane B made of it (a second photo) runs again through it. */
void app_compare_model_changed(App *app);
/* A new photo in pane A: the second model runs it too. */
void app_compare_photo_changed(App *app);
void app_compare_free(App *app);

/* ---------------------------------------------------------------------------
 * score.c: --contrast and --similar in the window */

enum { APP_SCORE_NONE, APP_SCORE_CONTRAST, APP_SCORE_SIMILAR };

/* --contrast A,B (arg) or --similar IMAGE2 (image) from the command line, before the first
 * photo's job: contrast's classes resolved on the app's model now (0, or -1 with the message
 * on stderr: exit 2 as a bad --class); --similar opens the compare view with IMAGE2 as pane
 * B, whose class-specific maps then explain the cosine in both panes. */
int app_score_init(App *app, const char *contrast, const char *similar);

/* The Scenes' scores brought up to what the app shows now (after a model, a photo or pane B
 * changed, or the compare view opened or closed): --contrast resolved on the app's model
 * (pane B too when it runs through that model; a model without the classes turns it off
 * with a notice); --similar's embeddings from pane A's and B's runs while the compare view
 * shows them (else no score). A Scene whose score changed forgets its class-specific maps.
 * While the worker is busy only marks it pending (app_job_done syncs when it is idle).
 * Returns 1 when a Scene on screen changed (its map is asked again by the caller). */
int app_score_sync(App *app);

/* A class chosen (a click on the predictions, 1-5): the score is off, the notice says so. */
void app_score_off(App *app);

/* The score's words for the status line ("why "tiger cat" rather than "tabby" (logit 282 -
 * logit 281)"), "" when there is none. */
const char *app_score_title(const App *app);

/* Why map kind `kind` cannot be shown of the photo on screen (its run's shapes, else the
 * app's model) with the score as it is (NULL: it can; mapkind.h, map_kind_unusable_scored):
 * a model without a head can show the class-specific kinds of --similar's cosine. */
const char *app_kind_why_not(const App *app, int kind);
#define app_kind_usable(app, kind) (app_kind_why_not((app), (kind)) == NULL)

/* ---------------------------------------------------------------------------
 * perturb.c: Shift+P's animation */

/* Shift+P: the test of the view's map (pixel maps summed per patch) for the view's
 * class; most relevant first, or the other order when one is on screen already. */
void app_perturb_key(App *app);

/* Start the worker on p (the worker owns it until its event). */
void app_perturb_start(App *app, Perturbation *p);

/* The worker computed a run: play it if it is still the one asked for. */
void app_perturb_done(App *app);

/* Back to the normal view; a job still running is dropped when it ends. */
void app_perturb_stop(App *app);

/* Free *p and its arrays, and set *p to NULL (accepts NULL). */
void perturbation_drop(Perturbation **p);

/* The animation's clock: the step due now; the last one stays on screen. */
void app_perturb_tick(App *app);

/* Milliseconds until the next step is due (the main loop sleeps that long at most). */
int app_perturb_wait_ms(const App *app);

/* The status line's right part during the test: the order, the step, the probability. */
void app_perturb_status(App *app, char *buf, size_t n);

/* The frame's picture and plot panel during the test. */
void app_perturb_frame(App *app, RenFrame *f);

/* ---------------------------------------------------------------------------
 * status.c and frame.c: what is drawn */

/* The status line: model, layer, head or fusion, map kind, query, target class,
 * mask | top-1 class. Only what the view's kind reads is shown. */
void app_update_status(App *app);

/* Draw the App as one frame, present it, trace it (VITLENS_TRACE); S's PNG is saved
 * here, from the frame as drawn. */
void app_draw(App *app);

#endif
