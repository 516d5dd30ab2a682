#!/usr/bin/python3
"""Train a tiny CLIP on vitlens's shape scenes: a teaching toy for issue 27's views.

No trained CLIP can be downloaded everywhere, yet the phrase views (zero-shot labels,
a map for "a red circle") need one to show anything. This script trains one in the
published architecture (Radford et al. 2021; OpenAI's clip/model.py: VisionTransformer
and the text Transformer, pre-norm residual blocks with QuickGELU, ln_pre, the CLS
token through ln_post and `proj`, the text tower's causal mask and end-of-text pooling
through ln_final and `text_projection`, a learned logit_scale) on the built-in model's
scenes (tools/gen_scenes.py: a textured background, distractor strokes) holding one or
two shapes painted in named colours, each scene captioned from what it holds ("a red
circle", "a blue square on the left", "a green star and a white ring", "two yellow
crosses"), the captions tokenised with CLIP's real BPE vocabulary (49 408 tokens,
bpe_simple_vocab_16e6.txt.gz; the tokenizer is written below from the published
algorithm). It knows 6 colours and 6 shapes, nothing else: a toy, not CLIP.

    OMP_WAIT_POLICY=PASSIVE nice -n 10 /usr/bin/python3 tools/train_tiny_clip.py

writes into --out (default build/tiny-clip/):
  model.safetensors       OpenAI/OpenCLIP names (visual.conv1.weight, visual.class_embedding,
                          visual.positional_embedding, visual.ln_pre.*,
                          visual.transformer.resblocks.N.{ln_1, attn.in_proj_*, attn.out_proj.*,
                          ln_2, mlp.c_fc.*, mlp.c_proj.*}, visual.ln_post.*, visual.proj,
                          token_embedding.weight, positional_embedding, transformer.resblocks.N.*,
                          ln_final.*, text_projection, logit_scale), float32
  open_clip_config.json   OpenCLIP's model_cfg (quick_gelu true) and preprocess_cfg (mean, std)
  bpe_simple_vocab_16e6.txt.gz and its LICENSE, copied from --vocab
  scene.png               a held-out two-object scene (a red circle and a blue square)
  reference.json          the model's embeddings and logits for scene.png and six phrases
  scenes/                 a few more held-out scenes, one and two objects, with captions.txt
  train_log.txt           the run: settings, losses, time, held-out accuracy

Training: the contrastive loss of CLIP over a batch, with one change for a world this
small: a batch holds many captions that are true of several of its scenes ("a red
circle" of every scene with a red circle), so each scene's positives are all the batch's
captions true of it (and each caption's, all the scenes it is true of): the loss is
-log of the softmax's summed probability over the positives, both directions. The
truth of a caption for a scene is computed from the scene's objects, never guessed.

The text tower is trained on sequences cut after the longest caption of the batch: with
the causal mask a token never sees a later one, so the end-of-text token's output is the
same as with the 77-token context the file keeps (positions past the longest caption
keep their initial values and change nothing the app computes). Token embedding rows of
tokens no caption uses get no gradient and are excluded from weight decay: they keep
their initial values (OpenAI's init, N(0, 0.02)).

Held-out checks (scenes of another split, never trained on): zero-shot colour+shape
among the 36 prompts "a photo of a {colour} {shape}." on one-object scenes; on
two-object scenes (different colour and shape), whether the two true phrases rank above
their swaps ("a red square" / "a blue circle" when the scene has a red circle and a blue
square); and the occlusion test a phrase map needs: removing the phrase's object lowers
the phrase's score more than removing the other object.
"""
import argparse
import gzip
import html
import json
import math
import os
import shutil
import struct
import sys
import time
import unicodedata

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image, ImageDraw

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_scenes  # noqa: E402
from machine import cpu_name  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# OpenAI CLIP's normalisation (clip.py _transform), so an app that assumes CLIP's
# preprocessing without reading the config still feeds the model what it trained on.
MEAN = (0.48145466, 0.4578275, 0.40821073)
STD = (0.26862954, 0.26130258, 0.27577711)
SIZE = gen_scenes.SIZE  # 96 px: the scenes' own side, no resampling
SHAPES = gen_scenes.CLASSES  # circle, square, triangle, star, cross, ring
PLURAL = {"circle": "circles", "square": "squares", "triangle": "triangles", "star": "stars",
          "cross": "crosses", "ring": "rings"}
# Named colours, painted with +-20 per channel of jitter and 4 % shading noise.
COLOURS = {"red": (220, 30, 30), "yellow": (235, 215, 30), "green": (30, 165, 45),
           "blue": (35, 70, 225), "purple": (140, 40, 185), "white": (245, 245, 245)}
CNAMES = list(COLOURS)
SPLIT_SEED = {"train": 0, "test": 1, "demo": 2}
CONTEXT = 77


# --- the tokenizer: CLIP's byte-level BPE (OpenAI simple_tokenizer.py's algorithm) ----

def bytes_to_unicode():
    """The 256 bytes -> printable characters: bytes that are printable Latin-1 map to
    themselves, the others to 256 + n in byte order (GPT-2's table)."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1))
          + list(range(ord("\xae"), ord("\xff") + 1)))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class Tokenizer:
    """text -> [SOT, ids..., EOT]. Cleaning: html unescape (twice), whitespace collapsed,
    lower case (ftfy's fix_text is not applied: the captions here are plain ASCII). The
    split is the published pattern <|startoftext|>|<|endoftext|>|'s|'t|'re|'ve|'m|'ll|'d|
    [\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+ written as a scanner over Unicode categories
    (the `regex` module is not in Debian's python3 here). BPE: the word's last symbol
    carries </w>, the lowest-ranked merge first, until none applies."""

    SPECIAL = ("<|startoftext|>", "<|endoftext|>")
    CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d")

    def __init__(self, path):
        with gzip.open(path) as f:
            lines = f.read().decode("utf-8").split("\n")
        merges = [tuple(m.split()) for m in lines[1:49152 - 256 - 2 + 1]]
        self.byte_enc = bytes_to_unicode()
        vocab = list(self.byte_enc.values())
        vocab += [v + "</w>" for v in vocab]
        vocab += ["".join(m) for m in merges]
        vocab += list(self.SPECIAL)
        if len(vocab) != 49408:
            raise ValueError(f"{path}: {len(vocab)} tokens, expected 49408")
        self.encoder = {v: i for i, v in enumerate(vocab)}
        self.ranks = {m: i for i, m in enumerate(merges)}
        self.sot, self.eot = self.encoder[self.SPECIAL[0]], self.encoder[self.SPECIAL[1]]
        self.cache = {}

    @staticmethod
    def _cat(ch):
        c = unicodedata.category(ch)
        return "L" if c[0] == "L" else "N" if c[0] == "N" else "S" if ch.isspace() else "P"

    def split(self, text):
        out, i, n = [], 0, len(text)
        while i < n:
            ch = text[i]
            k = self._cat(ch)
            if k == "S":
                i += 1
                continue
            sp = next((s for s in self.SPECIAL if text.startswith(s, i)), None)
            if sp:
                out.append(sp)
                i += len(sp)
                continue
            ct = next((c for c in self.CONTRACTIONS if text[i:i + len(c)].lower() == c), None)
            if ct:
                out.append(text[i:i + len(ct)])
                i += len(ct)
                continue
            j = i + 1
            if k == "L":
                while j < n and self._cat(text[j]) == "L":
                    j += 1
            elif k == "P":
                while j < n and self._cat(text[j]) == "P":
                    j += 1
            out.append(text[i:j])  # "N": one digit at a time
            i = j
        return out

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = list(token[:-1]) + [token[-1] + "</w>"]
        while len(word) > 1:
            pairs = [(self.ranks.get((a, b), math.inf), a, b) for a, b in zip(word, word[1:])]
            r, first, second = min(pairs)
            if r == math.inf:
                break
            merged, i = [], 0
            while i < len(word):
                if i < len(word) - 1 and word[i] == first and word[i + 1] == second:
                    merged.append(first + second)
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        self.cache[token] = word
        return word

    def encode(self, text):
        text = " ".join(html.unescape(html.unescape(text)).split()).lower()
        ids = [self.sot]
        for tok in self.split(text):
            if tok in self.SPECIAL:
                ids.append(self.encoder[tok])
                continue
            tok = "".join(self.byte_enc[b] for b in tok.encode("utf-8"))
            ids += [self.encoder[t] for t in self.bpe(tok)]
        ids = ids[:CONTEXT - 1] + [self.eot]
        return ids


# --- the scenes: gen_scenes' backgrounds and shapes, in named colours -----------------

R1 = (20, 30)  # px: the one object's radius range
R2 = (15, 21)  # px: each of two objects' radius range
SIDE = 8  # px: an object is "on the left" when its centre is this far left of the middle


class Obj:
    __slots__ = ("colour", "shape", "cx", "cy", "r")

    def __init__(self, colour, shape, cx, cy, r):
        self.colour, self.shape, self.cx, self.cy, self.r = colour, shape, cx, cy, r

    def side(self):
        return ("left" if self.cx < SIZE / 2 - SIDE else
                "right" if self.cx > SIZE / 2 + SIDE else None)


def paint(rng, arr, obj, colour_rgb):
    """gen_scenes' object painting with a given colour: anti-aliased coverage (4x
    supersampling), the colour with 4 % shading noise. -> (arr, coverage [S, S])."""
    ss = gen_scenes.SS
    m = Image.new("L", (SIZE * ss, SIZE * ss), 0)
    gen_scenes._draw_shape(ImageDraw.Draw(m), obj.shape, obj.cx * ss, obj.cy * ss, obj.r * ss,
                           rng.uniform(0, 2 * math.pi), 255)
    alpha = np.asarray(m.resize((SIZE, SIZE), Image.BOX), np.float32)[..., None] / 255
    shade = 1 + 0.04 * rng.standard_normal((SIZE, SIZE, 1), dtype=np.float32)
    return arr * (1 - alpha) + np.float32(colour_rgb) * shade * alpha, alpha[..., 0]


def pick_colour(rng, under, avoid=()):
    """A named colour (not in `avoid`) at least 150 (L1 over 0-765) from the background
    under the object, so the object shows; the farthest one when none is."""
    far = [c for c in CNAMES if np.abs(np.float32(COLOURS[c]) - under).sum() > 150
           and c not in avoid]
    if far:
        return far[int(rng.integers(len(far)))]
    return max(CNAMES, key=lambda c: np.abs(np.float32(COLOURS[c]) - under).sum())


def make_scene(split, index, level, kind=None, fixed=None):
    """Scene `index` of `split` (deterministic). kind: 1 (one object), 2 (two of different
    colour and shape), 3 (two of the same colour and shape; "two red circles"), None:
    drawn (45 %, 45 %, 10 %). fixed: a list of (colour, shape) to paint instead of drawn
    ones. -> (rgb uint8 [S, S, 3], objects, covers [n, S, S] float, the scene without
    each object rgb [n, S, S, 3] (two-object scenes only, else None))."""
    rng = np.random.default_rng([SPLIT_SEED[split], index, 27])
    if kind is None:
        u = rng.random()
        kind = 1 if u < 0.45 else 2 if u < 0.9 else 3
    n = 1 if kind == 1 else 2
    bg = gen_scenes._distractors(rng, gen_scenes._background(rng, level), level)
    if n == 1:
        r = rng.uniform(*R1, 1)
        c = rng.uniform(r + 2, SIZE - r - 2, (1, 2))
    else:
        for _ in range(10000):
            r = rng.uniform(*R2, 2)
            lo, hi = gen_scenes.EXTENT * r + 1, SIZE - gen_scenes.EXTENT * r - 1
            c = rng.uniform(lo[:, None], hi[:, None], (2, 2))
            if np.hypot(*(c[0] - c[1])) >= gen_scenes.EXTENT * (r[0] + r[1]) + gen_scenes.GAP:
                break
    shapes = [SHAPES[int(rng.integers(6))]]
    if kind == 2:
        shapes.append(SHAPES[(SHAPES.index(shapes[0]) + 1 + int(rng.integers(5))) % 6])
    elif kind == 3:
        shapes.append(shapes[0])
    objs, alone, covers = [], [], []
    for k in range(n):
        o = Obj(None, shapes[k], float(c[k, 0]), float(c[k, 1]), float(r[k]))
        yy, xx = np.mgrid[:SIZE, :SIZE]
        inside = (xx - o.cx) ** 2 + (yy - o.cy) ** 2 < o.r ** 2
        under = bg[inside].mean(0)
        if fixed:
            o.colour, o.shape = fixed[k]
        elif kind == 3 and k == 1:
            o.colour = objs[0].colour
        else:
            # two different shapes: a different colour 4 times in 5 ("a red circle and a
            # red star" teaches that the colour alone does not name the object)
            avoid = (objs[0].colour,) if kind == 2 and k == 1 and rng.random() < 0.8 else ()
            o.colour = pick_colour(rng, under, avoid)
        rgb = np.float32(COLOURS[o.colour]) + rng.uniform(-20, 20, 3).astype(np.float32)
        out, cov = paint(rng, bg, o, np.clip(rgb, 0, 255))
        objs.append(o)
        alone.append(out)
        covers.append(cov)
    if n == 1:
        img = alone[0]
    else:  # each object painted alone; they are apart, so each pixel comes from one
        img = np.where(covers[0][..., None] > 0, alone[0], alone[1])

    def u8(x):
        return np.clip(np.rint(x), 0, 255).astype(np.uint8)
    without = np.stack([u8(alone[1]), u8(alone[0])]) if n == 2 else None
    return u8(img), objs, np.stack(covers), without


# --- captions and their truth ----------------------------------------------------------
# A caption is (text, spec); spec: a tuple of requirements, each (count, colour, shape,
# side) with None for "any". (1, c, s, p): some object matches; (2, c, s, None): exactly
# two objects match. A spec of two requirements ("a red circle and a blue star") needs both.

def matches(o, c, s, p):
    return (c is None or o.colour == c) and (s is None or o.shape == s) and \
        (p is None or o.side() == p)


def true_of(spec, objs):
    for count, c, s, p in spec:
        k = sum(matches(o, c, s, p) for o in objs)
        if (count == 1 and k == 0) or (count == 2 and k != 2):
            return False
    return True


def article(word):
    return "an" if word[0] in "aeiou" else "a"


def phrase(c, s, p=None):
    words = " ".join(w for w in (c, s) if w)
    return f"{article(words)} {words}" + (f" on the {p}" if p else "")


def captions(objs):
    """Every caption the generator may give this scene: [(text, spec)]."""
    out = []
    if len(objs) == 2 and objs[0].colour == objs[1].colour and objs[0].shape == objs[1].shape:
        o = objs[0]
        out += [(f"two {o.colour} {PLURAL[o.shape]}", ((2, o.colour, o.shape, None),)),
                (f"two {PLURAL[o.shape]}", ((2, None, o.shape, None),)),
                (f"a photo of two {o.colour} {PLURAL[o.shape]}.", ((2, o.colour, o.shape, None),))]
    for o in objs:
        out += [(phrase(o.colour, o.shape), ((1, o.colour, o.shape, None),)),
                (f"a photo of {phrase(o.colour, o.shape)}.", ((1, o.colour, o.shape, None),)),
                (phrase(None, o.shape), ((1, None, o.shape, None),)),
                (f"{phrase(o.colour, None)} shape", ((1, o.colour, None, None),))]
        if o.side():
            out.append((phrase(o.colour, o.shape, o.side()),
                        ((1, o.colour, o.shape, o.side()),)))
    if len(objs) == 2 and (objs[0].colour, objs[0].shape) != (objs[1].colour, objs[1].shape):
        a, b = objs
        for x, y in ((a, b), (b, a)):
            out.append((f"{phrase(x.colour, x.shape)} and {phrase(y.colour, y.shape)}",
                        ((1, x.colour, x.shape, None), (1, y.colour, y.shape, None))))
    return out


def hard_negative(text, spec, rng):
    """A caption one word away from `text` (NegCLIP's hard negatives, Yuksekgonul et al.
    2023): one requirement's shape or colour changed, or, in "a red circle and a blue
    star", the two colours swapped ("a blue circle and a red star"). -> (text, spec); its
    truth for every scene is computed like any caption's (it may be true of another one).
    No colour or shape starts with a vowel, so the article stays right."""
    words = text.rstrip(".").split(" ")
    dot = "." if text.endswith(".") else ""
    reqs = [list(r) for r in spec]

    def where(k, field):  # the word index of requirement k's colour (1) or shape (2)
        val = reqs[k][field]
        form = PLURAL[val] if field == 2 and reqs[k][0] == 2 else val
        nth = sum(1 for j in range(k) if reqs[j][field] == val)
        hits = [i for i, w in enumerate(words) if w == form]
        return hits[nth]
    choices = [(k, f) for k in range(len(reqs)) for f in (1, 2) if reqs[k][f] is not None]
    swap = len(reqs) == 2 and reqs[0][1] != reqs[1][1]
    pick = int(rng.integers(len(choices) + (2 if swap else 0)))
    if pick >= len(choices):  # swap the colours of the two objects
        i0, i1 = where(0, 1), where(1, 1)
        words[i0], words[i1] = words[i1], words[i0]
        reqs[0][1], reqs[1][1] = reqs[1][1], reqs[0][1]
    else:
        k, f = choices[pick]
        i = where(k, f)
        pool = CNAMES if f == 1 else SHAPES
        new = pool[(pool.index(reqs[k][f]) + 1 + int(rng.integers(len(pool) - 1))) % len(pool)]
        words[i] = PLURAL[new] if f == 2 and reqs[k][0] == 2 else new
        reqs[k][f] = new
    return " ".join(words) + dot, tuple(tuple(r) for r in reqs)


def all_texts():
    """Every caption text the generator can make (for the vocabulary rows used)."""
    texts = set()
    for c in CNAMES:
        for s in SHAPES:
            for c2 in CNAMES:
                for s2 in SHAPES:
                    objs = [Obj(c, s, 20, 48, 10), Obj(c2, s2, 76, 48, 10)]
                    texts.update(t for t, _ in captions(objs))
    return sorted(texts)


# --- the model: OpenAI CLIP's ViT and text Transformer ---------------------------------

class LayerNorm(nn.LayerNorm):
    """In float32 whatever the input (OpenAI's LayerNorm subclass does the same for fp16;
    here for bfloat16 autocast, which leaves layer_norm's inputs mixed on the CPU)."""

    def forward(self, x):
        return super().forward(x.float())


class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)  # OpenAI: x * torch.sigmoid(1.702 * x)


class Attention(nn.Module):
    """nn.MultiheadAttention's parameters (in_proj_weight [3W, W] rows q, k, v;
    in_proj_bias [3W]; out_proj) and its computation: softmax(q k^T / sqrt(Dh) + mask) v."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * width, width))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * width))
        self.out_proj = nn.Linear(width, width)
        nn.init.zeros_(self.out_proj.bias)

    def forward(self, x, mask=None):
        """x [B, T, W], mask [T, T] additive or None -> [B, T, W]."""
        B, T, W = x.shape
        H = self.heads
        qkv = F.linear(x, self.in_proj_weight, self.in_proj_bias).reshape(B, T, 3, H, W // H)
        q, k, v = (t.contiguous() for t in qkv.permute(2, 0, 3, 1, 4))  # [B, H, T, Dh]
        s = (q * (W // H) ** -0.5) @ k.transpose(-2, -1)
        if mask is not None:
            s = s + mask
        a = s.float().softmax(-1).to(v.dtype)
        return self.out_proj((a @ v).transpose(1, 2).reshape(B, T, W))


class ResidualAttentionBlock(nn.Module):
    """OpenAI: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)), mlp = c_fc, QuickGELU, c_proj."""

    def __init__(self, width, heads):
        super().__init__()
        self.ln_1 = LayerNorm(width)
        self.attn = Attention(width, heads)
        self.ln_2 = LayerNorm(width)
        self.mlp = nn.Sequential()
        self.mlp.add_module("c_fc", nn.Linear(width, 4 * width))
        self.mlp.add_module("gelu", QuickGELU())
        self.mlp.add_module("c_proj", nn.Linear(4 * width, width))

    def forward(self, x, mask=None):
        x = x + self.attn(self.ln_1(x), mask)
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, width, layers, heads):
        super().__init__()
        self.width, self.layers = width, layers
        self.resblocks = nn.ModuleList([ResidualAttentionBlock(width, heads) for _ in range(layers)])

    def forward(self, x, mask=None):
        for b in self.resblocks:
            x = b(x, mask)
        return x


class VisionTransformer(nn.Module):
    def __init__(self, size, patch, width, layers, heads, embed):
        super().__init__()
        scale = width ** -0.5
        self.conv1 = nn.Conv2d(3, width, patch, patch, bias=False)
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn((size // patch) ** 2 + 1, width))
        self.ln_pre = LayerNorm(width)
        self.transformer = Transformer(width, layers, heads)
        self.ln_post = LayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, embed))

    def forward(self, x, patches=False):
        """x [B, 3, S, S] normalised -> image embedding [B, E] (not normalised); with
        patches, also each patch token through the same ln_post and proj [B, N, E]."""
        x = self.conv1(x).flatten(2).transpose(1, 2)  # [B, N, W]
        cls = self.class_embedding.to(x.dtype).expand(x.shape[0], 1, -1)
        x = torch.cat([cls, x], 1) + self.positional_embedding.to(x.dtype)
        x = self.transformer(self.ln_pre(x))
        if patches:
            x = self.ln_post(x) @ self.proj
            return x[:, 0], x[:, 1:]
        return self.ln_post(x[:, 0]) @ self.proj


class CLIP(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.visual = VisionTransformer(SIZE, a.patch, a.width, a.layers, a.width // 64, a.embed)
        self.transformer = Transformer(a.text_width, a.text_layers, a.text_width // 64)
        self.token_embedding = nn.Embedding(49408, a.text_width)
        self.positional_embedding = nn.Parameter(torch.empty(CONTEXT, a.text_width))
        self.ln_final = LayerNorm(a.text_width)
        self.text_projection = nn.Parameter(torch.empty(a.text_width, a.embed))
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))
        # OpenAI's initialize_parameters, both towers
        nn.init.normal_(self.token_embedding.weight, std=0.02)
        nn.init.normal_(self.positional_embedding, std=0.01)
        for t in (self.visual.transformer, self.transformer):
            proj_std = t.width ** -0.5 * (2 * t.layers) ** -0.5
            for b in t.resblocks:
                nn.init.normal_(b.attn.in_proj_weight, std=t.width ** -0.5)
                nn.init.normal_(b.attn.out_proj.weight, std=proj_std)
                nn.init.normal_(b.mlp.c_fc.weight, std=(2 * t.width) ** -0.5)
                nn.init.normal_(b.mlp.c_proj.weight, std=proj_std)
        nn.init.normal_(self.text_projection, std=a.text_width ** -0.5)

    def encode_image(self, x):
        return self.visual(x)

    def encode_text(self, ids):
        """ids [B, L] (zero-padded after EOT, L <= 77) -> [B, E] at each row's EOT (argmax:
        the EOT id 49407 is the largest), through ln_final and text_projection."""
        L = ids.shape[1]
        x = self.token_embedding(ids) + self.positional_embedding[:L]
        mask = torch.full((L, L), float("-inf")).triu_(1)  # OpenAI build_attention_mask
        x = self.ln_final(self.transformer(x, mask))
        return x[torch.arange(ids.shape[0]), ids.argmax(-1)] @ self.text_projection


def init_mimetic_(visual, seed):
    """Mimetic initialisation (Trockman & Kolter 2023) of the image tower, values only:
    per head W_q W_k^T ~ 0.7 Z + 0.7 I and per block W_v W_o ~ 0.4 Z - 0.4 I (Z ~ N(0,
    1/W)), the patches' position embedding a 2-D sin-cos one (still trained). Attention
    starts out attending to the neighbouring patches, like a convolution: the tower
    learns shapes from fewer scenes (tools/train_default.py measured the same)."""
    g = torch.Generator().manual_seed(seed)
    W = visual.positional_embedding.shape[1]
    side = round((visual.positional_embedding.shape[0] - 1) ** 0.5)
    yy, xx = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    omega = 1.0 / 10000 ** (torch.arange(W // 4) / (W // 4))
    xo, yo = xx.flatten()[:, None] * omega, yy.flatten()[:, None] * omega
    with torch.no_grad():
        visual.positional_embedding[1:] = torch.cat([xo.sin(), xo.cos(), yo.sin(), yo.cos()], 1)
        for blk in visual.transformer.resblocks:
            w, H = blk.attn.in_proj_weight, blk.attn.heads  # [3W, W]: rows q, k, v
            Dh = W // H
            for h in range(H):
                U, S, Vt = torch.linalg.svd(0.7 * torch.randn(W, W, generator=g) / W ** 0.5
                                            + 0.7 * torch.eye(W))
                r = S[:Dh].sqrt()
                w[h * Dh:(h + 1) * Dh] = (U[:, :Dh] * r).T
                w[W + h * Dh:W + (h + 1) * Dh] = (Vt[:Dh].T * r).T
            U, S, Vt = torch.linalg.svd(0.4 * torch.randn(W, W, generator=g) / W ** 0.5
                                        - 0.4 * torch.eye(W))
            r = S.sqrt()
            w[2 * W:] = (U * r).T
            blk.attn.out_proj.weight.copy_((r[:, None] * Vt).T)


# --- data ------------------------------------------------------------------------------

def to_tensor(imgs):
    """uint8 [B, S, S, 3] -> [B, 3, S, S] normalised with CLIP's mean and std."""
    x = torch.from_numpy(np.array(imgs)).permute(0, 3, 1, 2).float().div(255)
    return (x - torch.tensor(MEAN)[:, None, None]) / torch.tensor(STD)[:, None, None]


def pad(tok_lists):
    L = max(len(t) for t in tok_lists)
    out = torch.zeros(len(tok_lists), L, dtype=torch.long)
    for i, t in enumerate(tok_lists):
        out[i, :len(t)] = torch.tensor(t)
    return out


def flip_objs(objs):
    """The objects of the mirrored scene (x -> S - x)."""
    return [Obj(o.colour, o.shape, SIZE - o.cx, o.cy, o.r) for o in objs]


def make_set(split, count, level, patch, say):
    """-> images uint8 [n, S, S, 3], objects, owner int8 [n, G, G] (the object covering
    more than half of each patch, -1 none)."""
    t = time.time()
    G = SIZE // patch
    imgs = np.empty((count, SIZE, SIZE, 3), np.uint8)
    owner = np.full((count, G, G), -1, np.int8)
    objs = []
    for i in range(count):
        imgs[i], o, cov, _ = make_scene(split, i, level)
        objs.append(o)
        frac = cov.reshape(len(o), G, patch, G, patch).mean((2, 4))
        for k in range(len(o)):
            owner[i][frac[k] > 0.5] = k
    say(f"{count} {split} scenes in {time.time() - t:.0f} s")
    return imgs, objs, owner


# --- the loss ----------------------------------------------------------------------------

def multi_positive_loss(logits, truth, B):
    """logits [B, B + K] (image i, caption j: the batch's B captions, then K hard
    negatives), truth [B, B + K] bool (caption j true of image i; the diagonal always):
    -log of the softmax's sum over the positives, images -> all captions and the batch's
    captions -> images, averaged."""
    neg = torch.finfo(logits.dtype).min
    pos = logits.masked_fill(~truth, neg)
    li = torch.logsumexp(pos, 1) - torch.logsumexp(logits, 1)
    lt = torch.logsumexp(pos[:, :B], 0) - torch.logsumexp(logits[:, :B], 0)
    return -(li.mean() + lt.mean()) / 2


# --- held-out evaluation ------------------------------------------------------------------

@torch.no_grad()
def embed_texts(model, tok, texts):
    e = model.encode_text(pad([tok.encode(t) for t in texts]))
    return e / e.norm(dim=-1, keepdim=True)


@torch.no_grad()
def embed_images(model, imgs, bs=200):
    out = [model.encode_image(to_tensor(imgs[i:i + bs])) for i in range(0, len(imgs), bs)]
    e = torch.cat(out)
    return e / e.norm(dim=-1, keepdim=True)


def eval_scenes(n, level, say):
    """The held-out scenes ('test' split): n one-object scenes, then up to n two-object
    scenes of two colours and two shapes with the scene without each object."""
    t = time.time()
    one = [make_scene("test", i, level, kind=1)[:2] for i in range(n)]
    two = [make_scene("test", 100000 + i, level, kind=2) for i in range(n)]
    two = [(img, objs, without) for img, objs, _, without in two
           if objs[0].colour != objs[1].colour]
    say(f"{n} + {len(two)} held-out scenes in {time.time() - t:.0f} s")
    return one, two


@torch.no_grad()
def evaluate(model, tok, data, say, tag=""):
    """Zero-shot checks on the held-out scenes of eval_scenes; returns a dict of numbers."""
    one, two = data
    model.eval()
    pairs = [(c, s) for c in CNAMES for s in SHAPES]
    temb = embed_texts(model, tok, [f"a photo of {phrase(c, s)}." for c, s in pairs])
    semb = embed_texts(model, tok, [f"a photo of {phrase(None, s)}." for s in SHAPES])
    cemb = embed_texts(model, tok, [f"a photo of {phrase(c, None)} shape." for c in CNAMES])
    res = {}
    # one object: colour+shape among 36, shape among 6, colour among 6
    labels = [(objs[0].colour, objs[0].shape) for _, objs in one]
    e = embed_images(model, np.stack([img for img, _ in one]))
    p36 = (e @ temb.T).argmax(1).tolist()
    ps = (e @ semb.T).argmax(1).tolist()
    pc = (e @ cemb.T).argmax(1).tolist()
    res["one_object_colour_shape_of_36"] = np.mean([pairs[p] == l for p, l in zip(p36, labels)])
    res["one_object_shape_of_6"] = np.mean([SHAPES[p] == l[1] for p, l in zip(ps, labels)])
    res["one_object_colour_of_6"] = np.mean([CNAMES[p] == l[0] for p, l in zip(pc, labels)])
    # two objects of different colour and shape: the true phrases against their swaps,
    # and occlusion (the phrase's own object removed vs the other one)
    ims = embed_images(model, np.concatenate([np.stack([img, w[0], w[1]]) for img, _, w in two]))
    ims = ims.reshape(len(two), 3, -1)
    bind, top2, occl, both = [], [], [], []
    for (img, (a, b), _), im in zip(two, ims):
        t = embed_texts(model, tok, [phrase(a.colour, a.shape), phrase(b.colour, b.shape),
                                     phrase(a.colour, b.shape), phrase(b.colour, a.shape)])
        s = im @ t.T  # [scene, without a, without b] x [a, b, a's colour b's shape, b's a's]
        bind.append(float(min(s[0, 0], s[0, 1]) > max(s[0, 2], s[0, 3])))
        order = (im[0] @ temb.T).argsort(descending=True)[:2].tolist()
        top2.append(float({pairs[k] for k in order} ==
                          {(a.colour, a.shape), (b.colour, b.shape)}))
        oa = float(s[1, 0] < s[2, 0])  # without a, "a" scores lower than without b
        ob = float(s[2, 1] < s[1, 1])
        occl += [oa, ob]
        both.append(oa * ob)
    res["two_objects_true_phrases_above_swaps"] = np.mean(bind)
    res["two_objects_top2_of_36"] = np.mean(top2)
    res["two_objects_occlusion_points_right"] = np.mean(occl)
    res["two_objects_occlusion_both_right"] = np.mean(both)
    res = {k: round(float(v), 4) for k, v in res.items()}
    res["one_object_scenes"], res["two_object_scenes"] = len(one), len(two)
    model.train()
    say(f"held-out{tag}: " + ", ".join(f"{k} {v}" for k, v in res.items()))
    return res


# --- saving ------------------------------------------------------------------------------

def save_safetensors(path, tensors, metadata):
    """The safetensors format: u64 little-endian header length, the JSON header (name ->
    dtype, shape, data_offsets; __metadata__), the raw little-endian data."""
    header, blobs, off = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        b = t.detach().contiguous().float().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def write_outputs(a, model, tok, res, say):
    sd = {k: v for k, v in model.state_dict().items()}
    meta = {"format": "pt", "what": "vitlens tiny CLIP (tools/train_tiny_clip.py): a teaching "
            "toy trained on shape scenes, 6 colours x 6 shapes; not OpenAI's CLIP"}
    save_safetensors(os.path.join(a.out, "model.safetensors"), sd, meta)
    cfg = {
        "model_cfg": {
            "embed_dim": a.embed, "quick_gelu": True,
            "vision_cfg": {"image_size": SIZE, "layers": a.layers, "width": a.width,
                           "patch_size": a.patch, "head_width": 64},
            "text_cfg": {"context_length": CONTEXT, "vocab_size": 49408, "width": a.text_width,
                         "heads": a.text_width // 64, "layers": a.text_layers},
        },
        "preprocess_cfg": {"mean": list(MEAN), "std": list(STD), "interpolation": "bicubic",
                           "resize_mode": "shortest"},
        "vitlens": {"note": "a teaching toy trained by tools/train_tiny_clip.py on 96 px shape "
                            "scenes; it knows the colours and shapes below and nothing else",
                    "colours": CNAMES, "shapes": SHAPES, "seed": a.seed,
                    "held_out": res},
    }
    with open(os.path.join(a.out, "open_clip_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    shutil.copyfile(a.vocab, os.path.join(a.out, "bpe_simple_vocab_16e6.txt.gz"))
    lic = os.path.join(os.path.dirname(a.vocab), "LICENSE")
    if os.path.exists(lic):
        shutil.copyfile(lic, os.path.join(a.out, "LICENSE-bpe_simple_vocab"))
    # the screenshot scene: a red circle and a blue square, held out (the demo split)
    img, objs, _, _ = make_scene("demo", 0, a.demo_level, kind=2,
                                 fixed=[("red", "circle"), ("blue", "square")])
    Image.fromarray(img).save(os.path.join(a.out, "scene.png"))
    d = os.path.join(a.out, "scenes")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "captions.txt"), "w") as f:
        f.write("# file: objects (colour shape x y), the held-out demo split\n")
        for i in range(1, 9):
            img, objs, _, _ = make_scene("demo", i, a.demo_level, kind=1 if i <= 2 else 2)
            name = f"scene_{i}.png"
            Image.fromarray(img).save(os.path.join(d, name))
            f.write(name + ": " + "; ".join(f"{o.colour} {o.shape} {o.cx:.0f} {o.cy:.0f}"
                                            for o in objs) + "\n")
    # What the saved model computes on scene.png, for checks (tests/tinyclip) and for the
    # app's numbers: the phrases' ids, the embeddings (projected, not normalised), the logits.
    texts = ["a red circle", "a blue square", "a red square", "a blue circle",
             "a photo of a red circle.", "a green star"]
    with torch.no_grad():
        model.eval()
        ids = [tok.encode(t) for t in texts]
        te = model.encode_text(pad(ids))
        img = np.asarray(Image.open(os.path.join(a.out, "scene.png")).convert("RGB"))
        ie = model.encode_image(to_tensor(img[None]))
        logits = model.logit_scale.exp() * F.normalize(ie, dim=-1) @ F.normalize(te, dim=-1).T
    ref = {"image": "scene.png", "texts": texts, "ids": ids,
           "image_embedding": ie[0].tolist(), "text_embeddings": te.tolist(),
           "logit_scale_exp": model.logit_scale.exp().item(), "logits": logits[0].tolist()}
    with open(os.path.join(a.out, "reference.json"), "w") as f:
        json.dump(ref, f)
        f.write("\n")
    say("scene.png (a red circle and a blue square): logits " + ", ".join(
        f"'{t}' {v:.2f}" for t, v in zip(texts, logits[0].tolist())))
    size = os.path.getsize(os.path.join(a.out, "model.safetensors"))
    say(f"wrote {a.out}/model.safetensors ({size / 1e6:.1f} MB), open_clip_config.json, "
        f"the vocabulary, scene.png, scenes/")


# --- main --------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "tiny-clip"))
    ap.add_argument("--vocab", default=os.path.join(ROOT, "..", "shared", "clip",
                                                    "bpe_simple_vocab_16e6.txt.gz"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train", type=int, default=12000, help="training scenes")
    ap.add_argument("--steps", type=int, default=700)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--level", type=float, default=0.4,
                    help="clutter level of the scenes (gen_scenes: 0 flat, 1 the built-in model's)")
    ap.add_argument("--demo-level", type=float, default=0.4)
    ap.add_argument("--patch", type=int, default=12)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--text-width", type=int, default=64)
    ap.add_argument("--text-layers", type=int, default=3)
    ap.add_argument("--embed", type=int, default=64)
    ap.add_argument("--eval", type=int, default=400, help="held-out scenes of each kind")
    ap.add_argument("--negatives", type=int, default=1,
                    help="1: a hard-negative caption per scene (NegCLIP): a shape or colour "
                         "changed, or two objects' colours swapped")
    ap.add_argument("--dense", type=float, default=1.0,
                    help="weight of the patch tokens' loss: each patch of an object, through "
                         "ln_post and proj, against the 36 colour-shape phrases (0: off)")
    ap.add_argument("--eval-every", type=int, default=0, help="also evaluate every N steps")
    ap.add_argument("--init", choices=("openai", "mimetic"), default="openai",
                    help="the image tower's attention and position embedding: OpenAI's random "
                         "init, or mimetic (local attention at the start; see init_mimetic_)")
    ap.add_argument("--bf16", type=int, default=0,
                    help="matrix products in bfloat16 (autocast): faster on a CPU that multiplies\n"
                         "bfloat16 itself (AVX512_BF16, AMX), 12x slower on one that does not\n"
                         "(AVX2: emulated), and the numbers differ between the two; default float32")
    ap.add_argument("--log-every", type=int, default=50)
    a = ap.parse_args()
    if not os.path.exists(a.vocab):
        sys.exit(f"train_tiny_clip: {a.vocab}: no such file (CLIP's bpe_simple_vocab_16e6.txt.gz; "
                 "pass --vocab)")
    if a.width % 64 or a.text_width % 64 or SIZE % a.patch:
        sys.exit("train_tiny_clip: --width and --text-width must be multiples of 64 (heads of 64, "
                 f"as OpenAI's), --patch must divide {SIZE}")
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    log = open(os.path.join(a.out, "train_log.txt"), "w")

    def say(msg):
        print(msg, flush=True)
        log.write(msg + "\n")
        log.flush()
    say(" ".join(sys.argv))
    t0, c0 = time.time(), time.process_time()
    tok = Tokenizer(a.vocab)
    imgs, objs, owner = make_set("train", a.train, a.level, a.patch, say)
    pairs = [(c, sh) for c in CNAMES for sh in SHAPES]
    pair_ids = pad([tok.encode(phrase(c, sh)) for c, sh in pairs])
    caps = [captions(o) for o in objs]
    data = eval_scenes(a.eval, a.level, say)
    caps_flip = [captions(flip_objs(o)) for o in objs]

    model = CLIP(a)
    if a.init == "mimetic":
        init_mimetic_(model.visual, a.seed)
    n_params = sum(p.numel() for p in model.parameters())
    used = sorted({i for t in all_texts() for i in tok.encode(t)})
    say(f"model: {n_params} parameters ({model.token_embedding.weight.numel()} in the token "
        f"embedding, {len(used)} of its rows used by the captions); {a.steps} steps of {a.batch}")
    decay = [p for n, p in model.named_parameters()
             if p.ndim >= 2 and "embedding" not in n]
    other = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "embedding" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd},
                             {"params": other, "weight_decay": 0.0}], lr=a.lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, a.lr, total_steps=a.steps, pct_start=0.05,
                                                anneal_strategy="cos")
    g = np.random.default_rng(a.seed)
    run = 0.0
    for step in range(a.steps):
        idx = g.choice(a.train, a.batch, replace=False)
        flip = g.random(a.batch) < 0.5
        x = imgs[idx]
        x = np.where(flip[:, None, None, None], x[:, :, ::-1], x)
        sobjs = [flip_objs(objs[i]) if f else objs[i] for i, f in zip(idx, flip)]
        chosen = []
        for i, f in zip(idx, flip):
            cs = caps_flip[i] if f else caps[i]
            chosen.append(cs[int(g.integers(len(cs)))])
        if a.negatives:
            chosen += [hard_negative(t, spec, g) for t, spec in chosen]
        truth = torch.tensor([[true_of(spec, so) for _, spec in chosen] for so in sobjs])
        assert bool(truth[:, :a.batch].diagonal().all())
        ids = pad([tok.encode(t) for t, _ in chosen])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(a.bf16)):
            ie, pe = model.visual(to_tensor(x), patches=True)
            te = model.encode_text(ids)
            if a.dense:
                de = model.encode_text(pair_ids)
        ie, te = ie.float(), te.float()
        ie = ie / ie.norm(dim=-1, keepdim=True)
        te = te / te.norm(dim=-1, keepdim=True)
        logits = model.logit_scale.exp() * ie @ te.T
        loss = multi_positive_loss(logits, truth, a.batch)
        if a.dense:  # each patch of an object against the 36 "a {colour} {shape}" phrases
            own = np.where(flip[:, None, None], owner[idx][:, :, ::-1], owner[idx]).reshape(a.batch, -1)
            b, n = np.nonzero(own >= 0)
            target = torch.tensor([pairs.index((sobjs[i][own[i, j]].colour,
                                                sobjs[i][own[i, j]].shape))
                                   for i, j in zip(b, n)], dtype=torch.long)
            pv = F.normalize(pe.float()[torch.from_numpy(b), torch.from_numpy(n)], dim=-1)
            dl = F.cross_entropy(model.logit_scale.exp() * pv @ F.normalize(de.float(), dim=-1).T,
                                 target)
            loss = loss + a.dense * dl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))  # OpenAI clips it at 100
        run += loss.item()
        if (step + 1) % a.log_every == 0:
            say(f"step {step + 1}/{a.steps}: loss {run / a.log_every:.4f}, logit_scale "
                f"{model.logit_scale.exp().item():.1f} ({time.time() - t0:.0f} s)")
            run = 0.0
        if a.eval_every and (step + 1) % a.eval_every == 0 and step + 1 < a.steps:
            evaluate(model, tok, data, say, f" at step {step + 1}")
    t_train, c_train = time.time() - t0, time.process_time() - c0
    say(f"trained in {t_train:.0f} s wall, {c_train:.0f} s CPU (one thread, "
        f"{'bfloat16' if a.bf16 else 'float32'} products; {cpu_name()}, "
        f"PyTorch {torch.__version__})")
    res = evaluate(model, tok, data, say)
    res["train_seconds_wall"], res["train_seconds_cpu"] = round(t_train), round(c_train)
    write_outputs(a, model, tok, res, say)


if __name__ == "__main__":
    main()
