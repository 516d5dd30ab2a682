"""test_siglip_text.py - SigLIP's text tower and sigmoid scores (vit_text_load,
vit_text_embed, vit_text_scores through text_dump) against a float64 PyTorch reference
written here from Hugging Face's modeling_siglip.py (SiglipTextEmbeddings,
SiglipEncoderLayer, SiglipAttention, SiglipMLP, SiglipTextTransformer, SiglipModel.forward).

    /usr/bin/python3 test_siglip_text.py [--small] [--control MISTAKE] --dump text_dump --work DIR

The model: random weights in SiglipModel's text names (text_model.*; the file also holds
logit_scale and logit_bias as a SiglipModel .safetensors does, and no config.json: every
size from the shapes, heads, GELU-tanh and eps 1e-6 from SiglipTextConfig's defaults).
Shape: SigLIP B/16's text tower, V 32000, ctx 64, W 768, H 12, F 3072, with L = 3 of its
12 layers (time: a layer is the same computation each time, and 3 show the stream
carried from block to block); --small (the ASan build): W 96, 12 heads, F 384, L 2.
Sequences: 64 ids each as SigLIP's tokenizer makes them (pieces, "</s>" = 1, padded with
"</s>" to 64): short and long texts, one with no padding (cut), one the same text as
another with one more piece. The reference runs each at its 64 positions with no mask and
pools position 63.

Checks: every embedding within 1e-4 of the reference relative to its largest value
(max|engine - ref| / max|ref|); the scores of 5 image embeddings (random, some near a
text's) against the 8 texts: logits = exp(logit_scale) cos + logit_bias within 1e-4
relative to max|logit|, probabilities = sigmoid(logits) within 1e-5 (cosines chosen so
that they are away from 0 and 1), and their rows do not sum to 1; a sequence of 10 ids (unpadded) refused with a message.
--gemma (SigLIP 2, --tok tok_dump): the same tower, read with Gemma's tokenizer: the test
trains a Gemma-like BPE SentencePiece model (tests/text/test_gemma_tokenizer.py's train: "<pad>"
0, "<eos>" 1, byte fallback), V = its size (SigLIP 2's is 256 000: the computation does not
depend on V), and tokenizes 9 texts (capitals, punctuation, CJK, an emoji, one past 64 ids)
with the engine (tok_dump) and with big_vision's steps (test_gemma_tokenizer.Reference): the
ids must be equal, then the engine's go to text_dump and the reference's to the tower, which
pools position 63: "<pad>" (0) for a short text.
--control MISTAKE: the reference makes it; the test passes only when the comparison then
fails (and nothing crashed):
  eos       pools the "</s>" of the unpadded sequence (the text at its own length; with
            --gemma its "<eos>")
  pad_eos   (--gemma) SigLIP 2's texts padded with "<eos>" as SigLIP pads, not "<pad>"
  softmax   a softmax over the labels instead of each label's sigmoid
  nobias    logit_bias dropped
  causal    CLIP's causal mask
  gelu      exact GELU instead of tanh
"""
import argparse
import json
import math
import pathlib
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from test_parity import write_safetensors  # noqa: E402

TOL, PROB_TOL = 1e-4, 1e-5
SHAPES = {"full": dict(V=32000, ctx=64, W=768, H=12, F=3072, L=3),
          "small": dict(V=32000, ctx=64, W=96, H=12, F=384, L=2)}
EOS = 1

# --- the reference: transformers' SiglipTextTransformer, written out --------------------


class Layer(nn.Module):
    """SiglipEncoderLayer: x = x + attn(layer_norm1(x)); x = x + mlp(layer_norm2(x))."""

    def __init__(self, W, H, F_):
        super().__init__()
        self.H = H
        self.layer_norm1 = nn.LayerNorm(W, eps=1e-6)
        self.q_proj, self.k_proj = nn.Linear(W, W), nn.Linear(W, W)
        self.v_proj, self.out_proj = nn.Linear(W, W), nn.Linear(W, W)
        self.layer_norm2 = nn.LayerNorm(W, eps=1e-6)
        self.fc1, self.fc2 = nn.Linear(W, F_), nn.Linear(F_, W)

    def forward(self, x, causal, act):
        B, T, W = x.shape
        Dh = W // self.H
        h = self.layer_norm1(x)
        q, k, v = (p(h).view(B, T, self.H, Dh).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        s = q @ k.transpose(-1, -2) * Dh ** -0.5  # SiglipAttention: self.scale = head_dim**-0.5
        if causal:
            s = s + torch.full((T, T), float("-inf"), dtype=s.dtype).triu(1)
        a = s.softmax(-1) @ v
        x = x + self.out_proj(a.transpose(1, 2).reshape(B, T, W))
        return x + self.fc2(F.gelu(self.fc1(self.layer_norm2(x)), approximate=act))


class TextTower(nn.Module):
    def __init__(self, V, ctx, W, H, F, L):
        super().__init__()
        self.token_embedding = nn.Embedding(V, W)
        self.position_embedding = nn.Embedding(ctx, W)
        self.layers = nn.ModuleList(Layer(W, H, F) for _ in range(L))
        self.final_layer_norm = nn.LayerNorm(W, eps=1e-6)
        self.head = nn.Linear(W, W)

    def forward(self, ids, control=None):
        """ids [B, T] -> text_embeds [B, W] (SiglipTextTransformer's pooler_output)."""
        x = self.token_embedding(ids) + self.position_embedding(torch.arange(ids.shape[1]))
        for layer in self.layers:
            x = layer(x, control == "causal", "none" if control == "gelu" else "tanh")
        x = self.final_layer_norm(x)
        return self.head(x[:, -1, :])  # pooled_output = last_hidden_state[:, -1, :]


def scores(img, txt, logit_scale, logit_bias, control=None):
    """SiglipModel.forward: logits_per_image and sigmoid probabilities [n_img, n_txt]."""
    i = img / img.norm(dim=-1, keepdim=True)
    t = txt / txt.norm(dim=-1, keepdim=True)
    logits = (t @ i.t() * logit_scale.exp() + (0 if control == "nobias" else logit_bias)).t()
    probs = logits.softmax(-1) if control == "softmax" else torch.sigmoid(logits)
    return logits, probs


def hf_state(m):
    sd = {"text_model.embeddings.token_embedding.weight": m.token_embedding.weight,
          "text_model.embeddings.position_embedding.weight": m.position_embedding.weight,
          "text_model.final_layer_norm.weight": m.final_layer_norm.weight,
          "text_model.final_layer_norm.bias": m.final_layer_norm.bias,
          "text_model.head.weight": m.head.weight, "text_model.head.bias": m.head.bias}
    for l, layer in enumerate(m.layers):
        p = f"text_model.encoder.layers.{l}."
        for name in ("layer_norm1", "layer_norm2"):
            for k in ("weight", "bias"):
                sd[p + f"{name}.{k}"] = getattr(getattr(layer, name), k)
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            for k in ("weight", "bias"):
                sd[p + f"self_attn.{name}.{k}"] = getattr(getattr(layer, name), k)
        for name in ("fc1", "fc2"):
            for k in ("weight", "bias"):
                sd[p + f"mlp.{name}.{k}"] = getattr(getattr(layer, name), k)
    return {k: v.detach().float() for k, v in sd.items()}


def sequences(g, ctx, V):
    """Tokenizer-shaped: pieces (ids 3 .. V-1), "</s>", "</s>" padding to ctx."""
    out = []
    for n in (1, 2, 4, 7, 12, 30, 62):
        pieces = torch.randint(3, V, (n,), generator=g).tolist()
        out.append(pieces + [EOS] * (ctx - n))
    out.append(out[4][:12] + [int(torch.randint(3, V, (1,), generator=g))] + [EOS] * (ctx - 13))
    out.append(torch.randint(3, V, (ctx - 1,), generator=g).tolist() + [EOS])  # cut: no padding
    return out


GEMMA_TEXTS = ["a photo of a cat", "A Dog.", "two green triangles on a table", "ÉCOLE",
               "😀 coffee cup", "東京タワー at night", "a red umbrella in the rain",
               "a red umbrella in the rain!", "elephant " * 70]


def gemma_sequences(work, tok_dump, control):
    """(engine's ids, reference's ids, V) for GEMMA_TEXTS on a Gemma-like model trained here."""
    sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "text"))
    import test_gemma_tokenizer as gt  # exits 77 without python3-sentencepiece
    model = gt.train(work, "tokenizer")
    ref = gt.Reference(model, "pad_eos" if control == "pad_eos" else None)
    r = gt.st.run_dump(tok_dump, model, GEMMA_TEXTS, work, "texts")
    if r.returncode != 0:
        raise SystemExit(f"FAIL tok_dump: exit {r.returncode}: {r.stderr.strip()}")
    engine = [[int(i) for i in ln.split()[1:]] for ln in r.stdout.splitlines()]
    return engine, [ref(t)[0] for t in GEMMA_TEXTS], ref.sp.get_piece_size()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--control", choices=["eos", "softmax", "nobias", "causal", "gelu", "pad_eos"])
    ap.add_argument("--gemma", action="store_true", help="SigLIP 2: Gemma's tokenizer")
    ap.add_argument("--tok", help="tok_dump (with --gemma)")
    ap.add_argument("--dump", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    s = dict(SHAPES["small" if a.small else "full"])
    work = pathlib.Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    if a.gemma:
        seqs, ref_seqs, s["V"] = gemma_sequences(work, a.tok, a.control)
        print(f"SigLIP 2: a Gemma-like tokenizer of {s['V']} pieces; position 63 holds "
              f"{[q[-1] for q in seqs]}")
    elif a.control == "pad_eos":
        ap.error("--control pad_eos needs --gemma")
    torch.manual_seed(35)
    m = TextTower(s["V"], s["ctx"], s["W"], s["H"], s["F"], s["L"])
    with torch.no_grad():  # LayerNorm weights away from 1, biases away from 0
        for name, p in m.named_parameters():
            if "norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.02 * torch.randn_like(p))
    logit_scale, logit_bias = torch.tensor([4.7]), torch.tensor([-12.5])  # trained SigLIP's
    sd = hf_state(m)
    sd["logit_scale"], sd["logit_bias"] = logit_scale, logit_bias
    tag = ("gemma_" if a.gemma else "") + ("small" if a.small else "full")
    model = work / f"siglip_text_{tag}.safetensors"
    write_safetensors(model, sd, "F32")

    g = torch.Generator().manual_seed(7)
    if not a.gemma:
        seqs = sequences(g, s["ctx"], s["V"])
        ref_seqs = seqs
    fails = []
    if ref_seqs != seqs:
        fails.append("ids: the engine's tokenizer differs from big_vision's steps on "
                     f"{sum(x != y for x, y in zip(seqs, ref_seqs))} of {len(seqs)} texts")
    (work / "ids.txt").write_text("".join(" ".join(map(str, q)) + "\n" for q in seqs))
    m64 = m.double()
    with torch.no_grad():
        if a.control == "eos":  # the text at its own length, pooled at its "</s>" / "<eos>"
            ref = torch.cat([m64(torch.tensor([q[:q.index(EOS) + 1]]), a.control)
                             for q in ref_seqs])
        else:
            ref = m64(torch.tensor(ref_seqs), a.control)
        # image embeddings at cosines 0.06 .. 0.16 from texts 0, 3, 5, 8, 8 (logits about
        # -6 .. +5: sigmoids away from 0 and 1), any length
        img = []
        for j, c in zip((0, 3, 5, 8, 8), (0.06, 0.09, 0.11, 0.13, 0.16)):
            t = ref[j] / ref[j].norm()
            u = torch.randn(s["W"], generator=g, dtype=torch.float64)
            u = u - (u @ t) * t
            img.append((c * t + math.sqrt(1 - c * c) * u / u.norm()) * (0.5 + j))
        img = torch.stack(img)
        ref_logits, ref_probs = scores(img, ref, logit_scale.double(), logit_bias.double(),
                                       a.control)
    img.float().numpy().tofile(work / "img.f32")
    out, sc = work / f"emb_{tag}.f32", work / f"scores_{tag}.f32"
    r = subprocess.run([a.dump, "--model", str(model), "--ids", str(work / "ids.txt"), "--out",
                        str(out), "--threads", "2", "--images", str(work / "img.f32"),
                        "--scores", str(sc)], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        print(f"FAIL text_dump: exit {r.returncode}: {r.stderr.strip()}")
        return 1
    info = json.loads(r.stdout)
    print("loaded:", info)
    want = dict(V=s["V"], ctx=s["ctx"], W=s["W"], H=s["H"], L=s["L"], F=s["F"], E=s["W"],
                act="gelu_tanh", pool="last", sigmoid=1)
    for k, v in want.items():
        if info[k] != v:
            fails.append(f"config {k}: {info[k]}, expected {v}")
    if abs(info["eps"] - 1e-6) > 1e-12 or abs(info["logit_scale"] - math.exp(4.7)) > 1e-3 or \
            abs(info["logit_bias"] + 12.5) > 1e-6:
        fails.append(f"eps / logit_scale / logit_bias: {info['eps']} {info['logit_scale']} "
                     f"{info['logit_bias']}")
    emb = np.fromfile(out, dtype=np.float32).reshape(len(seqs), -1)
    worst = 0.0
    for i in range(len(seqs)):
        e = float(np.abs(emb[i] - ref[i].numpy()).max() / np.abs(ref[i].numpy()).max())
        worst = max(worst, e)
    print(f"embeddings: max rel error {worst:.3g} (tolerance {TOL:g}) over {len(seqs)} sequences")
    if not worst <= TOL:
        fails.append(f"embeddings: {worst:.3g} > {TOL:g}")
    n_img = img.shape[0]
    got = np.fromfile(sc, dtype=np.float32).reshape(2, n_img, len(seqs))
    el = float(np.abs(got[0] - ref_logits.numpy()).max() / np.abs(ref_logits.numpy()).max())
    ep = float(np.abs(got[1] - ref_probs.numpy()).max())
    print(f"scores: logits max rel error {el:.3g}, probabilities max abs error {ep:.3g}; "
          f"engine's rows sum to {np.round(got[1].sum(1), 3).tolist()}; "
          f"probabilities {got[1].min():.3g} .. {got[1].max():.3g}")
    if not el <= TOL:
        fails.append(f"logits: {el:.3g} > {TOL:g}")
    if not ep <= PROB_TOL:
        fails.append(f"probabilities: {ep:.3g} > {PROB_TOL:g}")
    if not a.control and np.allclose(got[1].sum(1), 1.0, atol=1e-3):
        fails.append("the probabilities of each image sum to 1: a softmax?")
    # an unpadded sequence is refused
    (work / "short.txt").write_text(" ".join(["5"] * 9 + ["1"]) + "\n")
    r = subprocess.run([a.dump, "--model", str(model), "--ids", str(work / "short.txt"), "--out",
                        str(work / "short.f32")], capture_output=True, text=True, timeout=600)
    if r.returncode != 1 or "exactly 64" not in r.stderr:
        fails.append(f"an unpadded sequence: exit {r.returncode}: {r.stderr.strip()[:200]}")
    if a.control:
        caught = any(f.startswith(("embeddings", "logits", "probabilities")) for f in fails)
        print(("control ok: the mistake '%s' was caught: %s" % (a.control, "; ".join(fails)))
              if caught else f"CONTROL FAILED: the mistake '{a.control}' was not caught")
        return 0 if caught else 1
    print("FAILED: " + "; ".join(fails) if fails else "all ok")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
