/* vit/text.h - the tokenizers, the text tower and CLIP / SigLIP heads. Part of vit.h, which
 * includes every part (and the overview: shapes, token order, the families loaded); include
 * that. */
#ifndef VIT_TEXT_H
#define VIT_TEXT_H

#include "vit/run.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * The CLIP, SigLIP and SigLIP 2 tokenizers (engine/text/tokenizer.c, spiece.c)
 *
 * OpenAI CLIP's byte-level BPE (clip/simple_tokenizer.py, Radford et al. 2021): the text
 * cleaned (a fixed part of ftfy.fix_text, html.unescape twice, whitespace collapsed,
 * lower-cased), split by CLIP's pattern, each piece's UTF-8 bytes merged by rank, then
 * [<|startoftext|>, ..., <|endoftext|>]. The exact cleaning, and what of ftfy it leaves
 * out, is at the top of tokenizer.c; tests/text checks the ids against a reference
 * written from the published algorithm on 10 000 strings.
 *
 * SigLIP's tokenizer, behind the same calls (engine/text/spiece.c): Hugging Face's
 * SiglipTokenizer + processor(padding="max_length", truncation=True) over spiece.model (a
 * SentencePiece model read by Debian's libsentencepiece): every character lower-cased, the
 * text split on "</s>" / "<unk>", ASCII punctuation removed, whitespace collapsed,
 * SentencePiece without the dummy prefix, "</s>" appended, padded with "</s>" to exactly
 * max_ids (64 for SigLIP's text tower, which pools the last position: the padding is part
 * of the model's input). No SOT (vit_token_sot -1). tests/text/test_siglip_tokenizer.py
 * checks it against HF's steps written out, on a model it trains.
 *
 * SigLIP 2's, behind the same calls: Gemma's tokenizer.model (SentencePiece BPE with byte
 * fallback; "<pad>" 0, "<eos>" 1) as big_vision's SigLIP 2 demo tokenizes a text
 * (lower|tok(length=64, model="gemma", bos="no", eos="sticky")): A-Z lower-cased (ASCII
 * only, tf.strings.lower's default), SentencePiece on the text as it is, "<eos>" appended,
 * a longer text cut to max_ids - 1 ids and "<eos>", a shorter one padded with "<pad>" to
 * exactly max_ids (the last position, which the text tower pools, then holds "<pad>").
 * No punctuation removal, no BOS. Which tokenizer a .model file is comes from its pieces
 * (vit_tokenizer_kind). tests/text/test_gemma_tokenizer.py checks it against big_vision's
 * steps written out, on a BPE model it trains. */

#define VIT_TEXT_CONTEXT   77    /* CLIP's context length, tokens including SOT and EOT */
#define VIT_TEXT_MAX_BYTES 16384 /* a longer text is refused (77 tokens read far less) */

typedef struct VitTokenizer VitTokenizer; /* read-only after load: threads may share it */

/* Load CLIP's vocabulary: OpenAI's bpe_simple_vocab_16e6.txt.gz (gzip: zlib), or Hugging
 * Face's vocab.json + merges.txt (path: either file, or their folder; a folder with the
 * .gz works too). 49 408 ids: the 256 byte symbols, the same with "</w>", one per merge,
 * <|startoftext|> and <|endoftext|>. Or a SentencePiece model: a path ending ".model", or a
 * folder holding spiece.model or tokenizer.model (in that order) and no CLIP vocabulary;
 * SigLIP's (a "</s>" piece) or Gemma's (SigLIP 2: "<eos>" and "<pad>" its EOS and padding, byte
 * fallback), a model that is neither refused naming the file (VIT_ERR_FORMAT). *tok is the
 * caller's: free with vit_tokenizer_free. Errors: VIT_ERR_IO (missing file, naming it),
 * VIT_ERR_FORMAT (a corrupt or cut gzip, a merge line that is not two known symbols, naming file
 * and line; a vocab.json entry that is not a new id; a SentencePiece model of neither kind),
 * VIT_ERR_ARG (not a vocabulary's name), VIT_ERR_NOMEM. */
VitStatus vit_tokenizer_load(VitTokenizer **tok, const char *path, VitError *err);
void vit_tokenizer_free(VitTokenizer *tok); /* NULL-safe */

/* The vocabulary that came with a model file: beside it or in its "tokenizer" folder,
 * vocab.json + merges.txt (the path of vocab.json), bpe_simple_vocab_16e6.txt.gz,
 * spiece.model (SigLIP's) or tokenizer.model (SigLIP 2's Gemma tokenizer), in that order;
 * model_path may also be the model's folder. 1 and the path in path[n], or 0 (none, or a path
 * that does not fit). */
int vit_tokenizer_find(char *path, size_t n, const char *model_path);

/* text (a C string of UTF-8, at most VIT_TEXT_MAX_BYTES) -> ids[*n]: [SOT, ..., EOT], *n <= max_ids
 * (VIT_TEXT_CONTEXT for CLIP's text tower). SigLIP's: *n = max_ids always ([..., </s>, </s>
 * padding], the first max_ids - 1 pieces and "</s>" when cut; every text accepted, an
 * empty one is [</s>] padded, as in the original). SigLIP 2's (Gemma's): *n = max_ids
 * always ([..., <eos>, <pad> padding], the first max_ids - 1 ids and <eos> when cut; an empty
 * text is [<eos>] padded). A text with more tokens is cut as
 * clip.tokenize(truncate=True) cuts it: the first max_ids - 2 and EOT, *truncated = 1
 * (NULL: not asked). The text "<|endoftext|>" in it is that token, as in the original.
 * Errors: VIT_ERR_ARG (empty or whitespace-only text, nothing left after the cleaning,
 * invalid UTF-8 with the offset of its first bad byte, too long, max_ids < 2, NULL
 * arguments), VIT_ERR_NOMEM. */
VitStatus vit_tokenize(int *ids, int *n, int *truncated, const VitTokenizer *tok, const char *text,
                       int max_ids, VitError *err);
int vit_token_sot(const VitTokenizer *tok); /* <|startoftext|>: 49406 in CLIP's; SigLIP: -1 */
int vit_token_eot(const VitTokenizer *tok); /* <|endoftext|>: 49407; SigLIP's "</s>": 1,
                                               Gemma's "<eos>": 1 */
/* Which tokenizer tok is: "clip" (CLIP's BPE), "siglip" (SigLIP's spiece.model) or "gemma"
 * (SigLIP 2's Gemma tokenizer.model); a static string. */
const char *vit_tokenizer_kind(const VitTokenizer *tok);

/* ---------------------------------------------------------------------------
 * The CLIP text tower (engine/text/text.c): a phrase's embedding, to compare with an
 * image embedding (Radford et al. 2021, "Learning Transferable Visual Models From
 * Natural Language Supervision", §2.4; OpenAI CLIP's clip/model.py encode_text):
 *   x = token_embedding[ids] + positional_embedding[:n]            [n, W]
 *   L pre-norm blocks with a causal mask: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)),
 *       mlp = c_proj(act(c_fc(.))), act QuickGELU for OpenAI's weights
 *   e = ln_final(x)[argmax(ids)] @ text_projection                 [E]
 * argmax(ids) is the first end-of-text token: EOT (49407) is the largest id.
 * Symbols: V vocabulary, ctx context (77), W width, H heads, Dh = W / H, F MLP width,
 * L layers, E embedding (text_projection's output). The blocks are vit_forward's own
 * (engine/passes/block.c) with the causal mask as an option of the attention. */

#define VIT_TEXT_MAX_CONTEXT 4096      /* ctx: rows of the position embedding */
#define VIT_TEXT_MAX_VOCAB   (1 << 22) /* V: rows of the token embedding */

/* How a text tower reads its sequence and which row it pools. */
typedef enum {
    VIT_TEXT_POOL_EOT = 0, /* CLIP: a causal mask, the first largest id (argmax(ids): EOT) */
    VIT_TEXT_POOL_LAST,    /* SigLIP: no mask, exactly ctx ids (padded with "</s>"), the last
                              position pooled: HF SiglipTextTransformer's
                              last_hidden_state[:, -1, :], big_vision's "last" pool_type */
} VitTextPool;

typedef struct {
    int vocab_size;    /* V (49408) */
    int context;       /* ctx, tokens including SOT and EOT (77) */
    int width;         /* W (512 for B/32 and B/16) */
    int n_heads;       /* H: config.json's text_config.num_attention_heads, open_clip_config.json's
                          model_cfg.text_cfg.heads, else W / 64 (OpenAI's rule) */
    int n_layers;      /* L */
    int mlp_dim;       /* F (4 W) */
    int embed_dim;     /* E: text_projection's output (512) */
    float ln_eps;      /* LayerNorm eps: 1e-5 (config.json's text_config.layer_norm_eps) */
    VitActivation act; /* the MLP's activation, see act_from */
    VitNaming naming;  /* VIT_NAMES_HF (CLIPModel or SiglipModel: text_model.*) or
                          VIT_NAMES_OPENAI (OpenAI and OpenCLIP: token_embedding,
                          transformer.resblocks.N.*) */
    const char *act_from; /* static string: where act came from (for the app to show) */
    VitTextPool pool;     /* CLIP's (EOT, causal) or SigLIP's (LAST, no mask) */
} VitTextConfig;

/* A loaded text tower. Zero-initialise before vit_text_load; vit_text_free accepts a
 * zeroed or half-built VitText. Read-only after load (several threads may embed with it
 * at once), except that a caller may change cfg.act and cfg.n_heads before embedding
 * (an option that overrides the checkpoint's rule): vit_text_embed reads them and
 * checks W % H. Linear weights are [out, in] (vit.h's convention). */
typedef struct {
    VitTextConfig cfg;
    const float *token_embed;     /* [V, W] */
    const float *pos_embed;       /* [ctx, W] */
    VitBlock *blocks;             /* [L], owned: norm1 = ln_1, q/k/v (OpenAI's fused
                                     in_proj: qkv_w), proj = out_proj, norm2 = ln_2,
                                     fc1 = c_fc, fc2 = c_proj */
    const float *norm_w, *norm_b; /* ln_final [W] */
    const float *proj_w;          /* [E, W]: OpenAI's text_projection [W, E] transposed at
                                     load, so that e = proj_w . x */
    const float *proj_b;          /* [E] (OpenCLIP's proj_bias), or NULL */
    float logit_scale;            /* exp() of the checkpoint's logit_scale (CLIP's learned
                                     temperature, 100 for OpenAI's); 0 when it has none */
    float logit_bias;             /* SigLIP's logit_bias (0 when the file has none) */
    int sigmoid;                  /* 1: SigLIP: each label's probability is sigmoid(logit),
                                     independent of the others (vit_text_scores) */
    char path[1024];              /* the weights file */
    /* private */
    Vit file;          /* the mapping or the checkpoint's storages the weights point into, and
                          the F16/BF16 tensors converted to F32, held as vit_load holds them */
    float *proj_owned; /* OpenAI's text_projection transposed */
} VitText;

/* Load the text tower of a CLIP checkpoint: .safetensors or a PyTorch checkpoint (.pth,
 * .pt, .bin: torch.save's zip, read by vit_load's readers with their checks), the same
 * file as the image tower or one holding the text tower alone, in either naming:
 *   Hugging Face CLIPModel (modeling_clip.py): text_model.embeddings.token_embedding.weight
 *     [V, W], text_model.embeddings.position_embedding.weight [ctx, W],
 *     text_model.encoder.layers.N.{layer_norm1, self_attn.{q,k,v,out}_proj, layer_norm2,
 *     mlp.fc1, mlp.fc2}, text_model.final_layer_norm, text_projection.weight [E, W]
 *   OpenAI / OpenCLIP (clip/model.py, open_clip's TextTransformer): token_embedding.weight,
 *     positional_embedding [ctx, W], transformer.resblocks.N.{ln_1, attn.in_proj_weight
 *     [3W, W], attn.in_proj_bias, attn.out_proj, ln_2, mlp.c_fc, mlp.c_proj}, ln_final,
 *     text_projection [W, E] (used as x @ P; OpenCLIP's linear text_projection.weight [E, W]
 *     and .bias also read)
 *   Hugging Face SiglipModel (modeling_siglip.py SiglipTextTransformer, detected by
 *     text_model.head.weight): CLIPModel's text_model.* names above, no text_projection but
 *     text_model.head.weight [E, W] and .bias [E] (a Linear with bias on the pooled row),
 *     and logit_bias (a scalar); cfg.pool VIT_TEXT_POOL_LAST (no mask, position ctx - 1),
 *     t->sigmoid 1. Defaults SiglipTextConfig's (google's config.json sets no size):
 *     12 heads, gelu_pytorch_tanh, eps 1e-6; config.json's text_config overrides them.
 *     The SiglipModel file also holds vision_model.* (vit_load's) and both logit tensors.
 * and logit_scale (a scalar; optional). L counts the blocks; every shape is checked
 * against W, F, E. The activation, heads and eps (the rule; the caller may override act
 * and n_heads afterwards, see VitText):
 *   Hugging Face names: config.json beside the weights, its text_config's hidden_act
 *     ("quick_gelu", "gelu", "gelu_new" / "gelu_pytorch_tanh"), num_attention_heads,
 *     layer_norm_eps; without them CLIPTextConfig's defaults: QuickGELU, eps 1e-5.
 *   OpenAI names: open_clip_config.json beside the weights: model_cfg.quick_gelu true ->
 *     QuickGELU, else GELU (open_clip's default); text_cfg.heads, text_cfg.norm_kwargs.eps.
 *     Without it QuickGELU: OpenAI's own weights (and OpenCLIP's "-quickgelu" models); an
 *     OpenCLIP model trained with GELU needs its open_clip_config.json, or cfg.act set.
 *   H: those configs, else W / 64 (OpenAI's build_model).
 * open_clip_config.json asking for what this tower does not do (pool_type other than
 * "argmax", no_causal_mask, embed_cls) is refused by name.
 * Errors: VIT_ERR_IO (cannot open), VIT_ERR_FORMAT (a malformed file or config, a NaN
 * weight; "FILE: no text tower ..." when the file has none, saying whether it holds an
 * image tower only), VIT_ERR_SHAPE (a tensor missing or of the wrong shape, named with
 * its file, got and expected), VIT_ERR_NOMEM. Free with vit_text_free. */
VitStatus vit_text_load(VitText *t, const char *path, VitError *err);
void vit_text_free(VitText *t);

/* Embeddings out [n, E] (projected, NOT normalised; row i for sequence i) of n token
 * sequences ids[i] [lens[i]] (1 <= lens[i] <= ctx, ids in [0, V): vit_tokenize's [SOT,
 * ..., EOT]; padding after EOT allowed), each pooled at its first largest id (OpenAI:
 * text.argmax(dim=-1), the first EOT), on n_threads threads (0: one per online core,
 * at most VIT_MAX_THREADS). The published model's values on the sequence padded to ctx,
 * computed with less work, exactly: with the causal mask token t depends on tokens 0 .. t
 * alone, so (1) the tokens after the pooled one change nothing it computes and are not
 * computed, and (2) sequences that start with the same tokens have the same rows there:
 * the sequences are merged into a prefix tree, each distinct prefix computed once (a
 * template's "a photo of a" once for all its class names), up to 256 rows a batch run as
 * one sequence through vit_forward's block with the tree as its causal mask (a row sees
 * itself and its ancestors; every other key's probability exactly 0). Each linear layer
 * is one GEMM over the batch's rows. Allocates about 256 (8W + F + E) floats of
 * activations and a thread pool, freed before it returns. Thread-safe on one VitText.
 * SigLIP (cfg.pool VIT_TEXT_POOL_LAST): each sequence exactly ctx (64) ids, vit_tokenize's
 * padded ones (the padding "</s>" is what the last position reads: the published pipelines
 * pass no attention mask, docs/families-2026.md §2.3), run whole with no mask, up to
 * 256 / ctx sequences a batch; a shorter sequence is refused (VIT_ERR_ARG).
 * Errors: VIT_ERR_ARG (a NULL array, n < 0, a length or id out of range naming the
 * sequence and position, H not dividing W), VIT_ERR_NOMEM; out is then undefined. */
VitStatus vit_text_embed(float *out, const VitText *t, const int *const *ids, const int *lens,
                         int n, int n_threads, VitError *err);

/* Zero-shot scores of n image embeddings img [n, E] (vit_image_embed; not normalised)
 * against C text embeddings txt [C, E] (vit_text_embed): logits [n, C] =
 * logit_scale * cos(img_i, txt_c) + logit_bias, probs [n, C] (either may be NULL) =
 * sigmoid(logits) each on its own when t->sigmoid (SigLIP, Zhai et al. 2023, §3: HF
 * SiglipModel.forward's logits_per_image; the probabilities of the labels do NOT sum to 1),
 * else softmax over the C labels (CLIP). t gives logit_scale, logit_bias, sigmoid and E.
 * Errors: VIT_ERR_ARG (NULL arrays, n or C < 1, no logit_scale in the checkpoint, a zero or
 * non-finite embedding). */
VitStatus vit_text_scores(float *logits, float *probs, const float *img, int n, const float *txt,
                          int C, const VitText *t, VitError *err);

/* ---------------------------------------------------------------------------
 * CLIP: the image tower and the phrase as a head (issue 27, clip-img)
 *
 * vit_load opens CLIP's image tower (Radford et al. 2021, openai/CLIP model.py
 * VisionTransformer; transformers' CLIPVisionModel) from a whole CLIP checkpoint,
 * .safetensors or .pth, in Hugging Face's CLIPModel names (vision_model.*,
 * visual_projection, logit_scale) or OpenAI's / OpenCLIP's (visual.*, logit_scale),
 * through the layouts assets/layouts/clip-hf.json and clip-openai.json; the text
 * tensors are ignored (the text tower: vit_text_load). The tower is timm's ViT with
 *   x = ln_pre(cat(cls, conv1(x)) + pos)   (cfg.norm_pre; conv1 without bias)
 *   blocks with QuickGELU (x sigmoid(1.702 x)) for OpenAI's weights, LayerNorm eps 1e-5
 *   e = norm(z_L)[CLS] @ proj             (ln_post, then img_proj_w [E, D])
 * The activation: config.json's vision_config.hidden_act (HF), open_clip_config.json's
 * model_cfg.quick_gelu (OpenCLIP: absent means GELU, as open_clip's own default); a
 * checkpoint in OpenAI's names without open_clip_config.json is OpenAI's: QuickGELU.
 * Preprocessing is CLIP's: the short side resized bicubically to S, centre crop S,
 * mean (0.48145466, 0.4578275, 0.40821073), std (0.26862954, 0.26130258, 0.27577711);
 * preprocessor_config.json (HF) or open_clip_config.json's preprocess_cfg beside the
 * weights override them. At another input size (VitLoadOptions) the position embedding
 * is resampled as the checkpoint's library does: antialiased (OpenCLIP's resize_pos_embed)
 * for OpenAI's names, not (transformers' interpolate_pos_encoding) for Hugging Face's.
 * Without a text head C = 0 and every image view works; the class-specific ones need a
 * head: vit_set_text_head. timm's own CLIP ViTs (norm_pre, the projection as a 512-class
 * head) open as timm ViTs with norm_pre, LayerNorm eps 1e-5, and QuickGELU when
 * config.json's architecture names it (vit_*_clip_quickgelu_*).
 * Tested against a PyTorch reference of the published architecture at ViT-B/32's and
 * ViT-B/16's shapes in both names (tests/parity/test_clip_image.py). */

/* Make the head CLIP's zero-shot head (CLIP's model.py forward: logit_scale *
 * image_features @ text_features.t() on normalised features):
 *   logits[c] = logit_scale * cos(e, emb[c]),  e = img_proj(norm(z_L)[CLS]),
 * emb [C, E] text embeddings (vit_text_embed; normalised here, copied), labels [C]
 * (copied, NULL: none; vit->labels then points at the copy, or is NULL). C >= 1,
 * logit_scale > 0 and finite (the checkpoint's: cfg.logit_scale). Replaces the
 * previous head; a VitRun, VitBatch or VitGrad made before must be made again when C
 * changes (they are sized for C). vit_backward differentiates logits[c] through the
 * normalisation of e; so every class-specific map (vit_explain) explains the phrase c,
 * and LeGrad's s_l is the same head on norm(z_l)[CLS] (LeGrad's compute_legrad_clip).
 * The AttnLRP pass holds |e| constant, as its LayerNorm rule holds the standard
 * deviation. Not thread-safe: no other call may use vit meanwhile.
 * Errors: VIT_ERR_ARG (no image projection, embed_dim 0: "has no image projection";
 * emb NULL, C out of 1 .. VIT_MAX_CLASSES, a zero or non-finite embedding, a bad
 * logit_scale), VIT_ERR_NOMEM; on error the previous head stays. */
VitStatus vit_set_text_head(Vit *vit, const float *emb, int C, const char *const *labels,
                            float logit_scale, VitError *err);

/* SigLIP's scores (Zhai et al. 2023, §3; transformers' SiglipModel.forward): after
 * vit_set_text_head, logits[c] = logit_scale * cos(e, emb[c]) + logit_bias and
 * probs[c] = sigmoid(logits[c]), each label on its own (they do not sum to 1), in
 * vit_forward, vit_forward_batch, vit_text_logits and the logit lens. A SigLIP image tower
 * has no projection: e is the MAP head's output (cfg.embed_dim = D, img_proj_w NULL).
 * vit_backward differentiates logits[c], whose sigmoid is the score (the score's gradient
 * is sigmoid'(y_c) > 0 times it: every map the same up to that factor). A new
 * vit_set_text_head returns to softmax until this is called again. Errors: VIT_ERR_ARG (no
 * text head, a logit_bias that is not finite). */
VitStatus vit_set_text_sigmoid(Vit *vit, float logit_bias, VitError *err);

/* A new phrase for the same photo without another forward pass: after vit_set_text_head
 * with the C that run was made for, run->logits and run->probs [C] of the new head from
 * the image embedding the last vit_forward kept (run->img_embed): C*E multiply-adds. The
 * forward pass's other buffers do not depend on the head (a CLIP tower computes its CLS
 * row with or without one), so vit_backward and vit_explain then explain the new phrases
 * on the same pass. Errors: VIT_ERR_ARG (no text head, a run made for another C or
 * model). */
VitStatus vit_text_logits(VitRun *run, const Vit *vit, VitError *err);

/* e [E] (caller's) = the image embedding of the last vit_forward on run: img_proj(
 * norm(z_L)[CLS]), not normalised (CLIP's encode_image). Errors: VIT_ERR_ARG (a model
 * without image projection, a run not made for vit). */
VitStatus vit_image_embed(float *e, const VitRun *run, const Vit *vit, VitError *err);

#ifdef __cplusplus
}
#endif
#endif /* VIT_TEXT_H */
