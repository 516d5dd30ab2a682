#!/usr/bin/python3
"""test_families_views.py - every view of the app on every family of issue 35, as a user runs
it: a small random stand-in of each family (the parity tests' own writers), then vitlens'
headless modes on it, each checked for what a user would see.

Families (FAMILIES): DINOv3 in Hugging Face's names (a backbone, RoPE, 4 registers) and in
timm's (.pth, SwiGLU, a classifier head); EVA-02 (RoPE, SwiGLU with its sub-LN, fc_norm over
the mean of the patches, a head); SigLIP (no CLS, the MAP head, a text tower with its
spiece.model) and SigLIP 2 (the same with Gemma's tokenizer.model); Hugging Face's
Dinov2WithRegistersModel (a backbone) and Dinov2ForImageClassification (the [CLS ; mean]
head); a timm classifier with fc_norm over the mean of the patches.

Modes, per family (the RoPE families at a non-square --size throughout):
  --export DIR IMAGE   every kind of --list-kinds: its files (every layer, head and fusion
                       the kind writes), each [gh, gw] ([Sh, Sw] for a pixel map, [gh, gw, 4]
                       for the PCA's colours), finite, not constant; per-layer kinds differ
                       from layer 1 to layer L, per-head kinds from head 1 to head 2; the
                       kinds a model cannot show (a classifier's without a head or --text, the
                       probe without a MAP head) not written and named on stderr; SigLIP with
                       --text PHRASE (the phrase's class-specific maps); the CSVs
  --top K              a head (or SigLIP's --classes): K lines RANK PROB ID, PROB in [0, 1]
                       falling, summing to at most 1 for a softmax; a backbone: refused
                       with a message naming the missing head
  --lesson-export DIR  steps.json's steps, each picture and array written, arrays finite and
                       of the shape steps.json says; the RoPE step for RoPE models, the probe
                       step for MAP heads, neither elsewhere; no caption claiming a position
                       embedding is added to a model that has none
  interventions        --ablate 1:1 (layer 1's attention unchanged, layer 2's changed),
                       --pos-embed shuffle and zero (layer 1's attention changed),
                       --drop-patches 2,2 (NaN exactly at that patch, the rest finite), each
                       through --export
  --eval FOLDER        a head (SigLIP: --classes): the table with a row per method and the
                       baselines, finite; a backbone: refused naming the head

Controls (after the families, on the first three): the export checker must notice a kind that
writes a constant map, the same map at every layer, a NaN, a transposed map, a missing
file and a skipped kind not named on stderr, each planted in a copy of a real export.

    test_families_views.py --app build/vitlens --work DIR [--family NAME ...] [--jobs N]
Exits 0, 1 on a failed check, 77 (skip) without python3-sentencepiece.
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
for sub in ("parity", "gui", "text"):
    sys.path.insert(0, str(HERE.parent / sub))
try:
    import sentencepiece  # noqa: F401  (SigLIP's tokenizers)
except ImportError:
    print("SKIP: no python3-sentencepiece")
    sys.exit(77)
import torch  # noqa: E402

import siglip_model  # noqa: E402
import test_dinov3  # noqa: E402
import test_eva02  # noqa: E402
import test_families  # noqa: E402
import test_hf_dinov2  # noqa: E402

torch.set_num_threads(1)

PHRASE = "a photo of a cat"
CLASSES = "cat, dog, rocket"

# --- the stand-ins ---------------------------------------------------------------------
# Each writer puts a checkpoint into d and returns its path. Small: 2 layers, 2 heads (4 for
# SigLIP), D 64 or 128 (timm's names carry no head count: D / 64 heads), grids of 16 to 88.


def write_dinov3_hf(d):
    c = dict(name="dinov3_hf", shape="S", names="hf", file="safetensors", qv_bias=True, D=64,
             L=2, H=2, F=128, gated=False, C=0)
    return test_dinov3.write_case(c, d, seed=1)[1]


def write_dinov3_timm(d):
    c = dict(name="dinov3_timm", shape="S+", names="timm", file="pth", qv_bias=True, D=128,
             L=2, H=2, F=256, gated=True, C=5)
    return test_dinov3.write_case(c, d, seed=2)[1]


def write_eva02(d):
    c = dict(name="eva02", shape="B", file="safetensors", size=(112, 112), C=5, D=128, L=2,
             H=2, F=int(128 * 4 * 2 / 3), split=True)
    return test_eva02.write_case(c, d, seed=3)[1]


def write_hf_dinov2(cls, R, C, seed):
    def write(d):
        c = dict(test_hf_dinov2.SMALL, D=64, L=2, H=2, F=256, S0=84, name=cls, cls=cls, R=R,
                 C=C, file="safetensors")
        return test_hf_dinov2.write_case(c, d, seed=seed)[1]
    return write


def write_fcnorm(d):
    test_families.write_family(test_families.spec("fcnorm_avg_timm"), d, seed=6)
    return d / "model.safetensors"


def write_siglip(gemma):
    def write(d):
        d.mkdir(parents=True, exist_ok=True)
        return siglip_model.write(d, gemma=gemma)[0]
    return write


# grid: the patch grid run; px: the input; C: classes (SigLIP: those of --classes); R the
# register tokens; size: --size; rope, probe: what the lesson must show
FAMILIES = {
    "dinov3_hf": dict(write=write_dinov3_hf, size="96x128", grid=(6, 8), px=(96, 128), C=0,
                      L=2, H=2, rope=True, no_pos=True, eval_size="64x80"),
    "dinov3_timm": dict(write=write_dinov3_timm, size="128x96", grid=(8, 6), px=(128, 96), C=5,
                        L=2, H=2, rope=True, no_pos=True, eval_size="64x80"),
    "eva02": dict(write=write_eva02, size="112x154", grid=(8, 11), px=(112, 154), C=5, L=2, H=2,
                  rope=True, eval_size="56x70"),
    "siglip": dict(write=write_siglip(False), grid=(4, 4), px=(64, 64), C=3, L=2, H=4,
                   probe=True, text=True),
    "siglip2": dict(write=write_siglip(True), grid=(4, 4), px=(64, 64), C=3, L=2, H=4,
                    probe=True, text=True),
    "hf_dinov2_reg": dict(write=write_hf_dinov2("Dinov2WithRegistersModel", 4, 0, 4), grid=(6, 6),
                          px=(84, 84), C=0, L=2, H=2),
    "hf_dinov2_cls": dict(write=write_hf_dinov2("Dinov2ForImageClassification", 0, 5, 5),
                          grid=(6, 6), px=(84, 84), C=5, L=2, H=2),
    "fcnorm_timm": dict(write=write_fcnorm, grid=(4, 4), px=(64, 64), C=10, L=2, H=2),
}

# --- what --export writes per kind -------------------------------------------------------
# tag: (per layer, heads: "all" (H01 .. HH and the fusions) or None (one map), shape: "grid",
# "pixels" or "rgb"). A kind --list-kinds names that is not here fails the test: add it.
KINDS = {
    "attention": (True, "all", "grid"),
    "rollout": (True, None, "grid"),
    "chefer": (False, None, "grid"),
    "grad-rollout": (False, None, "grid"),
    "gradcam": (False, None, "grid"),
    "legrad": (False, None, "grid"),
    "attnlrp": (False, None, "pixels"),
    "grad-input": (False, None, "pixels"),
    "pca": (True, None, "rgb"),
    "similarity": (True, None, "grid"),
    "norms": (True, None, "grid"),
    "logit-lens": (True, None, "grid"),
    "flow": (True, None, "grid"),
    "tokenrank": (True, None, "grid"),
    "entropy": (True, "all", "grid"),
    "probe": (False, "all", "grid"),
}
FUSIONS = ("mean", "max", "min")


def list_kinds(app):
    """[(tag, needs)] from vitlens --list-kinds."""
    r = subprocess.run([app, "--list-kinds"], capture_output=True, text=True, check=True)
    return [(f[0], f[5]) for f in (ln.split("\t") for ln in r.stdout.splitlines()) if len(f) >= 6]


def expected_files(tag, fam, stem):
    """The .npy names --export writes for kind tag on family fam; stem: the class's."""
    per_layer, heads, _ = KINDS[tag]
    layers = [f"L{l:02d}" for l in range(1, fam["L"] + 1)] if per_layer else [None]
    hs = [f"H{h:02d}" for h in range(1, fam["H"] + 1)] + list(FUSIONS) if heads else [None]
    out = []
    for lay in layers:
        for h in hs:
            if tag == "logit-lens":  # class-specific and per layer: STEM_L01_logit-lens
                parts = [stem, lay, tag]
            elif fam_needs(tag) == "classifier":
                parts = [stem, tag]
            else:  # the attention's files keep their plain names (L01_H01, L01_mean)
                parts = [lay, h] + ([] if tag == "attention" else [tag])
            out.append("_".join(p for p in parts if p) + ".npy")
    return out


NEEDS = {}


def fam_needs(tag):
    return NEEDS.get(tag, "-")


def shows(tag, fam, with_text):
    """Whether family fam can show kind tag (with --text for a text tower)."""
    need = fam_needs(tag)
    if need == "classifier":
        return fam["C"] > 0 and not fam.get("text") or bool(fam.get("text") and with_text)
    if need == "map-head":
        return bool(fam.get("probe"))
    return True


# --- the checks --------------------------------------------------------------------------


def not_constant(a):
    v = a[np.isfinite(a)]
    return v.size > 1 and float(v.max() - v.min()) > 1e-6 * max(1.0, float(np.abs(v).max()))


def differ(a, b):
    return a.shape == b.shape and not np.allclose(a, b, rtol=1e-4, atol=1e-7, equal_nan=True)


def check_export(d, fam, stderr, stem, with_text=False, dropped=None):
    """Problems (strings) with the export in d of family fam; stderr what vitlens said.
    dropped: (row, col) of a patch taken out (--drop-patches): NaN there, and only there."""
    probs = []
    gh, gw = fam["grid"]
    Sh, Sw = fam["px"]
    shape = {"grid": (gh, gw), "pixels": (Sh, Sw), "rgb": (gh, gw, 4)}
    for tag, _ in KINDS_LISTED:
        files = expected_files(tag, fam, stem)
        if not shows(tag, fam, with_text):
            there = [f for f in files if (d / f).exists()]
            if there:
                probs.append(f"{tag}: written ({there[0]}) for a model that cannot show it")
            if not re.search(rf"\b{re.escape(tag)}\b.*(needs|skipped)|skipped.*\b{re.escape(tag)}\b",
                             stderr):
                probs.append(f"{tag}: not written and not said on stderr (skipped silently)")
            continue
        maps = {}
        for f in files:
            if not (d / f).exists():
                probs.append(f"{tag}: {f} missing")
                continue
            a = np.load(d / f)
            maps[f] = a
            want = shape[KINDS[tag][2]]
            if a.shape != want:
                probs.append(f"{tag}: {f} has shape {list(a.shape)}, expected {list(want)}")
                continue
            bad = ~np.isfinite(a)
            if dropped is not None and KINDS[tag][2] == "grid":
                r, c = dropped
                if not bad[r, c]:
                    probs.append(f"{tag}: {f}: the dropped patch ({r + 1}, {c + 1}) is not NaN")
                bad[r, c] = False
            elif dropped is not None and KINDS[tag][2] == "rgb":
                r, c = dropped  # colours: the dropped patch transparent or NaN
                if not (bad[r, c].all() or a[r, c, 3] == 0):
                    probs.append(f"{tag}: {f}: the dropped patch is drawn (alpha {a[r, c, 3]})")
                bad[r, c] = False
            elif dropped is not None:  # pixels: the dropped patch's pixels may be NaN
                P = Sh // gh
                r, c = dropped
                bad[r * P:(r + 1) * P, c * P:(c + 1) * P] = False
            if bad.any():
                probs.append(f"{tag}: {f}: {int(bad.sum())} values not finite "
                             f"(first at {np.argwhere(bad)[0].tolist()})")
                continue
            if KINDS[tag][2] == "rgb":
                if not any(not_constant(a[..., ch]) for ch in range(3)):
                    probs.append(f"{tag}: {f}: every colour channel constant")
            elif not not_constant(a):
                probs.append(f"{tag}: {f}: constant ({float(np.nanmax(a)):.6g} everywhere)")
        # maps that must differ: the first and the last layer, head 1 and head 2
        per_layer, heads, _ = KINDS[tag]
        if per_layer and fam["L"] > 1:
            first = [f for f in files if "L01" in f]
            for f in first:
                g = f.replace("L01", f"L{fam['L']:02d}")
                if f in maps and g in maps and not differ(maps[f], maps[g]):
                    probs.append(f"{tag}: {f} and {g} equal: the layers do not show")
        if heads and fam["H"] > 1:
            for f in files:
                if "H01" in f:
                    g = f.replace("H01", "H02")
                    if f in maps and g in maps and not differ(maps[f], maps[g]):
                        probs.append(f"{tag}: {f} and {g} equal: the heads do not show")
    # the lists: the logit lens per layer where there is a head, high-norm tokens
    lens = d / "logit_lens.csv"
    if fam["C"] and (not fam.get("text") or with_text):
        rows = lens.read_text().splitlines()[1:] if lens.exists() else []
        if len(rows) != fam["L"]:
            probs.append(f"logit_lens.csv: {len(rows)} rows, expected {fam['L']}")
        for row in rows:
            p = [float(x) for x in row.rsplit(",", 2)[1:]]
            if not all(0 <= x <= 1 for x in p):
                probs.append(f"logit_lens.csv: probabilities outside [0, 1]: {row}")
    if not (d / "high_norm_tokens.csv").exists():
        probs.append("high_norm_tokens.csv missing")
    return probs


# --- running vitlens ---------------------------------------------------------------------


class Family:
    def __init__(self, name, args):
        self.name, self.fam, self.args = name, FAMILIES[name], args
        self.work = Path(args.work) / name
        self.lines = []
        self.fails = []

    def check(self, ok, what):
        if ok:  # the stderr a message quotes is for failures
            what = what.split(" | ")[0]
        self.lines.append(("ok   " if ok else "FAIL ") + f"{self.name}: {what}")
        if not ok:
            self.fails.append(what)
        return ok

    def run(self, *args, model=True):
        argv = [self.args.app] + (["--model", str(self.model)] if model else []) + \
            [str(a) for a in args]
        t = time.time()
        r = subprocess.run(argv, capture_output=True, text=True,
                           env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
        self.lines.append(f"     ({time.time() - t:.1f} s) vitlens {' '.join(argv[1:])}")
        return r.returncode, r.stdout, r.stderr

    def size(self):
        return ["--size", self.fam["size"]] if self.fam.get("size") else []

    def text(self):
        return ["--text", PHRASE] if self.fam.get("text") else []

    def stem(self):
        if self.fam.get("text"):
            return PHRASE.replace(" ", "-")
        return None  # the top-1 class: found from the files

    def export(self, sub, *extra, text=True):
        d = self.work / sub
        shutil.rmtree(d, ignore_errors=True)
        rc, so, se = self.run(*self.size(), *(self.text() if text else []), *extra, "--export", d,
                              self.args.image)
        stem = self.stem()
        if stem is None and self.fam["C"]:
            found = sorted(d.glob("class*_chefer.npy")) if d.exists() else []
            stem = found[0].name[:-len("_chefer.npy")] if found else "classNONE"
        return d, rc, so, se, stem

    def go(self):
        t0 = time.time()
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        self.model = self.fam["write"](self.work / "model")
        fam, C = self.fam, self.fam["C"]
        has_head = C > 0

        # --export: every kind
        d, rc, so, se, stem = self.export("export")
        self.check(rc == 0, f"--export: exit {rc} | {se.strip()[-300:]}")
        if rc == 0:
            for p in check_export(d, fam, se, stem, with_text=bool(fam.get("text"))):
                self.check(False, f"--export: {p}")
            self.check(True, "--export: every kind's files checked")
        self.plain, self.plain_stderr = (d, stem), se
        if fam.get("text"):  # without --text: the image views alone, the rest named
            d2, rc, so, se2, _ = self.export("export_notext", text=False)
            self.check(rc == 0, f"--export without --text: exit {rc} | {se2.strip()[-300:]}")
            if rc == 0:
                for p in check_export(d2, fam, se2, "none", with_text=False):
                    self.check(False, f"--export without --text: {p}")

        # --top
        top = ["--classes", CLASSES] if fam.get("text") else []
        rc, so, se = self.run(*self.size(), *top, "--top", 3, self.args.image)
        if has_head:
            rows = [ln.split(" ", 3) for ln in so.splitlines()]
            ok = rc == 0 and len(rows) == 3 and all(len(r) >= 3 for r in rows)
            self.check(ok, f"--top 3: exit {rc}, {len(rows)} lines | {se.strip()[-200:]}")
            if ok:
                p = [float(r[1]) for r in rows]
                self.check(all(0 <= x <= 1 for x in p) and p == sorted(p, reverse=True),
                           f"--top 3: probabilities in [0, 1], falling: {p}")
                if not fam.get("text"):
                    self.check(sum(p) <= 1 + 1e-3, f"--top 3: a softmax's sum {sum(p):.4f} <= 1")
                self.check([int(r[0]) for r in rows] == [1, 2, 3], "--top 3: ranks 1 2 3")
        else:
            self.check(rc != 0 and "no classification head" in se and "Traceback" not in se,
                       f"--top on a backbone: refused naming the head (exit {rc}: {se.strip()})")

        # --lesson-export
        d = self.work / "lesson"
        shutil.rmtree(d, ignore_errors=True)
        rc, so, se = self.run(*self.size(), "--lesson-export", d, self.args.image)
        if self.check(rc == 0, f"--lesson-export: exit {rc} | {se.strip()[-300:]}"):
            for p in check_lesson(d, fam, self.model):
                self.check(False, f"--lesson-export: {p}")

        # the interventions, through --export
        l1 = "L01_mean.npy"
        l2 = f"L{fam['L']:02d}_mean.npy"
        base = np.load(self.plain[0] / l1), np.load(self.plain[0] / l2)
        for name, extra, same1 in (("ablate", ["--ablate", "1:1"], True),
                                   ("shuffle", ["--pos-embed", "shuffle", "--pos-seed", "3"], False),
                                   ("zero", ["--pos-embed", "zero"], False)):
            d, rc, so, se, st = self.export(name, *extra)
            if not self.check(rc == 0, f"{' '.join(extra)} --export: exit {rc} | {se.strip()[-300:]}"):
                continue
            a1, a2 = np.load(d / l1), np.load(d / l2)
            if same1:  # the ablated head's output is zeroed after its attention
                self.check(np.array_equal(a1, base[0]) and differ(a2, base[1]),
                           f"{' '.join(extra)}: layer 1's attention unchanged, layer "
                           f"{fam['L']}'s changed")
            else:
                self.check(differ(a1, base[0]),
                           f"{' '.join(extra)}: layer 1's attention changed")
            for p in check_export(d, fam, se, st, with_text=bool(fam.get("text"))):
                if "equal: the" not in p:  # an intervention may even out a map's layers
                    self.check(False, f"{' '.join(extra)} --export: {p}")
        d, rc, so, se, st = self.export("drop", "--drop-patches", "2,2")
        if self.check(rc == 0, f"--drop-patches 2,2 --export: exit {rc} | {se.strip()[-300:]}"):
            for p in check_export(d, fam, se, st, with_text=bool(fam.get("text")), dropped=(1, 1)):
                if "equal: the" not in p:
                    self.check(False, f"--drop-patches 2,2 --export: {p}")

        # --eval
        # at a smaller size for the RoPE models: the sanity check's cascade reruns the model
        size = ["--size", fam["eval_size"]] if fam.get("eval_size") else self.size()
        rc, so, se = self.run(*size, *top, "--eval", "--eval-steps", 4, self.args.folder)
        if has_head:
            if self.check(rc == 0, f"--eval: exit {rc} | {se.strip()[-300:]}"):
                for p in check_eval(so, fam):
                    self.check(False, f"--eval: {p}")
        else:
            self.check(rc != 0 and "classification head" in se and "Traceback" not in se,
                       f"--eval on a backbone: refused naming the head (exit {rc}: {se.strip()})")
        self.lines.append(f"     {self.name}: {time.time() - t0:.1f} s")
        return self


def check_lesson(d, fam, model):
    probs = []
    sj = d / "steps.json"
    if not sj.exists():
        return ["steps.json missing"]
    steps = json.loads(sj.read_text())["steps"]
    names = [s["name"] for s in steps]
    for want, has in (("rope", fam.get("rope")), ("probe", fam.get("probe"))):
        if bool(has) != (want in names):
            probs.append(f"the {want} step {'missing' if has else 'shown'} ({names})")
    for s in steps:
        if not (d / s["picture"]).exists():
            probs.append(f"{s['name']}: {s['picture']} missing")
        for a in s["arrays"]:
            if not (d / a["file"]).exists():
                probs.append(f"{s['name']}: {a['file']} missing")
                continue
            x = np.load(d / a["file"])
            if list(x.shape) != a["dims"]:
                probs.append(f"{s['name']}: {a['file']} {list(x.shape)}, steps.json {a['dims']}")
            if not np.isfinite(x).all():
                probs.append(f"{s['name']}: {a['file']} not finite")
        if fam.get("no_pos"):  # DINOv3: RoPE alone, no position embedding added
            cap = s["caption"].lower()
            if "position embedding" in cap and "no position embedding" not in cap:
                probs.append(f"{s['name']}: the caption speaks of a position embedding the "
                             f"model does not have: '{s['caption']}'")
    return probs


def check_eval(out, fam):
    probs = []
    rows = [ln for ln in out.splitlines() if ln.startswith("| ") and not ln.startswith("| method")]
    names = [r.split("|")[1].strip() for r in rows]
    for want in ("attention", "rollout", "random (baseline)", "centred Gaussian (baseline)") + \
            (("probe",) if fam.get("probe") else ("Chefer et al.",)):
        if want not in names:
            probs.append(f"no row '{want}' ({names})")
    for r in rows:
        for cell in r.split("|")[2:-1]:
            cell = cell.strip().replace("(!)", "").strip()
            if cell in ("-", ""):
                continue
            try:
                v = float(cell)
            except ValueError:
                probs.append(f"a cell '{cell}' not a number: {r}")
                break
            if not math.isfinite(v):
                probs.append(f"a cell not finite: {r}")
                break
    return probs


# --- the controls --------------------------------------------------------------------------


def controls(fam_runs):
    """Plant a fault in a copy of a real export; the checker must name it. Returns fails."""
    fails = []
    lines = []
    for f in fam_runs:
        if f.fails or not f.plain[0].exists():
            continue
        src, stem = f.plain
        fam = f.fam
        gh, gw = fam["grid"]
        backbone = not fam["C"]
        plants = {
            "a constant map (norms, every layer)": (
                lambda d: [np.save(p, np.full_like(np.load(p), 0.5))
                           for p in d.glob("L*_norms.npy")], "constant"),
            "the same rollout at every layer": (
                lambda d: shutil.copy(d / "L01_rollout.npy", d / f"L{fam['L']:02d}_rollout.npy"),
                "the layers do not show"),
            "head 2's attention a copy of head 1's": (
                lambda d: shutil.copy(d / "L01_H01.npy", d / "L01_H02.npy"), "the heads do not show"),
            "a NaN in the similarity": (
                lambda d: np.save(d / "L01_similarity.npy",
                                  np.where(np.eye(gh, gw) > 0, np.nan, np.load(d / "L01_similarity.npy"))),
                "not finite"),
            "a map transposed": (
                lambda d: np.save(d / "L01_flow.npy", np.load(d / "L01_flow.npy").T), "shape"),
            "a file missing": (lambda d: (d / "L01_tokenrank.npy").unlink(), "missing"),
        }
        for what, (plant, word) in plants.items():
            if what == "a map transposed" and gh == gw:
                continue
            d = src.parent / "control"
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(src, d)
            plant(d)
            p = check_export(d, fam, f.plain_stderr, stem, with_text=bool(fam.get("text")))
            ok = any(word in x for x in p)
            lines.append(("ok   " if ok else "FAIL ") + f"control {f.name}: {what} is noticed "
                         f"({p[:1]})")
            if not ok:
                fails.append(f"control {f.name}: {what}")
        if backbone:  # a kind skipped without a word
            quiet = "\n".join(ln for ln in f.plain_stderr.splitlines() if "chefer" not in ln)
            p = check_export(src, fam, quiet, stem)
            ok = any("chefer" in x and "silently" in x for x in p)
            lines.append(("ok   " if ok else "FAIL ") + f"control {f.name}: a kind skipped "
                         f"silently is noticed ({p[:1]})")
            if not ok:
                fails.append(f"control {f.name}: silent skip")
        shutil.rmtree(src.parent / "control", ignore_errors=True)
        if len(lines) > 14:  # three families' exports are enough to show the checker works
            break
    print("\n".join(lines), flush=True)
    if not lines:
        fails.append("no family's export to plant the controls in")
    return fails


KINDS_LISTED = []


def make_images(d):
    """Three photos of texture and shapes (no two patches alike, unlike the demo scenes'
    flat backgrounds): d/a.png (160 x 200) and d/b.png, d/c.png; returns (a.png, d)."""
    from PIL import Image
    d.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate("abc"):
        g = np.random.default_rng(35 + i)
        yy, xx = np.mgrid[0:160, 0:200] / 40.0
        img = np.zeros((160, 200, 3))
        for ch in range(3):
            f = g.normal(size=(4, 2)) * 2
            img[..., ch] = sum(np.sin(f[k, 0] * yy + f[k, 1] * xx + g.uniform(0, 6)) for k in range(4))
        img += g.normal(size=img.shape) * 0.5
        cy, cx, r = g.uniform(40, 120), g.uniform(50, 150), g.uniform(20, 40)
        img[(np.mgrid[0:160, 0:200][0] - cy) ** 2 + (np.mgrid[0:160, 0:200][1] - cx) ** 2 < r * r] = 4
        img = (img - img.min()) / (img.max() - img.min()) * 255
        Image.fromarray(img.astype(np.uint8)).save(d / f"{name}.png")
    return d / "a.png", d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--family", action="append", choices=sorted(FAMILIES))
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    t0 = time.time()
    a.image, a.folder = make_images(Path(a.work) / "photos")
    KINDS_LISTED.extend(list_kinds(a.app))
    NEEDS.update(KINDS_LISTED)
    fails = [f"kind '{t}' of --list-kinds has no row in this test's KINDS"
             for t, _ in KINDS_LISTED if t not in KINDS]
    names = a.family or list(FAMILIES)
    with ThreadPoolExecutor(a.jobs) as ex:
        runs = list(ex.map(lambda n: Family(n, a), names))
        futures = [ex.submit(r.go) for r in runs]
        for r, fu in zip(runs, futures):
            try:
                fu.result()
            except Exception as e:  # a crash of the test itself is a failure of its family
                r.check(False, f"the test raised {type(e).__name__}: {e}")
            print("\n".join(r.lines), flush=True)
            fails += [f"{r.name}: {x}" for x in r.fails]
    fails += controls(runs)
    print(f"\n{time.time() - t0:.0f} s")
    if fails:
        print(f"{len(fails)} failure(s):\n  " + "\n  ".join(fails))
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
