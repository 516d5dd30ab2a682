/* vit.h - the vitlens engine: load a Vision Transformer, run it on a photo,
 * keep every attention matrix, and turn them into maps over the patch grid.
 *
 * No SDL, no GL, no printing: every call returns a VitStatus and, when given a
 * VitError, a message that names the file and what is wrong.
 *
 * Typical use:
 *
 *     Vit vit = {0}; VitRun run = {0}; VitImage img = {0}; VitError err;
 *     if (vit_load(&vit, "deit.safetensors", NULL, &err)) { puts(err.msg); ... }
 *     vit_run_init(&run, &vit, &err);
 *     vit_image_load(&img, "cat.png", &err);
 *     vit_preprocess(run.input, NULL, NULL, NULL, NULL, &vit.cfg, &img, &err);
 *     vit_forward(&run, &vit);
 *     float map[vit.cfg.n_patches];
 *     vit_map_attention(map, &run, 11, 0, 0, NULL);      // layer 12, head 1, CLS
 *     vit_image_free(&img); vit_run_free(&run); vit_free(&vit);
 *
 * Shapes (row-major, PyTorch's layout; linear weights are [out, in]):
 *   Sh, Sw  input height, width in px (Sh = P * gh)      P  patch side in px
 *   gh, gw  patch grid rows, columns                    N  = gh * gw patches
 *   Np number of prefix tokens: the CLS token, DeiT's distillation token,
 *      register tokens                                  T  = Np + N tokens
 *   R  register tokens   D width   H heads   Dh head size (D / H but for a notebook's
 *   per-head Linear(D, Dh) lists)   A = H * Dh the attention's width   F MLP width
 *   L  layers   C classes
 * Token order is timm's: [CLS, dist?, reg_0 .. reg_{R-1}, patch(0,0), patch(0,1),
 * ..., patch(gh-1,gw-1)]. A "map" is a float array [gh, gw] over the patches,
 * row-major; what goes to the prefix tokens is read apart (vit_prefix_share).
 *
 * The architecture is timm's VisionTransformer (vision_transformer.py): pre-norm
 * blocks, exact (erf) GELU, learned position embedding, final LayerNorm,
 * classification from the CLS token. Also loaded, each tested against a
 * PyTorch reference of its family (tests/parity):
 *   - timm's names, and Hugging Face transformers' ViTModel,
 *     ViTForImageClassification, DeiTForImageClassification(WithTeacher)
 *     (separate query/key/value; config.json gives eps, heads, size, labels);
 *   - DeiT's distillation token (the prediction averages the CLS and
 *     distillation heads, as timm and transformers do);
 *   - register tokens (timm vit_*_reg4_dinov2: inserted after the position
 *     embedding, which they do not have);
 *   - LayerScale (ls1/ls2 gamma: DINOv2, DeiT III);
 *   - any input size, square or not, with the position embedding resampled
 *     bicubically as the checkpoint's library does (timm: resample_abs_pos_embed,
 *     antialiased; transformers: interpolate_pos_encoding, not antialiased).
 *   - PyTorch checkpoints (torch.save's zip, engine/load/pth.c: a restricted
 *     unpickler, nothing in the file is run);
 *   - every checkpoint's tensor names through a layout (JSON, engine/load/layout.c),
 *     the shipped ones in assets/layouts/, tried in this order: timm.json (timm's
 *     names), hf.json (transformers': "vit." / "deit." / no prefix; "naming": "hf"
 *     for its conventions), torchvision.json (torchvision's ViTs),
 *     notebook-heads.json, notebook-linear.json, notebook-msa.json (the notebooks'
 *     ViTs); a user's own with VitLoadOptions.layout_path (timm.json is the template
 *     to copy). Read in place, or converted at load into the layout above; what a
 *     conversion cannot express is in VitConfig: the attention's scale
 *     (att_scale), the MLP's activation (mlp_act), a Tanh after the head.
 *   - CLIP's image tower (norm_pre, an image projection, a text head: see "CLIP"
 *     in vit/text.h).
 *   - pooled heads (VitConfig.head_pool): timm's average pooling with fc_norm (BEiT/EVA/
 *     MAE-style classifiers), transformers' Dinov2ForImageClassification ([CLS ; mean]).
 *   - DINOv3 (transformers' DINOv3ViTModel, timm's vit_*_patch16_dinov3): a rotary
 *     position embedding (VitRope) instead of a learned one, 4 registers, LayerScale, no
 *     key bias, and in the larger models a SwiGLU MLP (VitConfig.mlp_gated).
 *   - EVA-02 (timm's eva02_*: the Eva class, eva.py): a learned position embedding and
 *     EVA's rotary one (VIT_ROPE_EVA), q/v biases without a key bias, a SwiGLU MLP (fc1
 *     packed [gate; value] in Ti and S; fc1_g, fc1_x and a LayerNorm over the hidden
 *     before fc2 in B and L: VitConfig.mlp_norm), average pooling with fc_norm.
 *   - SigLIP and SigLIP 2's image tower (transformers' SiglipModel / SiglipVisionModel,
 *     vision_model.*; assets/layouts/siglip-hf.json): NO CLS token, an attention-pooling
 *     head (VIT_POOL_MAP: a probe's attention over the patches, then LayerNorm + MLP),
 *     whose output is the image embedding (E = D, no projection) and, with a text head,
 *     sigmoid scores (vit_set_text_sigmoid). SigLIP 2's text tower is SigLIP's with 256 000
 *     token embeddings (vit_text_load), read with Gemma's tokenizer (vit_tokenizer_load).
 * Models without a CLS token (SigLIP). The token layout is then the patches alone:
 * n_prefix = 0, T = N, token t is patch t; nothing is invented in the CLS's place, so
 * every map of the attention between tokens is the model's own. A map's `query` is a
 * token (a patch: no query reads "the CLS token"); where the model looks when it pools is
 * the probe's attention, VitRun.probe_att [H, N] (the app's "probe" map kind). The
 * class-specific maps that end at the CLS row (Chefer, gradient rollout) end at the
 * probe's instead (vit_explain); Grad-CAM, LeGrad, AttnLRP and gradient x input read all
 * the patches anyway.
 * Not supported, refused with a message: DINOv2 ViT-g's SwiGLU MLP, timm's ViTs without a
 * CLS token (class_token=False, the *_gap_* models), timm's own SigLIP towers
 * (attn_pool.*), SigLIP 2's NaFlex models (Siglip2Model), EVA-CLIP's towers, q/k norm.
 */
#ifndef VIT_H
#define VIT_H

/* The API in parts (engine/include/vit/), each with the section it names; a part includes
 * the parts it needs. */
#include "vit/errors.h"
#include "vit/model.h"
#include "vit/run.h"
#include "vit/image.h"
#include "vit/maps.h"
#include "vit/backward.h"
#include "vit/tokens.h"
#include "vit/faithful.h"
#include "vit/lesson.h"
#include "vit/text.h"

#endif /* VIT_H */
