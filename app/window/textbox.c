/* textbox.c - CLIP's text box: type what to find. / opens it on the status line, the keys
 * type (UTF-8, through SDL's text input), Backspace takes back a character, Enter applies
 * and Esc cancels. The phrase's text embedding runs on the worker (clip_embed); when it
 * is done, on this thread with the worker idle (nothing else reads the model then), it
 * becomes the head's last class (clip_apply): the run's logits follow without another
 * forward pass when the number of classes stays (vit_text_logits), else the photo runs again;
 * then the view's class-specific map asks for that class's backward pass as 1-5 does. */
#include "window/app.h"

#include <stdio.h>
#include <string.h>

const char *app_text_why(const App *app) {
    const ClipText *ct = app->model->clip;
    if (!ct) return "is not a CLIP model: it has no text tower to embed a phrase";
    return ct->why[0] ? ct->why : NULL;
}

int app_text_can(const App *app) {
    return app->model->clip && !app_text_why(app);
}

int app_text_open(App *app, int unused) {
    (void)unused;
    if (app->typing) return 0; /* open already (its button clicked again) */
    if (app->lesson.on) {      /* the lesson walks the model's own head */
        snprintf(app->notice, sizeof app->notice, "/ finds a phrase in the explorer: Esc first");
        app->dirty = 1;
        return 0;
    }
    const char *why = app_text_why(app);
    if (why) { /* say why, on the status line: the image views go on */
        if (!app->model->clip)
            snprintf(app->notice, sizeof app->notice, "%.100s %s", app->model->name, why);
        else
            snprintf(app->notice, sizeof app->notice, "%.590s", why);
        app->dirty = 1;
        return 0;
    }
    app->typing = 1;
    /* the phrase on screen, selected: typing replaces it (a new phrase, the usual case),
     * Right / End keep it to edit; or a fresh box */
    snprintf(app->typed, sizeof app->typed, "%s", app->model->clip->phrase);
    app->typed_all = app->typed[0] != '\0';
    SDL_StartTextInput(); /* after the key that opened it: its own character is not typed */
    app->dirty = 1;
    return 0;
}

/* Close the box (Esc, Enter). */
static void text_close(App *app) {
    app->typing = 0;
    SDL_StopTextInput();
    app->dirty = 1;
}

void app_phrase_start(App *app, const char *phrase) {
    if (!app_text_can(app)) { /* a model loaded meanwhile that has no text side */
        app->queued_phrase[0] = '\0';
        app_text_open(app, 0); /* says why */
        app->typing = 0;
        return;
    }
    if (app->busy) { /* after the running job (app_job_done); the latest wins */
        snprintf(app->queued_phrase, sizeof app->queued_phrase, "%s", phrase);
        return;
    }
    app->queued_phrase[0] = '\0';
    if (worker_start_phrase(&app->worker, app->model, phrase)) {
        app_set_error(app, "out of memory for the phrase's embedding");
        return;
    }
    app->busy = 1;
    app->dirty = 1;
}

/* Enter: the phrase typed goes to the worker; an empty one is refused on the status line. */
static void text_apply(App *app) {
    const char *p = app->typed;
    while (*p == ' ' || *p == '\t') p++;
    text_close(app);
    if (!*p) {
        snprintf(app->notice, sizeof app->notice,
                 "an empty phrase: / and type the words to find, e.g. a red umbrella");
        return;
    }
    app->t_phrase = SDL_GetPerformanceCounter();
    app_phrase_start(app, app->typed);
}

/* Remove the last UTF-8 character of s (its continuation bytes 10xxxxxx, then its lead). */
static void drop_last_char(char *s) {
    size_t n = strlen(s);
    while (n > 0 && ((unsigned char)s[n - 1] & 0xC0) == 0x80) n--;
    if (n > 0) n--;
    s[n] = '\0';
}

/* Append utf8 when it fits whole (a character is never cut). */
static void append_text(App *app, const char *utf8) {
    size_t n = strlen(app->typed), k = strlen(utf8);
    if (n + k >= sizeof app->typed) {
        snprintf(app->notice, sizeof app->notice, "the text box holds %zu bytes",
                 sizeof app->typed - 1);
        return;
    }
    memcpy(app->typed + n, utf8, k + 1);
}

int app_text_key(App *app, const SDL_Keysym *ks) {
    if (!app->typing) return 0;
    int ctrl = (ks->mod & KMOD_CTRL) != 0, all = app->typed_all;
    app->typed_all = 0; /* any key ends the selection */
    switch (ks->sym) {
    case SDLK_ESCAPE: text_close(app); break; /* the phrase on screen stays */
    case SDLK_RETURN:
    case SDLK_KP_ENTER: text_apply(app); break;
    case SDLK_BACKSPACE: /* the selection, else the last character */
        if (all)
            app->typed[0] = '\0';
        else
            drop_last_char(app->typed);
        break;
    case SDLK_u: /* Ctrl+U: clear the line, as a shell does */
        if (ctrl) app->typed[0] = '\0';
        break;
    case SDLK_v: /* Ctrl+V: paste, its line breaks as spaces */
        if (ctrl && SDL_HasClipboardText()) {
            char *clip = SDL_GetClipboardText();
            if (clip) {
                for (char *c = clip; *c; c++)
                    if (*c == '\n' || *c == '\r' || *c == '\t') *c = ' ';
                if (all) app->typed[0] = '\0'; /* the paste replaces the selection */
                append_text(app, clip);
                SDL_free(clip);
            }
        }
        break;
    case SDLK_LSHIFT:
    case SDLK_RSHIFT:
    case SDLK_LCTRL:
    case SDLK_RCTRL:
    case SDLK_LALT:
    case SDLK_RALT: app->typed_all = all; break; /* a modifier alone keeps it */
    default:                                     /* the characters come as SDL_TEXTINPUT */
        if (all && !ctrl && ks->sym >= 32 && ks->sym < 127)
            app->typed_all = 1; /* a character's key: its SDL_TEXTINPUT replaces the selection */
        break;
    }
    app->dirty = 1;
    return 1; /* every key is the box's while it is open */
}

void app_text_input(App *app, const char *utf8) {
    if (!app->typing) return;
    if (app->typed_all) app->typed[0] = '\0'; /* the first character replaces the selection */
    app->typed_all = 0;
    append_text(app, utf8);
    app->dirty = 1;
}

/* --- the worker's result ------------------------------------------------------------ */

void app_phrase_done(App *app) {
    Worker *w = &app->worker;
    ClipText *ct = app->model->clip;
    if (w->status != VIT_OK || !ct) {
        char msg[700];
        snprintf(msg, sizeof msg, "\"%.60s\": %s", w->phrase_text, w->err.msg);
        app_set_error(app, msg);
        return;
    }
    const Scene *sc = app_scene(app);
    VitError err;
    /* the worker is idle: the model is this thread's to change */
    if (clip_apply(ct, &app->model->vit, w->phrase_text, w->phrase_emb, w->phrase_truncated,
                   w->phrase_tokens, &err)) {
        app_set_error(app, err.msg);
        return;
    }
    app->model->labels = (const char(*)[VIT_LABEL_BYTES])ct->labels;
    app->error[0] = '\0';
    if (w->phrase_truncated)
        snprintf(app->notice, sizeof app->notice,
                 "cut to %s's %d tokens: the end of the phrase is not read", clip_family(ct),
                 clip_context(ct));
    app_perturb_stop(app);   /* its curve is of the class before */
    app->atlas_of.loads = 0; /* an overview of the old head's maps is stale */
    app->view.target = clip_phrase_class(ct);
    if (!MAP_KINDS[app->view.kind].uses_target) app->view.kind = app->class_kind;
    app->overview = VIEW_SINGLE;
    if (app->trace)
        printf("phrase class=%d tokens=%d truncated=%d embed_ms=%.2f text=%s\n", app->view.target,
               w->phrase_tokens, w->phrase_truncated, w->phrase_ms, w->phrase_text);
    if (!sc) return; /* the first photo's pass shows it */
    Scene *front = &app->scenes[app->front];
    if (front->run.cfg.n_classes == app->model->vit.cfg.n_classes) {
        /* the same number of classes: the run's logits again, no forward pass; every
         * class-specific map and backward pass held is of the old head */
        if (vit_text_logits(&front->run, &app->model->vit, &err)) {
            app_set_error(app, err.msg);
            return;
        }
        scene_forget_explain(front);
        front->has_plain = 0;
        app_update_map(app);
    } else { /* a head of another size: the photo's run is made again for it */
        char path[1024];
        snprintf(path, sizeof path, "%s", front->path);
        app_open(app, path);
    }
}
