"""test_text_tower.py - CLIP's text tower (vit_text_load, vit_text_embed through text_dump)
against a PyTorch reference written here in the published architecture: OpenAI CLIP's
clip/model.py (CLIP.encode_text, ResidualAttentionBlock with nn.MultiheadAttention,
QuickGELU, build_attention_mask), in float64.

    /usr/bin/python3 test_text_tower.py RUN [--small] [--control MISTAKE] --dump text_dump --work DIR

RUN (one model each, random weights, saved by the test):
  hf      Hugging Face CLIPModel names (text_model.*, text_projection.weight [E, W]) as
          .safetensors, with config.json's text_config (hidden_act quick_gelu, 8 heads)
  openai  OpenAI names (token_embedding, transformer.resblocks.N.attn.in_proj_weight,
          text_projection [W, E]) with no config: QuickGELU and W / 64 heads by the
          loader's rule; as .safetensors and as a torch.save .pth (the same weights)
  openclip_gelu  OpenAI names with an open_clip_config.json without quick_gelu (open_clip's
          GELU) and text_cfg.heads, and OpenCLIP's LayerScale (ls_1, ls_2)
Shapes: the B/32 and B/16 text tower (the same for both): V 49408, ctx 77, W 512, 8
heads, 12 layers, F 2048, E 512; --small (the ASan build): W 128, 2 heads, 2 layers, F
512, the same vocabulary and context. Each model runs 20 token sequences of lengths 2 ..
77 ([SOT, ..., EOT], some with zeros after EOT, one with EOT twice, one of 77 tokens, a
template with four class names, one prompt twice, one sequence pooled inside another), on
1 and 2 threads (openai: the .safetensors on 2, the .pth on 1): every embedding within TOL of the float64 reference, relative to the
embedding's largest value (max|engine - ref| / max|ref|, per sequence); torch's own
float32 run is printed as the yardstick. The reference runs each sequence at its own
length (transformers' way; clip.tokenize's padding to 77 only adds positions after the
ones a causal model pools, and costs the test 3x).
bad_pth: the small tower's .pth cut in half, and an image tower's state dict alone:
          refused with a message naming the file (the whole .pth loads).
--control MISTAKE runs the reference with a plausible mistake; the test passes only when
the comparison then fails (the mistake is caught) and the run did not crash:
  gelu      exact GELU where the model uses QuickGELU
  last      pooling the last position (x[:, -1]) instead of the end-of-text token
  nocausal  no causal mask (every token sees every other)
"""
import argparse
import collections
import json
import pathlib
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from test_parity import write_safetensors  # noqa: E402

TOL = 1e-5
SHAPES = {
    "full": dict(V=49408, ctx=77, W=512, H=8, L=12, E=512),
    "small": dict(V=49408, ctx=77, W=128, H=2, L=2, E=96),
}

# --- the reference: OpenAI CLIP's text tower (clip/model.py), written out -------------


class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class LayerScale(nn.Module):
    """open_clip's LayerScale: x * gamma."""

    def __init__(self, W):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(W))

    def forward(self, x):
        return x * self.gamma


class ResidualAttentionBlock(nn.Module):
    """x = x + attn(ln_1(x), attn_mask); x = x + mlp(ln_2(x)) (open_clip: with ls_1, ls_2)."""

    def __init__(self, W, H, act, layer_scale):
        super().__init__()
        self.ln_1 = nn.LayerNorm(W, eps=1e-5)
        self.attn = nn.MultiheadAttention(W, H)
        self.ls_1 = LayerScale(W) if layer_scale else nn.Identity()
        self.ln_2 = nn.LayerNorm(W, eps=1e-5)
        self.mlp = nn.Sequential(collections.OrderedDict([
            ("c_fc", nn.Linear(W, 4 * W)), ("gelu", act), ("c_proj", nn.Linear(4 * W, W))]))
        self.ls_2 = LayerScale(W) if layer_scale else nn.Identity()

    def forward(self, x, mask):
        h = self.ln_1(x)
        x = x + self.ls_1(self.attn(h, h, h, need_weights=False, attn_mask=mask)[0])
        return x + self.ls_2(self.mlp(self.ln_2(x)))


class Transformer(nn.Module):
    def __init__(self, W, L, H, act, layer_scale):
        super().__init__()
        self.resblocks = nn.ModuleList(
            [ResidualAttentionBlock(W, H, act, layer_scale) for _ in range(L)])

    def forward(self, x, mask):
        for b in self.resblocks:
            x = b(x, mask)
        return x


class TextTower(nn.Module):
    """CLIP.encode_text: the token and position embedding, the blocks under the causal
    mask, ln_final, the end-of-text token (text.argmax(-1)) times text_projection."""

    def __init__(self, V, ctx, W, H, L, E, act, layer_scale=False):
        super().__init__()
        self.token_embedding = nn.Embedding(V, W)
        self.positional_embedding = nn.Parameter(torch.empty(ctx, W))
        self.transformer = Transformer(W, L, H, act, layer_scale)
        self.ln_final = nn.LayerNorm(W, eps=1e-5)
        self.text_projection = nn.Parameter(torch.empty(W, E))
        self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))
        self.ctx = ctx

    def mask(self, n, causal):
        # build_attention_mask: -inf above the diagonal (of n <= ctx positions)
        m = torch.empty(n, n, dtype=self.positional_embedding.dtype)
        return m.fill_(float("-inf")).triu_(1) if causal else m.zero_()

    def forward(self, text, causal=True, pool="eot"):
        """text [B, n], n <= ctx: clip.tokenize's [B, ctx] padded with zeros, or (as
        transformers' CLIPTextTransformer runs it) any length n, the mask and the
        position embedding cut to n."""
        n = text.shape[1]
        x = self.token_embedding(text) + self.positional_embedding[:n]
        x = self.transformer(x.permute(1, 0, 2), self.mask(n, causal)).permute(1, 0, 2)
        x = self.ln_final(x)
        at = text.argmax(dim=-1) if pool == "eot" else torch.full_like(text[:, 0], n - 1)
        return x[torch.arange(x.shape[0]), at] @ self.text_projection


def random_tower(s, act, layer_scale, seed):
    """OpenAI's initialisation (CLIP.initialize_parameters), LayerNorms and biases
    random too so that a misplaced one shows."""
    torch.manual_seed(seed)
    m = TextTower(s["V"], s["ctx"], s["W"], s["H"], s["L"], s["E"], act, layer_scale)
    W, L = s["W"], s["L"]
    with torch.no_grad():
        nn.init.normal_(m.token_embedding.weight, std=0.02)
        nn.init.normal_(m.positional_embedding, std=0.01)
        for b in m.transformer.resblocks:
            nn.init.normal_(b.attn.in_proj_weight, std=W ** -0.5)
            nn.init.normal_(b.attn.out_proj.weight, std=W ** -0.5 * (2 * L) ** -0.5)
            nn.init.normal_(b.mlp.c_fc.weight, std=(2 * W) ** -0.5)
            nn.init.normal_(b.mlp.c_proj.weight, std=W ** -0.5 * (2 * L) ** -0.5)
            for p in (b.attn.in_proj_bias, b.attn.out_proj.bias, b.mlp.c_fc.bias,
                      b.mlp.c_proj.bias, b.ln_1.bias, b.ln_2.bias):
                nn.init.normal_(p, std=0.02)
            for p in (b.ln_1.weight, b.ln_2.weight):
                nn.init.normal_(p, mean=1.0, std=0.1)
            if layer_scale:
                nn.init.uniform_(b.ls_1.gamma, 0.5, 1.5)
                nn.init.uniform_(b.ls_2.gamma, 0.5, 1.5)
        nn.init.normal_(m.ln_final.weight, mean=1.0, std=0.1)
        nn.init.normal_(m.ln_final.bias, std=0.02)
        nn.init.normal_(m.text_projection, std=W ** -0.5)
        m.logit_scale.fill_(4.0)
    return m.eval()


def openai_state(m):
    """The state dict in OpenAI's names (the module's own)."""
    return {k: v.detach().float().contiguous() for k, v in m.state_dict().items()}


def hf_state(m, s):
    """The same weights in Hugging Face CLIPModel's names (convert_clip_original_pytorch
    _to_hf.py's mapping): q, k, v split from in_proj, text_projection.weight = P^T."""
    W, sd = s["W"], openai_state(m)
    out = {"text_model.embeddings.token_embedding.weight": sd["token_embedding.weight"],
           "text_model.embeddings.position_embedding.weight": sd["positional_embedding"],
           "text_model.embeddings.position_ids": torch.arange(s["ctx"]).unsqueeze(0),
           "text_model.final_layer_norm.weight": sd["ln_final.weight"],
           "text_model.final_layer_norm.bias": sd["ln_final.bias"],
           "text_projection.weight": sd["text_projection"].t().contiguous(),
           "logit_scale": sd["logit_scale"]}
    for l in range(s["L"]):
        o, h = f"transformer.resblocks.{l}.", f"text_model.encoder.layers.{l}."
        for i, q in enumerate("qkv"):
            out[h + f"self_attn.{q}_proj.weight"] = sd[o + "attn.in_proj_weight"][i * W:(i + 1) * W].clone()
            out[h + f"self_attn.{q}_proj.bias"] = sd[o + "attn.in_proj_bias"][i * W:(i + 1) * W].clone()
        for a, b in (("attn.out_proj", "self_attn.out_proj"), ("ln_1", "layer_norm1"),
                     ("ln_2", "layer_norm2"), ("mlp.c_fc", "mlp.fc1"), ("mlp.c_proj", "mlp.fc2")):
            out[h + b + ".weight"] = sd[o + a + ".weight"]
            out[h + b + ".bias"] = sd[o + a + ".bias"]
    return out


def sequences(s, g):
    """Token sequences: (ids as the engine gets them, the same padded to ctx with zeros
    as clip.tokenize gives them)."""
    V, ctx = s["V"], s["ctx"]
    sot, eot = V - 2, V - 1
    seqs = []
    for n in (2, 3, 5, 8, 8, 12, 17, 23, 33, ctx):  # [SOT, words..., EOT]
        seqs.append([sot] + torch.randint(0, V - 2, (n - 2,), generator=g).tolist() + [eot])
    for n, pad in ((6, 4), (10, ctx - 10)):  # zeros after EOT, as clip.tokenize pads
        seqs.append([sot] + torch.randint(0, V - 2, (n - 2,), generator=g).tolist() + [eot] + [0] * pad)
    two = [sot] + torch.randint(0, V - 2, (9,), generator=g).tolist()  # EOT twice: the first
    seqs.append(two[:5] + [eot] + two[5:] + [eot])
    # a template and class names ("a photo of a {}."): the engine's prefix tree shares
    # the template's rows; one prompt twice; one sequence (no EOT: pooled at its largest
    # id) that the next one extends past its pooled token
    tpl = torch.randint(0, V - 2, (5,), generator=g).tolist()
    for n in (1, 2, 1, 3):
        seqs.append([sot] + tpl[:4] + torch.randint(0, V - 2, (n,), generator=g).tolist()
                    + tpl[4:] + [eot])
    seqs.append(list(seqs[-2]))
    seqs += [[40, 900, 7], [40, 900, 7, 3000, 12]]
    return seqs


# --- the run --------------------------------------------------------------------------


def run_dump(dump, model, ids_path, out, threads):
    r = subprocess.run([dump, "--model", str(model), "--ids", str(ids_path), "--out", str(out),
                        "--threads", str(threads)], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"text_dump failed ({r.returncode}): {r.stderr.strip()}")
    return json.loads(r.stdout)


def bad_pth(a, work):
    """PyTorch checkpoints the loader must refuse with a message naming the file: the
    small tower's .pth cut in half, and a state dict of an image tower only."""
    m = random_tower(SHAPES["small"], QuickGELU(), False, seed=5)
    torch.save(openai_state(m), work / "full.pth")
    data = (work / "full.pth").read_bytes()
    (work / "cut.pth").write_bytes(data[:len(data) // 2])
    torch.save({"visual.conv1.weight": torch.zeros(8, 3, 4, 4), "visual.proj": torch.zeros(8, 4),
                "visual.class_embedding": torch.zeros(8)}, work / "image.pth")
    (work / "ids.txt").write_text("49406 1 49407\n")
    bad = 0
    for name, keys in (("cut.pth", ["cut.pth"]),
                       ("image.pth", ["image.pth", "no text tower", "an image tower only"])):
        r = subprocess.run([a.dump, "--model", str(work / name), "--ids", str(work / "ids.txt"),
                            "--out", str(work / "o.f32")], capture_output=True, text=True)
        ok = r.returncode == 1 and all(k in r.stderr for k in keys)
        print(f"{'ok  ' if ok else 'FAIL'} - {name}: exit {r.returncode}: {r.stderr.strip()}")
        bad += not ok
    r = subprocess.run([a.dump, "--model", str(work / "full.pth"), "--ids", str(work / "ids.txt"),
                        "--out", str(work / "o.f32")], capture_output=True, text=True)
    print(f"{'ok  ' if r.returncode == 0 else 'FAIL'} - full.pth loads: {r.stderr.strip()}")
    return 1 if bad or r.returncode else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run", choices=["hf", "openai", "openclip_gelu", "bad_pth"])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--control", choices=["gelu", "last", "nocausal"])
    ap.add_argument("--dump", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    s = SHAPES["small" if a.small else "full"]
    work = pathlib.Path(a.work) / (a.run + ("_small" if a.small else "")
                                   + (f"_control_{a.control}" if a.control else ""))
    work.mkdir(parents=True, exist_ok=True)
    for f in work.iterdir():
        f.unlink()
    torch.set_num_threads(1)
    if a.run == "bad_pth":
        return bad_pth(a, work)
    gelu = a.run == "openclip_gelu"
    m = random_tower(s, nn.GELU() if gelu else QuickGELU(), layer_scale=gelu, seed=27)
    want = dict(V=s["V"], ctx=s["ctx"], W=s["W"], H=s["H"], L=s["L"], F=4 * s["W"], E=s["E"],
                act="gelu" if gelu else "quick_gelu", naming="hf" if a.run == "hf" else "openai")
    models = []
    if a.run == "hf":
        write_safetensors(work / "model.safetensors", hf_state(m, s), "F32")
        (work / "config.json").write_text(json.dumps({"text_config": {
            "hidden_act": "quick_gelu", "num_attention_heads": s["H"], "layer_norm_eps": 1e-5,
            "hidden_size": s["W"]}, "projection_dim": s["E"]}))
        models.append(work / "model.safetensors")
    else:
        sd = openai_state(m)
        if gelu:
            (work / "open_clip_config.json").write_text(json.dumps({"model_cfg": {
                "embed_dim": s["E"], "text_cfg": {"width": s["W"], "heads": s["H"],
                                                  "layers": s["L"], "ls_init_value": 1.0}}}))
        elif s["W"] // 64 != s["H"]:
            sys.exit("the openai run relies on W / 64 heads")
        write_safetensors(work / "model.safetensors", sd, "F32")
        torch.save(sd, work / "model.pth")
        models += [work / "model.safetensors", work / "model.pth"]
    g = torch.Generator().manual_seed(77)
    seqs = sequences(s, g)
    ids_path = work / "ids.txt"
    ids_path.write_text("".join(" ".join(map(str, q)) + "\n" for q in seqs))

    # the reference: float64 (the yardstick: the same in float32), the control's mistake
    kw = dict(causal=a.control != "nocausal", pool="last" if a.control == "last" else "eot")
    if a.control == "gelu":
        for b in m.transformer.resblocks:
            b.mlp.gelu = nn.GELU()
    def reference(dtype):  # each sequence at its own length (equal lengths together)
        out = np.zeros((len(seqs), s["E"]))
        with torch.no_grad():
            m.to(dtype)
            for n in sorted({len(q) for q in seqs}):
                rows = [i for i, q in enumerate(seqs) if len(q) == n]
                out[rows] = m(torch.tensor([seqs[i] for i in rows]), **kw).double().numpy()
        return out
    ref32, ref = reference(torch.float32), reference(torch.float64)

    worst = 0.0
    runs = [(models[0], 1), (models[0], 2)] if len(models) == 1 else [(models[0], 2), (models[1], 1)]
    for model, threads in runs:
        out = work / f"emb_{model.suffix[1:]}_{threads}.f32"
        cfg = run_dump(a.dump, model, ids_path, out, threads)
        for k, v in want.items():
            if cfg[k] != v:
                sys.exit(f"{model.name}: the loader read {k} = {cfg[k]}, expected {v} ({cfg})")
        if abs(cfg["logit_scale"] - np.exp(4.0)) > 1e-4 * np.exp(4.0):
            sys.exit(f"{model.name}: logit_scale {cfg['logit_scale']}, expected exp(4)")
        emb = np.fromfile(out, dtype=np.float32).reshape(len(seqs), s["E"]).astype(np.float64)
        scale = np.abs(ref).max(axis=1)
        rel = (np.abs(emb - ref).max(axis=1) / scale)
        yard = (np.abs(ref32 - ref).max(axis=1) / scale).max()
        print(f"{model.name}, {threads} thread(s), {cfg['act']} ({cfg['act_from']}): "
              f"max rel |engine - f64| {rel.max():.2e} (torch f32: {yard:.2e}; tol {TOL:.0e}); "
              f"per sequence: {' '.join(f'{r:.0e}' for r in rel)}")
        worst = max(worst, rel.max())
    if a.control:
        caught = worst > TOL
        print(f"control {a.control}: the mistake {'is caught' if caught else 'is NOT caught'} "
              f"(max rel {worst:.2e}, tol {TOL:.0e})")
        return 0 if caught else 1
    print("ok" if worst <= TOL else f"FAIL: max rel {worst:.2e} > {TOL:.0e}")
    return 0 if worst <= TOL else 1


if __name__ == "__main__":
    sys.exit(main())
