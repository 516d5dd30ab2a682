"""test_backward.py - the engine's backward pass (vit_backward) against torch.autograd
on the float64 reference.

    /usr/bin/python3 test_backward.py family NAME --dump vit_dump --work DIR
    /usr/bin/python3 test_backward.py random      --dump vit_dump --work DIR
    /usr/bin/python3 test_backward.py deit        --dump vit_dump --work DIR --shared SHARED
    /usr/bin/python3 test_backward.py scores      --dump vit_dump --work DIR
    /usr/bin/python3 test_backward.py scores_deit --dump vit_dump --work DIR --shared SHARED
    /usr/bin/python3 test_backward.py selftest    (the reference side alone, no engine)

vit_dump --class C writes, for the logit y_c (C = -1: the top-1; for a distilled
model the averaged logit (head(x0) + head_dist(x1)) / 2, the prediction):
  grad_att    [L, H, T, T]  dy_c/dA_l, A_l layer l's softmax probabilities
  grad_tokens [L, T, D]     dy_c/dz_l, z_l block l's output (last block: only the rows
                            the head reads are non-zero)
  grad_input  [3, Sh, Sw]   dy_c/d input (the normalised pixels, input.npy)
  lrp_input   [3, Sh, Sw]   AttnLRP's modified gradient (Achtibat et al., ICML 2024,
                            rachtibat/LRP-eXplains-Transformers) in its CP-LRP form:
                            LayerNorm (x - mean(x)) / std(x).detach() * w + b (the
                            mean not detached), GELU by the identity rule
                            x * (gelu(x) / x).detach(), attention A.detach() @ V.
The reference is reference.py / reference_hf.py run by torch.autograd in float64
on the same stored weights and the same float32 input; the tensors autograd needs
come from the references' `tap` hook, AttnLRP's rules are their `ops` and `tap`.

family:   every family of test_families.py's FAMILIES with a head (random weights in
          the family's names), for the top-1 class and another one; the headless
          ones (DINO, DINOv2) must make vit_dump --class fail with a message (exit
          1). Plus a register model with a head (families' DINOv2 with 4 registers
          and LayerScale given a classifier: the registers' backward path).
random:   test_parity.py's random models (heads from config/flag, F16, BF16 storage).
deit:     the real DeiT-Tiny on every photo in SHARED/images, the top-1 class and
          the fifth of the top-5. Exit 77 without SHARED.
Each model also runs with --att recompute (attention recomputed from queries and
keys, no grad_att kept): grad_tokens, grad_input, lrp_input must be the same bit for
bit, and class out of range must be refused.

Errors are relative: max |engine - f64| / max |f64| per tensor, per layer for
grad_att and grad_tokens (a layer's gradients can be much smaller than another's).
PyTorch's own float32 autograd on the same input is printed beside as the yardstick
of what float32 reaches.
Measured (engine / torch f32, relative, max over models and classes):
  random models and families: grad_att <= 2.1e-6 / 2.8e-6, grad_tokens <= 2.5e-6 /
    3.2e-6, grad_input <= 3.0e-6 / 3.2e-6, lrp_input <= 2.1e-6 / 2.6e-6;
  DeiT-Tiny (12 layers, 4 photos x 2 classes): grad_att <= 1.0e-4 / 4.0e-4 (at layer 0,
    whose gradient came back through the softmaxes of all 12 blocks' peaked attention),
    grad_tokens <= 4.1e-5 / 2.0e-4, grad_input <= 1.1e-4 / 1.7e-4, lrp_input <= 2.7e-5
    / 5.0e-5 (no softmax on its path).
Tolerances TOL: 1e-5 for the random models (3x the larger of the two), 5e-4 for
DeiT-Tiny (above PyTorch's own 4.0e-4, 4.5x the engine's), or F32_SPREAD = 6 times
PyTorch's own float32 error on the same tensor where that is larger: where float32
itself cannot reach a fixed tolerance, the engine, one more float32 evaluation, is held
to how far PyTorch's float32 falls from itself. The gradient amplifies the forward
pass's rounding, not the backward's: on test_pth's notebook_heads_dh20 (the float64
module with float32 rounding at one kind of point, dy_c/d input) rounding the scores
q k^T alone moves it by 2.8e-6, the LayerNorms' outputs 1.4e-6, the patch embedding's
1.5e-6, while rounding any gradient of the backward pass moves it by at most 1.2e-7.
Which element of the gradient gets the largest error then depends on the order of each
sum: over 90 cases (3 random weights x 15 inputs x 2 classes), PyTorch float32's own
error with OpenBLAS's SSE3 kernels (OPENBLAS_CORETYPE=Prescott) against its own with
the AVX2 ones (Haswell) differs by a median 1.3 to 1.7x and up to 5.9x; the engine's
error over PyTorch's under the same kernels, a median 0.7 to 1.2x, up to 4.8x (180
cases). A mistake must move some
tensor by more than WRONG = 20 times that (smallest distances measured: the LayerNorm
sign 0.15 random / 0.19 DeiT, the softmax mistakes >= 0.69, AttnLRP's plain gradient
>= 0.60, its LayerNorm mean detached 0.056 / 0.018 against 2e-4 / 1e-2 required).
Planted mistakes the engine must be far from (computed with the reference, as
test_families.py's `mistake`):
  - LayerNorm backward with the sign of its mean-subtraction term flipped (every
    LayerNorm, a custom autograd.Function whose backward is otherwise LayerNorm's:
    the selftest checks the unflipped Function against autograd);
  - the softmax Jacobian transposed: per row the Jacobian diag(a) - a a^T is
    symmetric, so the transposition a hand-written [T, T] backward can make is the
    axis: dS = A (.) (dA - colsum(dA (.) A)) instead of rowsum; and dS^T (the
    gradients of queries and keys swapped);
  - AttnLRP: the plain gradient, and each of its three rules left out or overdone
    (softmax not detached, std not detached, GELU plain, LayerNorm's mean detached).
"""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference  # noqa: E402
import reference_hf  # noqa: E402
from test_parity import MODELS, Report, random_weights, run_dump, write_safetensors  # noqa: E402
from test_families import FAMILIES, dump_args, input_size, spec, write_family  # noqa: E402

TOL = {"random": 1e-5, "deit": 5e-4}  # relative to max |f64| (per layer for [L, ...] tensors)
WRONG = 20   # a mistake must move some tensor by more than WRONG x TOL
F32_SPREAD = 6  # or within this times PyTorch float32's own error, where that is larger
GRADS = ("grad_att", "grad_tokens", "grad_input", "lrp_input")
PER_LAYER = ("grad_att", "grad_tokens")

torch.set_num_threads(1)  # the machine is shared


# --- the reference as autograd sees it ------------------------------------------------


class Ref:
    """One model's reference: forward(x, dtype, tap, ops) -> (logits, att) and
    head(z, dtype, ops) -> logits, in timm's names (reference.py) or transformers'
    (reference_hf.py); Np prefix tokens."""

    def __init__(self, w, n_heads, hf=False, ln_eps=None):
        self.w, self.H, self.hf = w, n_heads, hf
        self.eps = ln_eps if ln_eps is not None else (1e-12 if hf else 1e-6)
        self._w = {}
        if hf:
            p = reference_hf.hf_prefix(w)
            self.Np = 1 + (p + "embeddings.distillation_token" in w)
            self.C = next((w[k].shape[0] for k in ("classifier.weight", "cls_classifier.weight")
                           if k in w), 0)
        else:
            self.Np = sum(w[k].shape[1] for k in ("cls_token", "dist_token", "reg_token") if k in w)
            self.C = w["head.weight"].shape[0] if "head.weight" in w else 0

    def weights(self, dtype):
        if dtype not in self._w:
            self._w[dtype] = {k: v.to(dtype) for k, v in self.w.items()}
        return self._w[dtype]

    def forward(self, x, dtype=torch.float64, tap=reference.no_tap, ops=None):
        if self.hf:
            return reference_hf.hf_forward(self.weights(dtype), x, self.H, self.eps, dtype,
                                           tap=tap, ops=ops)
        return reference.vit_forward(self.weights(dtype), x, self.H, dtype, self.eps, tap=tap,
                                     ops=ops)

    def head(self, z, dtype=torch.float64, ops=None):
        ln = (ops or {}).get("layer_norm", F.layer_norm)
        if self.hf:
            return reference_hf.hf_head_logits(self.weights(dtype), z, self.eps, ln)
        return reference.head_logits(self.weights(dtype), z, self.eps, ln)


# --- AttnLRP's rules and planted mistakes, as forward ops -----------------------------


def lrp_layer_norm(detach_std=True, detach_mean=False):
    """LayerNorm whose gradient is AttnLRP's (Achtibat et al. 2024, Prop. 3.3 /
    LRP-eXplains-Transformers' identity rule on the normalisation): the standard
    deviation held constant, the mean not. The flags make the wrong variants."""
    def layer_norm(t, shape, weight, bias, eps):
        mean = t.mean(-1, keepdim=True)
        std = (((t - mean) ** 2).mean(-1, keepdim=True) + eps).sqrt()
        if detach_std:
            std = std.detach()
        if detach_mean:
            mean = mean.detach()
        return (t - mean) / std * weight + bias
    return layer_norm


def lrp_gelu(t, approximate="none"):
    """The identity rule for an elementwise nonlinearity (AttnLRP §3.3): the relevance
    passes in the ratio f(x)/x, i.e. out = x * (gelu(x)/x).detach(); gelu(x)/x -> 1/2
    at x = 0."""
    f = F.gelu(t, approximate=approximate)
    ratio = torch.where(t == 0, torch.full_like(t, 0.5), f / torch.where(t == 0, 1, t))
    return t * ratio.detach()


def lrp_silu(t):
    """The identity rule for SiLU (a gated MLP's gate, DINOv3 S+): x * (silu(x)/x).detach(),
    silu(x)/x = sigmoid(x)."""
    return t * torch.sigmoid(t).detach()


def lrp_mul(a, b):
    """AttnLRP's uniform rule for a product of two activations (§3.3, the gated MLP's
    act(gate) * value): half the relevance to each factor, i.e. the gradient halved:
    (a * b.detach() + a.detach() * b) / 2, whose value is a * b."""
    return (a * b.detach() + a.detach() * b) / 2


def lrp_rules(std=True, gelu=True, softmax=True, mean=False):
    """(ops, tap) of the AttnLRP pass; each flag False leaves that rule out (a wrong
    variant); mean=True also detaches LayerNorm's mean (wrong). gelu: the MLP's
    nonlinearities, GELU, or a gated MLP's SiLU and product (references that have them:
    test_dinov3.py's)."""
    ops = {}
    if std or mean:
        ops["layer_norm"] = lrp_layer_norm(std, mean)
    if gelu:
        ops["gelu"], ops["silu"], ops["mul"] = lrp_gelu, lrp_silu, lrp_mul

    def tap(name, l, t):  # CP-LRP: the probabilities a constant, nothing into q and k
        return t.detach() if softmax and name == "att" else t
    return ops, tap


class LayerNormFn(torch.autograd.Function):
    """LayerNorm over the last dim with a hand-written backward
        dx = rstd * (g - sign * mean(g) - xhat * mean(g (.) xhat)),  g = dy (.) w;
    sign = 1 is LayerNorm's gradient (selftest: equals autograd's), sign = -1 the
    planted mistake (the mean-subtraction term's sign flipped). Weight and bias get
    no gradient (the test needs none)."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps, sign):
        mean = x.mean(-1, keepdim=True)
        rstd = 1 / (((x - mean) ** 2).mean(-1, keepdim=True) + eps).sqrt()
        xhat = (x - mean) * rstd
        ctx.save_for_backward(xhat, rstd, weight)
        ctx.sign = sign
        return xhat * weight + bias

    @staticmethod
    def backward(ctx, dy):
        xhat, rstd, weight = ctx.saved_tensors
        g = dy * weight
        dx = rstd * (g - ctx.sign * g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
        return dx, None, None, None, None


def layer_norm_fn(sign):
    return lambda t, shape, weight, bias, eps: LayerNormFn.apply(t, weight, bias, eps, sign)


class SoftmaxFn(torch.autograd.Function):
    """softmax over the last dim with a hand-written backward: "right" dS = A (.) (dA -
    rowsum(dA (.) A)) (selftest: equals autograd's); "axis" the sum over the query
    axis instead (the Jacobian applied along columns); "transposed" dS^T."""

    @staticmethod
    def forward(ctx, s, kind):
        a = s.softmax(dim=-1)
        ctx.save_for_backward(a)
        ctx.kind = kind
        return a

    @staticmethod
    def backward(ctx, da):
        (a,) = ctx.saved_tensors
        dim = -2 if ctx.kind == "axis" else -1
        ds = a * (da - (da * a).sum(dim, keepdim=True))
        return (ds.transpose(-2, -1) if ctx.kind == "transposed" else ds), None


def softmax_fn(kind):
    return lambda s: SoftmaxFn.apply(s, kind)


MISTAKES = {  # name -> ops of the exact pass
    "LayerNorm backward, mean term's sign flipped": {"layer_norm": layer_norm_fn(-1)},
    "softmax Jacobian along the query axis": {"softmax": softmax_fn("axis")},
    "softmax backward transposed (dS^T)": {"softmax": softmax_fn("transposed")},
}
LRP_MISTAKES = {  # name -> lrp_rules(...) arguments
    "softmax not detached (full gradient into q, k)": dict(softmax=False),
    "LayerNorm's std not detached": dict(std=False),
    "GELU's plain gradient": dict(gelu=False),
    "LayerNorm's mean detached too": dict(mean=True),
}


# --- gradients by autograd -------------------------------------------------------------


def reference_grads(ref, x32, c, dtype=torch.float64, ops=None, extras=True, score=None):
    """Everything the engine's backward pass and maps are checked against, by
    autograd on ref's forward pass of x32 [3, Sh, Sw] (float32, cast to dtype):
      logits [C], att [L, H, T, T], and for the logit y_c:
      grad_att [L, H, T, T], grad_tokens [L, T, D], grad_input [3, Sh, Sw];
      cam_act, cam_grad [N, D]: the last block's norm1 output at the patch tokens
        and dy_c/d it (Grad-CAM's target layer);
    with extras also:
      legrad [L, H, T, T]: ds_l/dA_l, s_l = head(norm(z_l))_c (LeGrad, per layer);
      lrp_input [3, Sh, Sw]: the gradient of y_c through AttnLRP's rules.
    ops: replacement ops for the exact pass (the planted mistakes). score(logits, z) a
    scalar of the logits and the last block's output z [1, T, D] instead of y_c (then
    extras must be False). numpy float64."""
    x = x32.to(dtype).detach().requires_grad_()
    kept = {}

    def tap(name, l, t):
        if t.requires_grad:
            t.retain_grad()
        kept[name, l] = t
        return t

    logits, att = ref.forward(x, dtype, tap, ops)
    L = att.shape[0]
    out = {"logits": logits.detach() if logits is not None else torch.zeros(0), "att": att.detach()}
    (logits[c] if score is None else score(logits, kept["tokens", L - 1])).backward(
        retain_graph=extras)
    # copies: torch 1.13's autograd.grad below also adds into retained .grad
    out["grad_att"] = torch.stack([kept["att", l].grad[0] for l in range(L)]).clone()
    out["grad_tokens"] = torch.stack([kept["tokens", l].grad[0] for l in range(L)]).clone()
    out["grad_input"] = x.grad.clone()
    out["cam_act"] = kept["norm1", L - 1][0, ref.Np:].detach()
    out["cam_grad"] = kept["norm1", L - 1].grad[0, ref.Np:].clone()
    if extras:  # LeGrad: each layer's own score s_l, differentiated at A_l only
        out["legrad"] = torch.stack([
            torch.autograd.grad(ref.head(kept["tokens", l], dtype)[c], kept["att", l],
                                retain_graph=True)[0][0] for l in range(L)])
        out["lrp_input"] = lrp_grad(ref, x32, c, dtype)
    return {k: v.double().numpy() for k, v in out.items()}


def lrp_grad(ref, x32, c, dtype=torch.float64, **rules):
    """dy_c/d input through AttnLRP's rules (lrp_rules(**rules)), torch tensor."""
    ops, tap = lrp_rules(**rules)
    x = x32.to(dtype).detach().requires_grad_()
    logits, _ = ref.forward(x, dtype, tap, ops)
    logits[c].backward()
    return x.grad


# --- comparing -------------------------------------------------------------------------


def rel_err(e, r, per_layer):
    """max |e - r| / max |r|, per leading index when per_layer: [L] or [1]."""
    e, r = np.asarray(e, np.float64), np.asarray(r, np.float64)
    if not per_layer:
        e, r = e[None], r[None]
    d = np.abs(e - r).reshape(len(r), -1).max(1)
    scale = np.abs(r).reshape(len(r), -1).max(1)
    return d / np.maximum(scale, 1e-300)


def compare_grads(rep, label, engine, g64, g32, tol):
    """Each gradient tensor: engine vs f64 (and torch f32 vs f64 as the yardstick)."""
    worst = {}
    for k in GRADS:
        if k not in engine:
            rep.check(False, f"{label}: vit_dump wrote no {k}.npy")
            continue
        if not rep.check(engine[k].shape == g64[k].shape,
                         f"{label}: {k} shape {engine[k].shape}, expected {g64[k].shape}"):
            continue
        pl = k in PER_LAYER
        err, yard = rel_err(engine[k], g64[k], pl), rel_err(g32[k], g64[k], pl)
        worst[k] = err.max()
        tk = np.maximum(tol, F32_SPREAD * yard)  # per layer for [L, ...] tensors
        layers = f" per layer {' '.join(f'{v:.1e}' for v in err)}" if pl and len(err) > 1 else ""
        print(f"  {k:11s} rel err {err.max():.2e} (torch f32 {yard.max():.2e}, tol "
              f"{tk.max():.1e}; max|f64| {np.abs(g64[k]).max():.2e}){layers}")
        rep.check(np.all(err <= tk), f"{label}: {k} differs from autograd by {err.max():.2e} "
                  f"(relative; tol {tk.max():.1e})")
    if "grad_tokens" in engine and engine["grad_tokens"].shape == g64["grad_tokens"].shape:
        # the last block: the head reads the CLS (and distillation) rows only
        last, Np_read = engine["grad_tokens"][-1], np.abs(g64["grad_tokens"][-1]).max(1) > 0
        rep.check(not np.any(last[~Np_read]), f"{label}: grad_tokens of the last block non-zero "
                  f"at rows the head does not read")
    return worst


def must_differ(rep, label, what, diffs, tol):
    """diffs {tensor: relative distance engine - mistake}: the engine must be far
    from the mistake in at least one tensor (its comparison would fail)."""
    far = max(diffs.values())
    print(f"  mistake '{what}': engine differs from it by "
          + ", ".join(f"{k} {v:.1e}" for k, v in diffs.items()) + f" (must exceed {WRONG * tol:.0e})")
    rep.check(far > WRONG * tol, f"{label}: the engine is as close to '{what}' as to autograd")
    return far


def check_mistakes(rep, label, ref, x32, c, engine, g64, tol):
    for what, ops in MISTAKES.items():
        gm = reference_grads(ref, x32, c, ops=ops, extras=False)
        must_differ(rep, label, what, {k: rel_err(engine[k], gm[k], k in PER_LAYER).max()
                                       for k in ("grad_att", "grad_tokens", "grad_input")}, tol)
    lrp = engine["lrp_input"]
    must_differ(rep, label, "AttnLRP: the plain gradient",
                {"lrp_input": rel_err(lrp, g64["grad_input"], False).max()}, tol)
    for what, rules in LRP_MISTAKES.items():
        gm = lrp_grad(ref, x32, c, **rules).numpy()
        must_differ(rep, label, "AttnLRP: " + what, {"lrp_input": rel_err(lrp, gm, False).max()}, tol)


# --- running the engine ------------------------------------------------------------------


def dump_rc(dump, args):
    """Run vit_dump expecting it may fail: (exit code, stderr)."""
    r = subprocess.run([dump] + [str(a) for a in args], capture_output=True, text=True)
    return r.returncode, r.stderr.strip()


def check_refused(rep, label, dump, args, why):
    """vit_dump must exit 1 with a message (not crash, not write maps)."""
    rc, msg = dump_rc(dump, args)
    print(f"  {why}: exit {rc}, '{msg}'")
    rep.check(rc == 1 and msg.startswith("vit_dump: ") and len(msg) > 20,
              f"{label}: {why}: vit_dump exited {rc} with '{msg}', expected 1 and a message")


def backward_case(rep, label, ref, dump, args, out, classes, tol, mistakes=True, recompute=True):
    """Engine vs autograd for each class of `classes` (-1: top-1) on the model and
    input of vit_dump `args` (without --out). Returns [(class, engine, g64)]."""
    x32 = None
    done = []
    for i, cls in enumerate(classes):
        o = Path(out) / f"class{cls}"
        engine, cfg = run_dump(dump, args + ["--out", o, "--class", cls])
        if x32 is None:
            x32 = torch.from_numpy(engine["input"])
        c = cfg["target"]
        logits = ref.forward(x32)[0]
        top1 = int(torch.argmax(logits))
        print(f" [{label}] class {cls}: target {c}" + (f" (reference top-1 {top1})" if cls == -1 else ""))
        rep.check(c == (top1 if cls == -1 else cls), f"{label}: --class {cls} gave target {c}")
        g64 = reference_grads(ref, x32, c)
        g32 = reference_grads(ref, x32, c, torch.float32)
        compare_grads(rep, f"{label} class {c}", engine, g64, g32, tol)
        if mistakes and i == 0:
            check_mistakes(rep, f"{label} class {c}", ref, x32, c, engine, g64, tol)
        if recompute and i == 0:
            er, _ = run_dump(dump, args + ["--out", Path(out) / f"class{cls}_recompute",
                                           "--att", "recompute", "--class", cls])
            rep.check("grad_att" not in er and "att" not in er,
                      f"{label}: --att recompute wrote att/grad_att")
            same = [k for k in ("grad_tokens", "grad_input", "lrp_input")
                    if k in er and np.array_equal(er[k], engine[k])]
            print(f"  --att recompute: bit-identical {', '.join(same) or 'none'}")
            for k in ("grad_tokens", "grad_input", "lrp_input"):
                if k not in same:
                    d = rel_err(er[k], engine[k], k in PER_LAYER).max() if k in er else float("nan")
                    rep.check(False, f"{label}: {k} with the attention recomputed differs from the "
                              f"kept run (relative {d:.1e})")
        done.append((c, engine, g64))
    C = ref.C
    check_refused(rep, label, dump, args + ["--out", Path(out) / "bad", "--class", C],
                  f"--class {C} (out of range)")
    return done


# --- (a) families --------------------------------------------------------------------------

EXTRA = {  # families with a head that FAMILIES has only as backbones: (base, changes)
    "reg4_head_timm": ("dinov2_reg4_timm_224", dict(C=10)),
    # transformers' [CLS ; mean of the patches] head (Dinov2ForImageClassification) in timm's
    # names, through a layout with "pooling": "cls_mean": the registers out of the mean
    "cls_mean_reg4_timm": ("dinov2_reg4_timm_224", dict(C=6, cls_mean=True)),
}


def family_spec(name):
    if name not in EXTRA:
        return spec(name)
    base, changes = EXTRA[name]
    f = spec(base)
    f.update(changes, name=name)
    return f


def family_model(name, work):
    """(spec, Ref, vit_dump args without --out, work dir, input) of a family, written
    as test_families.py writes it (same seed, same input)."""
    f = family_spec(name)
    d = Path(work) / name
    write_family(f, d, seed=sum(map(ord, name)))
    x = torch.randn(3, *input_size(f), generator=torch.Generator().manual_seed(7))
    args = dump_args(f, d, x, d / "unused")
    i = args.index("--out")
    args = args[:i] + args[i + 2:]
    # reference on the stored values (F32 here: the same)
    ref = Ref(reference.load_safetensors(d / "model.safetensors"), f["H"], bool(f["hf"]), f["eps"])
    return f, ref, args, d, x


def test_family(name, args, rep):
    f, ref, dargs, d, x = family_model(name, args.work)
    print(f"\n[{name}] {f['hf'] or 'timm'}, D={f['D']} H={f['H']} L={f['L']} C={f['C']}, "
          f"Np={ref.Np} (dist={f['dist']}, registers={f['R']}), LayerScale={f['ls']}")
    if not f["C"]:
        check_refused(rep, name, args.dump, dargs + ["--out", d / "bk", "--class", 0],
                      "a backbone without head, --class 0")
        check_refused(rep, name, args.dump, dargs + ["--out", d / "bk", "--class", -1],
                      "a backbone without head, --class -1")
        return
    second = reference.top_k(ref.forward(x)[0], 2)[1]
    backward_case(rep, name, ref, args.dump, dargs, d / "bk", [-1, second], TOL["random"])


# --- (b) test_parity's random models --------------------------------------------------------


def random_model(i, m, work):
    d = Path(work) / m["name"]
    d.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(1000 + i)
    write_safetensors(d / "model.safetensors", random_weights(m, g), m["dtype"])
    x = torch.randn(3, m["S"], m["S"], generator=g)
    x.numpy().astype(np.float32).tofile(d / "input.f32")
    args = ["--model", d / "model.safetensors", "--input", d / "input.f32"]
    if m["heads"] == "config":
        (d / "config.json").write_text(json.dumps({"num_heads": m["H"]}))
    elif m["heads"] == "config-path":
        (d / "heads.json").write_text(json.dumps({"num_heads": m["H"]}))
        args += ["--config", d / "heads.json"]
    elif m["heads"] == "flag":
        args += ["--heads", m["H"]]
    if m["heads"] != "config":
        (d / "config.json").unlink(missing_ok=True)
    # the reference reads the values the file holds (F16/BF16 upcast exactly)
    return Ref(reference.load_safetensors(d / "model.safetensors"), m["H"]), args, d, x


def test_random(args, rep):
    for i, m in enumerate(MODELS):
        label = m["name"]
        ref, dargs, d, x = random_model(i, m, args.work)
        print(f"\n[{label}] P={m['P']} S={m['S']} D={m['D']} H={m['H']} L={m['L']} C={m['C']} {m['dtype']}")
        if not m["C"]:
            check_refused(rep, label, args.dump, dargs + ["--out", d / "bk", "--class", 0],
                          "a backbone without head, --class 0")
            continue
        second = reference.top_k(ref.forward(x)[0], 2)[1]
        backward_case(rep, label, ref, args.dump, dargs, d / "bk", [-1, second], TOL["random"])


# --- (c) DeiT-Tiny on the photos ---------------------------------------------------------------


def deit_setup(shared):
    """(model path, photos, class names) or None when shared/ lacks them."""
    shared = Path(shared)
    model = shared / "models/deit-tiny/deit_tiny_patch16_224.safetensors"
    photos = sorted(p for p in (shared / "images").glob("*")
                    if p.suffix.lower() in (".png", ".jpg", ".jpeg"))
    if not shared.name or not model.exists() or not photos:
        return None
    synsets = (model.parent / "imagenet_synset_words.txt").read_text().splitlines()
    return model, photos, [ln.split(" ", 1)[1].split(",")[0].strip() for ln in synsets]


def test_deit(args, rep):
    setup = deit_setup(args.shared)
    if setup is None:
        print(f"skip: no DeiT-Tiny weights or photos under '{args.shared}'")
        return 77
    model, photos, names = setup
    ref = Ref(reference.load_safetensors(model), 3)
    for photo in photos:
        work = Path(args.work) / photo.stem
        dargs = ["--model", model, "--image", photo]
        # the fifth of the top-5 (from the engine's own forward pass)
        _, cfg = run_dump(args.dump, dargs + ["--out", work / "fwd"])
        top5 = cfg["top5"]
        print(f"\n[{photo.name}] top-5 {', '.join(f'{i} {names[i]}' for i in top5)}")
        backward_case(rep, photo.name, ref, args.dump, dargs, work, [-1, top5[4]], TOL["deit"],
                      recompute=photo == photos[0])
    return None


# --- (d) scores other than one logit: a contrast, a cosine of embeddings -----------------------


def pooled(ref, z, dtype=torch.float64):
    """The model's pooled embedding e [W] from the last block's output z [1, T, D] (timm's
    names): the final norm, then the CLS token, the mean of the patch tokens through
    fc_norm, or [CLS ; mean] for a [C, 2D] head (head_logits' pooling, without the head)."""
    w, D, Np = ref.weights(dtype), z.shape[-1], ref.Np
    x = F.layer_norm(z, (D,), w["norm.weight"], w["norm.bias"], ref.eps) if "norm.weight" in w else z
    if "head.weight" in w and w["head.weight"].shape[1] == 2 * D:
        return torch.cat([x[0, 0], x[0, Np:].mean(0)])
    if "fc_norm.weight" in w:
        return F.layer_norm(x[0, Np:].mean(0), (D,), w["fc_norm.weight"], w["fc_norm.bias"], ref.eps)
    return x[0, 0]


def cosine_score(ref, e_b):
    """score(logits, z) = cos(e(z), e_b), e_b [E] float32 held constant (no gradient)."""
    return lambda logits, z: F.cosine_similarity(pooled(ref, z, z.dtype), e_b.to(z.dtype), dim=0)


def score_case(rep, label, ref, dump, args, out, tol, contrast=None, x2=None, e_b=None):
    """Engine vs autograd for --contrast A,B (logit_A - logit_B) and --cosine (cos(e, e_b),
    e_b the reference's embedding of x2, or given, stored in float32): grad_att (each
    layer's dS/dA), grad_tokens, grad_input, and for the contrast AttnLRP's lrp_input (its
    pass is linear in the seed). The negative control: the engine seeded with the dot
    product e . e_b's gradient (--cosine-dot) must fail the cosine's comparison."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if contrast:
        a, b = contrast
        engine, _ = run_dump(dump, args + ["--out", out / "contrast", "--contrast", f"{a},{b}"])
        x32 = torch.from_numpy(engine["input"])
        print(f" [{label}] --contrast {a},{b}")
        sc = lambda logits, z: logits[a] - logits[b]  # noqa: E731
        g64 = reference_grads(ref, x32, 0, extras=False, score=sc)
        g32 = reference_grads(ref, x32, 0, torch.float32, extras=False, score=sc)
        g64["lrp_input"] = (lrp_grad(ref, x32, a) - lrp_grad(ref, x32, b)).numpy()
        g32["lrp_input"] = (lrp_grad(ref, x32, a, torch.float32) -
                            lrp_grad(ref, x32, b, torch.float32)).double().numpy()
        compare_grads(rep, f"{label} contrast {a},{b}", engine, g64, g32, tol)
        check_refused(rep, label, dump, args + ["--out", out / "bad", "--contrast", f"{a},{a}"],
                      f"--contrast {a},{a}")
    if x2 is not None or e_b is not None:
        if e_b is None:
            with torch.no_grad():
                kept = {}
                ref.forward(x2.double(), tap=lambda n, l, t: kept.__setitem__((n, l), t) or t)
                L = max(l for (n, l) in kept if n == "tokens") + 1
                e_b = pooled(ref, kept["tokens", L - 1]).float()
        e_b = e_b.float()
        e_b.numpy().tofile(out / "ref.f32")
        engine, _ = run_dump(dump, args + ["--out", out / "cosine", "--cosine", out / "ref.f32"])
        x32 = torch.from_numpy(engine["input"])
        kept = {}
        with torch.no_grad():
            ref.forward(x32.double(), tap=lambda n, l, t: kept.__setitem__((n, l), t) or t)
        L = max(l for (n, l) in kept if n == "tokens") + 1
        e64 = pooled(ref, kept["tokens", L - 1]).numpy()
        d = rel_err(engine["embedding"], e64, False).max()
        print(f" [{label}] --cosine: E={len(e64)}, embedding rel err {d:.1e}, "
              f"cos {float(F.cosine_similarity(torch.from_numpy(e64), e_b.double(), dim=0)):.4f}")
        rep.check(d <= tol, f"{label}: vit_embedding differs from the reference's pooling by {d:.1e}")
        sc = cosine_score(ref, e_b)
        g64 = reference_grads(ref, x32, 0, extras=False, score=sc)
        g32 = reference_grads(ref, x32, 0, torch.float32, extras=False, score=sc)
        g64["lrp_input"], g32["lrp_input"] = engine["lrp_input"], engine["lrp_input"]  # not compared
        compare_grads(rep, f"{label} cosine", engine, g64, g32, tol)
        wrong, _ = run_dump(dump, args + ["--out", out / "dot", "--cosine-dot", out / "ref.f32"])
        must_differ(rep, label, "the gradient of the dot product e . e_b",
                    {k: rel_err(wrong[k], g64[k], k in PER_LAYER).max()
                     for k in ("grad_att", "grad_tokens", "grad_input")}, tol)


SCORE_FAMILIES = {  # family -> (contrast?, cosine?)
    "deit_distilled_timm": (True, True),   # DeiT-shaped, the averaged logit
    "dinov2_reg4_timm_224": (False, True),  # a backbone with registers and LayerScale
    "fcnorm_avg_timm": (True, True),        # the mean of the patches through fc_norm
}


def test_scores(args, rep):
    for name, (con, cos) in SCORE_FAMILIES.items():
        f, ref, dargs, d, x = family_model(name, args.work)
        print(f"\n[{name}] scores: C={f['C']}, Np={ref.Np}")
        if not f["C"]:
            check_refused(rep, name, args.dump, dargs + ["--out", d / "bk", "--contrast", "0,1"],
                          "a backbone without head, --contrast 0,1")
        top = reference.top_k(ref.forward(x)[0], 2) if f["C"] else None
        x2 = torch.randn(3, *input_size(f), generator=torch.Generator().manual_seed(8))
        score_case(rep, name, ref, args.dump, dargs, d / "scores", TOL["random"],
                   contrast=top if con else None, x2=x2 if cos else None)
    return None


def test_scores_deit(args, rep):
    """DeiT-Tiny on the first photo: the contrast of its top-2, the cosine with the
    engine's embedding of the second photo."""
    setup = deit_setup(args.shared)
    if setup is None:
        print(f"skip: no DeiT-Tiny weights or photos under '{args.shared}'")
        return 77
    model, photos, _ = setup
    ref = Ref(reference.load_safetensors(model), 3)
    work = Path(args.work) / "deit"
    dargs = ["--model", model, "--image", photos[0]]
    _, cfg = run_dump(args.dump, dargs + ["--out", work / "fwd"])
    other = photos[1] if len(photos) > 1 else photos[0]
    e2, _ = run_dump(args.dump, ["--model", model, "--image", other, "--out", work / "b",
                                 "--class", -1])
    print(f"\n[DeiT-Tiny {photos[0].name}] against {other.name}")
    score_case(rep, "deit-tiny", ref, args.dump, dargs, work, TOL["deit"],
               contrast=cfg["top5"][:2], e_b=torch.from_numpy(e2["embedding"]))
    return None


# --- (e) the reference side alone -----------------------------------------------------------


def selftest(args, rep):
    """The reference's gradients are the ones meant: finite differences in float64
    through the same taps (perturbing A_l, z_l, the input where the forward pass
    uses them), the hand-written LayerNorm and softmax backwards (sign 1, "right")
    equal to autograd, and the AttnLRP forward values unchanged by its rules."""
    f = family_spec("deit_distilled_timm")  # distillation: the averaged logit
    f.update(L=2, D=64, F=128, grid0=(3, 3))
    f["H"] = 2
    g = torch.Generator().manual_seed(3)
    import test_families
    w = {k: v.double() for k, v in test_families.random_timm(f, g).items()}
    ref = Ref(w, f["H"])
    x32 = torch.randn(3, 48, 48, generator=g)
    c = 3
    gr = reference_grads(ref, x32, c)
    eps = 1e-6

    def y_with(name, l, idx, delta, score=None):
        """y_c (or s_l) with the tensor `name` of block l moved by delta at idx."""
        def tap(n, ll, t):
            if (n, ll) == (name, l):
                t = t.clone()
                t[(0,) + idx] += delta
            return t
        x = x32.double()
        if name == "input":
            x = x.clone()
            x[idx] += delta
        kept = {}

        def tap2(n, ll, t):
            t = tap(n, ll, t)
            kept[n, ll] = t
            return t
        logits, _ = ref.forward(x, tap=tap2)
        return float(logits[c] if score is None else ref.head(kept["tokens", score])[c])

    rng = np.random.default_rng(0)
    worst = {}
    for what, name, shape in (("grad_att", "att", gr["att"].shape),
                              ("grad_tokens", "tokens", gr["grad_tokens"].shape),
                              ("grad_input", "input", gr["grad_input"].shape),
                              ("legrad", "att", gr["att"].shape)):
        for _ in range(12):
            idx = tuple(int(rng.integers(s)) for s in shape)
            l, rest = (idx[0], idx[1:]) if name != "input" else (None, idx)
            score = l if what == "legrad" else None
            fd = (y_with(name, l, rest, eps, score) - y_with(name, l, rest, -eps, score)) / (2 * eps)
            ag = gr[what][idx]
            worst[what] = max(worst.get(what, 0), abs(fd - ag) / max(np.abs(gr[what]).max(), 1e-30))
    for k, v in worst.items():
        print(f"  {k}: autograd vs central differences, max rel diff {v:.1e} (12 entries)")
        rep.check(v < 1e-7, f"selftest: {k} differs from finite differences by {v:.1e}")
    # the last layer's LeGrad score is y_c itself
    d = np.abs(gr["legrad"][-1] - gr["grad_att"][-1]).max()
    rep.check(d < 1e-12, f"selftest: LeGrad's s_(L-1) is not y_c ({d:.1e})")
    # hand-written backwards, unflipped, against autograd
    for what, ops in (("LayerNormFn sign +1", {"layer_norm": layer_norm_fn(1)}),
                      ("SoftmaxFn right", {"softmax": softmax_fn("right")})):
        gh = reference_grads(ref, x32, c, ops=ops, extras=False)
        d = max(rel_err(gh[k], gr[k], False).max() for k in ("grad_att", "grad_tokens", "grad_input"))
        print(f"  {what} vs autograd: max rel diff {d:.1e}")
        rep.check(d < 1e-12, f"selftest: {what} is not the true backward ({d:.1e})")
    # AttnLRP's rules change gradients, not values
    ops, tap = lrp_rules()
    lg_lrp = ref.forward(x32, tap=tap, ops=ops)[0]
    d = float((lg_lrp - torch.from_numpy(gr["logits"])).abs().max())
    print(f"  AttnLRP forward vs plain forward: logits max diff {d:.1e}")
    rep.check(d < 1e-12, "selftest: the AttnLRP rules change the forward values")
    # without any rule, the LRP pass is the plain gradient
    d = rel_err(lrp_grad(ref, x32, c, std=False, gelu=False, softmax=False).numpy(),
                gr["grad_input"], False).max()
    rep.check(d < 1e-12, f"selftest: the LRP pass without rules is not the gradient ({d:.1e})")
    # the rules, one op at a time, against their closed forms
    t = torch.randn(5, 16, dtype=torch.float64, generator=g).requires_grad_()
    wln, bln, dy = (torch.randn(16, dtype=torch.float64, generator=g) for _ in range(3))
    lrp_layer_norm()(t, (16,), wln, bln, 1e-6).backward(dy.expand(5, 16))
    std = (t.var(-1, unbiased=False, keepdim=True) + 1e-6).sqrt()
    g_ = dy * wln
    d = float((t.grad - (g_ - g_.mean()) / std).abs().max())
    rep.check(d < 1e-12, f"selftest: LRP LayerNorm gradient is not (g - mean g)/std ({d:.1e})")
    t.grad = None
    lrp_gelu(t).backward(dy.expand(5, 16))
    d = float((t.grad - dy * F.gelu(t) / t).abs().max())
    rep.check(d < 1e-12, f"selftest: LRP GELU gradient is not gelu(x)/x ({d:.1e})")
    # the planted mistakes do change the gradients (so they are mistakes at all)
    for what, ops in MISTAKES.items():
        gm = reference_grads(ref, x32, c, ops=ops, extras=False)
        d = rel_err(gm["grad_input"], gr["grad_input"], False).max()
        print(f"  mistake '{what}': grad_input moves by {d:.1e} (relative)")
        rep.check(d > 1e-2, f"selftest: mistake '{what}' changes nothing")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=["family", "random", "deit", "scores", "scores_deit", "selftest",
                                        "list"])
    ap.add_argument("name", nargs="?", help="the family (part family)")
    ap.add_argument("--dump", help="the vit_dump executable")
    ap.add_argument("--work", help="scratch directory")
    ap.add_argument("--shared", default="", help="shared/ with models/deit-tiny and images")
    args = ap.parse_args()
    if args.part == "list":
        print(";".join(list(FAMILIES) + list(EXTRA)))
        return 0
    rep, t0 = Report(), time.time()
    skip = None
    if args.part == "family":
        if args.name not in FAMILIES and args.name not in EXTRA:
            ap.error(f"family: one of {', '.join(list(FAMILIES) + list(EXTRA))}")
        test_family(args.name, args, rep)
    elif args.part == "selftest":
        selftest(args, rep)
    else:
        skip = {"random": test_random, "deit": test_deit, "scores": test_scores,
                "scores_deit": test_scores_deit}[args.part](args, rep)
    print(f"({time.time() - t0:.1f} s)")
    return skip if skip is not None else rep.exit_code()


if __name__ == "__main__":
    sys.exit(main())
