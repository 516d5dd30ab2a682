/* clip.h - the text side of a CLIP model, for the window and the headless modes: its text
 * tower and vocabulary, the zero-shot classes (--classes, --prompts, --template) and the
 * phrase (--text, the window's text box) made the model's head, so that every
 * class-specific map explains a phrase and the top-5 are zero-shot labels.
 *
 * The head is the engine's (vit_set_text_head): logits[c] = logit_scale * cos(e, t_c),
 * e the image embedding, t_c class c's text embedding. Class c's embedding follows the
 * CLIP paper's prompt ensembling (openai/CLIP notebooks/Prompt_Engineering_for_ImageNet:
 * zeroshot_classifier): each template filled with the class name, embedded, normalised,
 * averaged, the mean normalised again. The phrase is one more class after them, its own
 * text embedded as typed (no template). No SDL, no GL. */
#ifndef VITLENS_CLIP_H
#define VITLENS_CLIP_H

#include "vit.h"

#include <stddef.h>

/* What the command line asks of the text side (pointers into argv; NULL: not given). */
typedef struct {
    const char *classes;   /* --classes "cat, dog, espresso cup", or CLIP_IMAGENET(_80) */
    const char *prompts;   /* --prompts FILE: one class per line, # comments */
    const char *template_; /* --template "a photo of a {}." (default CLIP_TEMPLATE) */
    const char *templates; /* --templates FILE: one template a line, each averaged (the
                              paper's prompt ensembling); --classes imagenet sets it */
    const char *text;      /* --text PHRASE: the class-specific maps explain it */
    const char *vocab;     /* --vocab PATH: the tokenizer's files (else beside the model) */
    /* called as the classes' texts go through the text tower (CLIP_CACHE_MIN_TEXTS or more,
     * not read from the cache): done of total texts, 0 first; NULL: nothing said */
    void (*progress)(int done, int total, int n_classes, int n_templates);
    /* 1 (the window): classes not in the cache are read and checked but left to
     * clip_classes_embed (ClipText.pending), off the thread that opens the model */
    int defer;
} ClipSpec;

#define CLIP_TEMPLATE    "a photo of a {}."
#define CLIP_IMAGENET    "imagenet"   /* --classes: the 1000 names, the 7 selected templates */
#define CLIP_IMAGENET_80 "imagenet80" /* the same with the paper's 80 templates */
/* their files, under the assets folder (files.h), with their licence (CLIP's MIT) */
#define CLIP_IMAGENET_CLASSES      "clip/imagenet_classes.txt"
#define CLIP_IMAGENET_TEMPLATES_7  "clip/imagenet_templates_7.txt"
#define CLIP_IMAGENET_TEMPLATES_80 "clip/imagenet_templates.txt"
#define CLIP_TEXT_BYTES            1024 /* a phrase, NUL included (the window's text box too) */
/* From this many texts (classes x templates) on, the classes' embeddings are kept in
 * $XDG_CACHE_HOME/vitlens/clip/ (default ~/.cache/vitlens/clip/), one file per model file
 * (path, size, time), vocabulary, classes and templates: --classes imagenet's 7000 texts
 * are embedded once */
#define CLIP_CACHE_MIN_TEXTS 256

typedef struct ClipPending ClipPending; /* classes read, not embedded yet (clip.c) */

/* The text side of one loaded CLIP model (Model.clip). Read-only once made, but for the
 * phrase and the head (clip_set_phrase), which the owner changes only where no other
 * thread reads the model (the window: with the worker idle). */
typedef struct {
    VitText text;      /* the text tower, from the model's own file */
    VitTokenizer *tok; /* its vocabulary */
    char vocab[1024];  /* where the vocabulary was read */
    char why[600];     /* "" when a phrase can be embedded; else why not (no text tower,
                          no vocabulary), for the message of the option or key that asks */
    int E;             /* the embedding width (VitConfig.embed_dim) */
    int n_classes;     /* C0: the zero-shot classes, 0 without --classes / --prompts */
    int n_templates;   /* templates each class's embedding averages */
    float *class_emb;  /* [C0, E] each class's normalised template mean */
    char (*labels)[VIT_LABEL_BYTES]; /* [C0 + 1]: the classes' names, then the phrase (cut to
                                        VIT_LABEL_BYTES - 1 bytes; the text embedded is whole) */
    char phrase[CLIP_TEXT_BYTES];    /* the phrase in the head (class C0), "" none */
    float *phrase_emb;               /* [E] its embedding */
    int phrase_tokens;               /* its tokens, SOT and EOT included */
    int phrase_truncated;            /* 1: cut to VIT_TEXT_CONTEXT tokens */
    double ms_classes;               /* the classes' text embeddings took this long */
    int from_cache;                  /* 1: they were read from the cache (CLIP_CACHE_MIN_TEXTS) */
    ClipPending *pending; /* ClipSpec.defer: the classes still to embed (n_classes 0 until
                             clip_classes_install), or NULL */
    int pending_texts;    /* their texts, classes x templates (0: none pending) */
} ClipText;

/* The text tower's context in tokens, what vit_tokenize pads or cuts to: SigLIP's 64, CLIP's
 * VIT_TEXT_CONTEXT (77; also without a text tower). */
int clip_context(const ClipText *ct);
/* 1: SigLIP's scores, each label's sigmoid(logit_scale cos + logit_bias) on its own (they
 * do not sum to 1); 0: CLIP's softmax over the labels (also for NULL). */
int clip_sigmoid(const ClipText *ct);
/* "SigLIP" or "CLIP", for messages. Static string. */
const char *clip_family(const ClipText *ct);

/* Any text option given (each needs a CLIP model with its text tower). */
int clip_spec_any(const ClipSpec *s);

/* The command line's checks that need no model: --classes and --prompts not both, a
 * --template with exactly one "{}", a --text that is not empty. 0, or -1 with msg. */
int clip_spec_check(const ClipSpec *s, char *msg, size_t n);

/* The text side of `vit` (loaded from model_path) when it is a CLIP model (embed_dim > 0):
 * its text tower (vit_text_load on the same file), the vocabulary (spec->vocab, else
 * vit_tokenizer_find beside the model), the classes of spec embedded (their templates
 * averaged, on n_threads threads), and spec->text as the phrase. *out is NULL for a model
 * that is not CLIP. strict 1 (the command line's model): what the spec asks and cannot be
 * had is an error naming the option and the file; strict 0 (a model dropped on the window):
 * it is kept in why, and the image views go on. A --vocab that does not load is always an
 * error (the user named it). Nothing of vit is changed: clip_apply makes the head. 0, or -1
 * with msg. Free with clip_free. */
int clip_open(ClipText **out, const Vit *vit, const char *model_path, const ClipSpec *spec,
              int strict, int n_threads, char *msg, size_t n);
void clip_free(ClipText *ct);

/* The pending classes' embeddings (ClipSpec.defer), as clip_open makes them without defer,
 * bit for bit: *emb [C0, E] malloc'd (clip_classes_install takes it), *ms their time.
 * Reads ct only (its text tower, vocabulary, pending): any one thread, while nobody calls
 * clip_classes_install. control (may be NULL): progress in texts (done of C0 x templates),
 * checked for a cancel between batches of 256 texts (VIT_ERR_CANCELLED). Writes the cache
 * (CLIP_CACHE_MIN_TEXTS or more). Errors: VIT_ERR_ARG (nothing pending, a class whose text
 * does not tokenise), VIT_ERR_NOMEM, the engine's. */
VitStatus clip_classes_embed(float **emb, double *ms, const ClipText *ct, VitControl *control,
                             VitError *err);

/* The pending classes made ct's: emb (from clip_classes_embed, taken: freed on error too)
 * and their names, the phrase's label kept after them (class C0). The head is not changed:
 * clip_apply makes it (model_classes_install does both). 0, or -1 with msg. */
int clip_classes_install(ClipText *ct, float *emb, double ms, char *msg, size_t n);

/* The embedding [E] of a phrase (not normalised): tokenised (VIT_TEXT_CONTEXT tokens at
 * most: a longer text is cut, *truncated 1) and run through the text tower on n_threads
 * threads. Reads ct only: any thread, while nobody calls clip_set_phrase. Errors:
 * VIT_ERR_ARG (ct->why: no text tower or vocabulary; an empty phrase; invalid UTF-8), the
 * engine's others. */
VitStatus clip_embed(float *emb, int *n_tokens, int *truncated, const ClipText *ct,
                     const char *phrase, int n_threads, VitError *err);

/* Make the head of vit the classes and, after them, the phrase (emb [E] from clip_embed;
 * phrase NULL or "": the classes alone, none at all without classes: n_classes 0). Keeps
 * the phrase and its embedding in ct. Changes vit: call it where no other thread reads it.
 * Runs made before must be made again when C changed (clip_head_size says what it will
 * be); else vit_text_logits updates their logits. Errors: the engine's (vit_set_text_head). */
VitStatus clip_apply(ClipText *ct, Vit *vit, const char *phrase, const float *emb, int truncated,
                     int n_tokens, VitError *err);

/* The head's number of classes with (1) or without (0) a phrase: C0 + with_phrase. */
int clip_head_size(const ClipText *ct, int with_phrase);

/* The class index of the phrase in the head (C0), or -1 when there is none. */
int clip_phrase_class(const ClipText *ct);

#endif
