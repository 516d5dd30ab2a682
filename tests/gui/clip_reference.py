"""A float64 PyTorch reference of CLIP's zero-shot classifier, for the app's CLIP tests, written
from the published architecture (openai/CLIP model.py: VisionTransformer, the text
Transformer with its causal mask, QuickGELU, the projections and logit_scale) and the
notebook's prompt ensembling (Prompt_Engineering_for_ImageNet: zeroshot_classifier), on the
weights in OpenAI's names as clip_models.random_clip makes them.

The tokenizer is the tests' one Python reference of CLIP's (tests/text/clip_bpe.py, the one
tests/text/test_tokenizer.py checks engine/text/tokenizer.c against).
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "text"))
import clip_bpe  # noqa: E402


MEAN = (0.48145466, 0.4578275, 0.40821073)  # CLIP's normalisation
STD = (0.26862954, 0.26130258, 0.27577711)


class Bpe(clip_bpe.Reference):
    """CLIP's tokenizer (tests/text/clip_bpe.py): a prompt's ids, [SOT] + ids + [EOT], cut at
    `context` as clip.tokenize(truncate=True) cuts it."""

    def encode(self, text, context=77):
        return super().encode(text, context)[0]


def quick_gelu(x):
    return x * torch.sigmoid(1.702 * x)


def blocks(x, w, prefix, n, heads, mask=None):
    """OpenAI's ResidualAttentionBlock: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))."""
    T, D = x.shape
    for i in range(n):
        b = f"{prefix}.resblocks.{i}"
        h = torch.nn.functional.layer_norm(x, (D,), w[f"{b}.ln_1.weight"], w[f"{b}.ln_1.bias"],
                                           1e-5)
        q, k, v = (h @ w[f"{b}.attn.in_proj_weight"].t() + w[f"{b}.attn.in_proj_bias"]).chunk(3, -1)
        q, k, v = (t.reshape(T, heads, D // heads).transpose(0, 1) for t in (q, k, v))
        s = q @ k.transpose(1, 2) / (D // heads) ** 0.5
        if mask is not None:
            s = s + mask
        a = (s.softmax(-1) @ v).transpose(0, 1).reshape(T, D)
        x = x + a @ w[f"{b}.attn.out_proj.weight"].t() + w[f"{b}.attn.out_proj.bias"]
        h = torch.nn.functional.layer_norm(x, (D,), w[f"{b}.ln_2.weight"], w[f"{b}.ln_2.bias"],
                                           1e-5)
        h = quick_gelu(h @ w[f"{b}.mlp.c_fc.weight"].t() + w[f"{b}.mlp.c_fc.bias"])
        x = x + h @ w[f"{b}.mlp.c_proj.weight"].t() + w[f"{b}.mlp.c_proj.bias"]
    return x


def encode_image(w, pixels, shape):
    """pixels [3, S, S] normalised -> the image embedding [E] (not normalised)."""
    w = {k: v.double() for k, v in w.items()}
    P, D = shape["P"], shape["D"]
    x = torch.nn.functional.conv2d(pixels[None].double(), w["visual.conv1.weight"], stride=P)
    x = x.reshape(D, -1).t()
    x = torch.cat([w["visual.class_embedding"][None], x]) + w["visual.positional_embedding"]
    x = torch.nn.functional.layer_norm(x, (D,), w["visual.ln_pre.weight"], w["visual.ln_pre.bias"],
                                       1e-5)
    x = blocks(x, w, "visual.transformer", shape["LV"], shape["HV"])
    x = torch.nn.functional.layer_norm(x[0], (D,), w["visual.ln_post.weight"],
                                       w["visual.ln_post.bias"], 1e-5)
    return x @ w["visual.proj"]


def encode_text(w, ids, shape):
    """Token ids [n] -> the text embedding [E] at the end-of-text token (its argmax)."""
    w = {k: v.double() for k, v in w.items()}
    n, W = len(ids), shape["W"]
    x = w["token_embedding.weight"][torch.tensor(ids)] + w["positional_embedding"][:n]
    mask = torch.full((n, n), float("-inf"), dtype=torch.float64).triu(1)
    x = blocks(x, w, "transformer", shape["LT"], shape["HT"], mask)
    x = torch.nn.functional.layer_norm(x, (W,), w["ln_final.weight"], w["ln_final.bias"], 1e-5)
    return x[max(range(n), key=lambda i: ids[i])] @ w["text_projection"]


def class_embedding(w, tok, name, templates, shape, normalise_each=True):
    """zeroshot_classifier: each template's embedding normalised, averaged, normalised again.
    normalise_each=False: the plausible mistake of averaging the raw embeddings."""
    es = [encode_text(w, tok.encode(t.replace("{}", name)), shape) for t in templates]
    if normalise_each:
        es = [e / e.norm() for e in es]
    m = torch.stack(es).mean(0)
    return m / m.norm()


def zero_shot(w, tok, pixels, names, templates, shape, phrase=None, normalise_each=True):
    """softmax(logit_scale * cos(image, class)) over the classes (then the phrase, as typed)."""
    e = encode_image(w, pixels, shape)
    e = e / e.norm()
    t = [class_embedding(w, tok, n, templates, shape, normalise_each) for n in names]
    if phrase is not None:
        p = encode_text(w, tok.encode(phrase), shape)
        t.append(p / p.norm())
    logits = w["logit_scale"].double().exp() * (torch.stack(t) @ e)
    return logits.softmax(0)


def pixels_of(path):
    """A photo of exactly the model's input size, normalised with CLIP's mean and std (no
    resize, no crop: the transform is the identity there but for these)."""
    import numpy as np
    from PIL import Image
    a = np.asarray(Image.open(path).convert("RGB"), dtype=np.float64) / 255.0
    x = torch.from_numpy(a).permute(2, 0, 1)
    return (x - torch.tensor(MEAN, dtype=torch.float64)[:, None, None]) / \
        torch.tensor(STD, dtype=torch.float64)[:, None, None]
