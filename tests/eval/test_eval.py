#!/usr/bin/python3
"""vitlens --eval and --eval-merge (app/headless/eval.c, docs/faithfulness.md) against an
independent implementation of each test in numpy and a float64 PyTorch forward pass
(tests/parity/reference.py) on the same weights.

  /usr/bin/python3 test_eval.py --app build/vitlens --dump build/tests/parity/vit_dump \
      --scenes tools/gen_scenes.py --shared ../shared --work DIR [--deit] [--count N]

Without --deit: the built-in model (assets/default) on scenes made by gen_scenes.py with
their masks: every perturbation curve of six methods on two scenes recomputed from the
maps --export writes, the AUCs of the table from the CSV, the localisation scores from
the masks, the sanity check's rows, three shards merged against the whole run, a broken
image and a mask of the wrong size skipped, usage errors, the plots, the progress bar.
With --deit: DeiT-Tiny (distilled) on one shared photo, the curves of four methods
(exit 77 without the shared model). Exits 0, 1 on a failed check.
"""
import argparse
import csv
import hashlib
import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "parity"))
import reference  # noqa: E402

failures = 0
PERTURB_STEPS, STEPS = 10, 20  # positive/negative steps (fixed), deletion/insertion (--eval-steps)


def check(cond, what):
    global failures
    print(f"{'ok  ' if cond else 'FAIL'} {what}", flush=True)
    failures += not cond


def vitlens(app, *args, timeout=1200):
    env = dict(os.environ, XDG_CONFIG_HOME=tempfile.mkdtemp(), XDG_DATA_HOME=tempfile.mkdtemp())
    env.pop("DISPLAY", None)
    env.pop("VITLENS_MODELS_DIR", None)
    return subprocess.run([app, *args], capture_output=True, text=True, env=env, timeout=timeout)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# --- the protocol, written from docs/faithfulness.md -----------------------------------

def order(m, most_first):
    """Patch indices by decreasing (most_first) or increasing value, ties lower index first."""
    idx = np.arange(m.size)
    return np.lexsort((idx, -m if most_first else m))


def count(s, n_steps, n):
    return (2 * s * n + n_steps) // (2 * n_steps)  # round half up of s * n / n_steps


def mix(base, fill, o, k, P, gw):
    out = base.copy()
    for p in o[:k]:
        r, c = divmod(int(p), gw)
        out[:, r * P:(r + 1) * P, c * P:(c + 1) * P] = 0 if fill is None else \
            fill[:, r * P:(r + 1) * P, c * P:(c + 1) * P]
    return out


def blur(x, sigma=5.0, radius=5):
    t = np.exp(-np.arange(-radius, radius + 1) ** 2 / (2 * sigma ** 2))
    k = torch.tensor(t / t.sum())
    xt = torch.tensor(x, dtype=torch.float64)[:, None]  # [3, 1, H, W]
    xt = torch.nn.functional.conv2d(xt, k.view(1, 1, 1, -1), padding=(0, radius))
    xt = torch.nn.functional.conv2d(xt, k.view(1, 1, -1, 1), padding=(radius, 0))
    return xt[:, 0].numpy()


def splitmix_map(n, seed):
    out, s, M = [], seed, (1 << 64) - 1
    for _ in range(n):
        s = (s + 0x9E3779B97F4A7C15) & M
        z = s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
        z ^= z >> 31
        out.append((z >> 40) * 2.0 ** -24)
    return np.array(out, dtype=np.float32)


def gaussian_map(gh, gw, frac=0.25):
    r, c = np.mgrid[0:gh, 0:gw]
    d2 = (r - (gh - 1) / 2) ** 2 + (c - (gw - 1) / 2) ** 2
    s = frac * min(gh, gw)
    return np.exp(-d2 / (2 * s * s)).astype(np.float32).ravel()


class Probs:
    """softmax of a float64 PyTorch forward pass (reference.vit_forward) of one model on
    inputs [3, Sh, Sw], each distinct input computed once. Many perturbed inputs repeat:
    every curve starts or ends on the photo, the empty image or its blur, positive's
    steps are deletion's even steps (the same order and counts), the reversed orders of
    the negative control are the other curves' orders. A result is kept under the sha256
    of the exact input bytes (as float64) with the weights' bytes, heads, eps and the
    reference's source, in this run and in `cache` (a folder, or None): a pure function
    of what the key holds, so a stored result can only be the one computing would give.
    CI's ASan build so reuses the plain build's passes whenever its maps (and so the
    perturbed inputs) are bit-identical, and recomputes whatever differs."""

    def __init__(self, model, heads, eps, cache):
        self.w, self.heads, self.eps = reference.load_safetensors(model), heads, eps
        h = hashlib.sha256()
        for path in (model, reference.__file__):
            with open(path, "rb") as f:
                h.update(f.read())
        h.update(f"{heads} {eps!r} {torch.__version__} float64 softmax v1".encode())
        self.prefix, self.memo, self.cache = h.digest(), {}, cache
        self.computed = self.reused = 0

    def __call__(self, xs):
        xs = [np.ascontiguousarray(x, dtype=np.float64) for x in xs]
        keys = [hashlib.sha256(self.prefix + repr(x.shape).encode() + x.tobytes()).hexdigest()
                for x in xs]
        for k in keys:
            if k not in self.memo and self.cache:
                try:
                    self.memo[k] = np.load(os.path.join(self.cache, k + ".npy"))
                    self.reused += 1
                except (OSError, ValueError):
                    pass
        todo = list({k: x for k, x in zip(keys, xs) if k not in self.memo}.items())
        for i in range(0, len(todo), 16):  # batches of 16: the attention of 64 DeiT passes is 0.7 GB
            chunk = todo[i:i + 16]
            with torch.no_grad():
                logits, _ = reference.vit_forward(self.w, np.stack([x for _, x in chunk]),
                                                  self.heads, ln_eps=self.eps)
            for (k, _), p in zip(chunk, torch.softmax(logits, 1).numpy()):
                self.memo[k] = p
                self.computed += 1
                if self.cache:
                    try:
                        tmp = os.path.join(self.cache, f"{k}.{os.getpid()}.tmp.npy")
                        np.save(tmp, p)
                        os.replace(tmp, os.path.join(self.cache, k + ".npy"))
                    except OSError:
                        pass
        return [self.memo[k] for k in keys]


def curves(probs, x, m, target, cfg, steps, reverse=False, only=None):
    """{test: [(prob, top1), ...]} for map m [N] on input x [3, Sh, Sw], deletion and
    insertion in `steps` steps; with `only` (a function of n_steps giving step indices)
    just those steps of each curve."""
    P, gw, N = cfg["P"], cfg["gw"], cfg["gh"] * cfg["gw"]
    out, bl = {}, blur(x)
    for test in ("positive", "negative", "deletion", "insertion"):
        n_steps = PERTURB_STEPS if test in ("positive", "negative") else steps
        o = order(m, (test != "negative") != reverse)
        base, fill = (bl, x) if test == "insertion" else (x, None)
        picked = only(n_steps) if only else range(n_steps + 1)
        p = probs([mix(base, fill, o, count(s, n_steps, N), P, gw) for s in picked])
        out[test] = [(pi[target], int(np.argmax(pi)) == target) for pi in p]
    return out


def patch_sum(m, cfg):
    P = cfg["P"]
    return m.reshape(cfg["gh"], P, cfg["gw"], P).sum(axis=(1, 3)).ravel()


# --- checks ---------------------------------------------------------------------------

def dump(args, model, photo, out, extra=()):
    r = subprocess.run([args.dump, "--model", model, "--image", photo, "--out", out, *extra],
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"vit_dump failed: {r.stderr}")
    with open(os.path.join(out, "config.json")) as f:
        c = json.load(f)
    return {"P": c["patch_size"], "gh": c["grid_h"], "gw": c["grid_w"], "heads": c["n_heads"]}


def check_curves(args, model, heads, eps, photo, image_index, rows, methods, tol, label,
                 steps=STEPS):
    """The curves of `methods` ({tag: map file in --export, or a baseline}) on one photo
    against the reference, and the negative control (the order reversed); deletion and
    insertion in `steps` steps (the --eval-steps of the run that made `rows`). Returns
    the --export folder."""
    d = tempfile.mkdtemp(dir=args.work)
    cfg = dump(args, model, photo, d)
    x = np.load(os.path.join(d, "input.npy"))
    ex = os.path.join(d, "export")
    r = vitlens(args.app, "--model", model, "--export", ex, photo)
    check(r.returncode == 0, f"{label}: --export for the maps ({r.stderr.strip()[:200]})")
    probs = Probs(model, heads, eps, args.cache)
    gh, gw = cfg["gh"], cfg["gw"]
    target = None
    for tag, src in methods.items():
        if src == "random":
            m = splitmix_map(gh * gw, 0x5EED + image_index)
        elif src == "gaussian":
            m = gaussian_map(gh, gw)
        else:
            m = np.load(os.path.join(ex, src)).astype(np.float32)
            m = patch_sum(m, cfg) if m.shape != (gh, gw) else m.ravel()
        mine = [q for q in rows if q["method"] == tag and int(q["image"]) == image_index]
        if target is None:
            target = int(re.search(r"class(\d+)", " ".join(os.listdir(ex))).group(1))
        ref = curves(probs, x, m, target, cfg, steps)
        worst, top_bad, n = 0.0, 0, 0
        for test, pts in ref.items():
            got = sorted((q for q in mine if q["test"] == test), key=lambda q: int(q["step"]))
            check(len(got) == len(pts), f"{label}, {tag}, {test}: {len(got)} points")
            for q, (p, top1) in zip(got, pts):
                worst = max(worst, abs(float(q["prob"]) - p))
                top_bad += int(q["top1_kept"]) != top1
                n += 1
        check(worst <= tol and top_bad == 0,
              f"{label}, {tag}: {n} points against a float64 PyTorch pass on the perturbed "
              f"inputs, max |prob diff| {worst:.2e} (tolerance {tol:g}), top-1 flags differ: {top_bad}")
        # negative control: perturbing in the wrong order, at a quarter, half and three
        # quarters of each curve (the ends are the same in either order)
        picks = lambda n: (n // 4, n // 2, 3 * n // 4)
        bad = curves(probs, x, m, target, cfg, steps, reverse=True, only=picks)
        far = 0.0
        for test, pts in bad.items():
            got = sorted((q for q in mine if q["test"] == test), key=lambda q: int(q["step"]))
            n_steps = len(got) - 1
            for s, (p, _) in zip(picks(n_steps), pts):
                far = max(far, abs(float(got[s]["prob"]) - p))
        check(far > 20 * tol, f"{label}, {tag}: the reversed order is {far:.3f} away (> 20 x tolerance)")
    print(f"     ({probs.computed} reference passes computed, {probs.reused} from {args.cache})")
    return ex


def table_of(text):
    """{method name: [cells]} from the markdown table."""
    out = {}
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("| method") and "---" not in line:
            cells = [c.strip() for c in line.strip("|").split("|")]
            out[cells[0]] = cells[1:]
    return out


def check_table(text, rows, names, label):
    """The AUC columns of the table from the CSV rows (numpy.trapz), to the table's decimals."""
    tab, worst = table_of(text), 0.0
    by = {}
    for q in rows:
        by.setdefault((q["method"], q["test"], q["image"]), []).append(q)
    for tag, name in names.items():
        cols = {}
        for (mt, test, _), qs in by.items():
            if mt != tag:
                continue
            qs.sort(key=lambda q: int(q["step"]))
            y = np.array([float(q["prob"]) for q in qs])
            t = np.array([float(q["top1_kept"]) for q in qs])
            dx = 1.0 / (len(qs) - 1)
            cols.setdefault(test, []).append((100 * np.trapz(y, dx=dx), 100 * np.trapz(t, dx=dx)))
        want = [np.mean([a[1] for a in cols["positive"]]), np.mean([a[1] for a in cols["negative"]]),
                np.mean([a[0] for a in cols["positive"]]), np.mean([a[0] for a in cols["negative"]]),
                np.mean([a[0] for a in cols["deletion"]]), np.mean([a[0] for a in cols["insertion"]])]
        got = [float(c) for c in tab[name][:6]]
        worst = max(worst, max(abs(a - b) for a, b in zip(want, got)))
    check(worst <= 0.05 + 1e-9, f"{label}: the table's AUCs equal numpy.trapz over the CSV rows "
          f"to its 0.1 (max diff {worst:.3f})")


def check_sanity_column(text, rows, names, label):
    """The sanity column: Spearman rho averaged over the images per step, then over the steps."""
    tab, worst = table_of(text), 0.0
    for tag, name in names.items():
        by_step = {}
        for q in rows:
            if q["method"] == tag:
                by_step.setdefault(int(q["blocks_randomised"]), []).append(float(q["spearman"]))
        if not by_step:
            continue
        want = np.mean([np.mean(v) for v in by_step.values()])
        cell = tab[name][9]
        worst = max(worst, abs(want - float(cell.split()[0])))
        flagged = "(!)" in cell
        check(flagged == (want >= 0.5), f"{label}: {name}'s sanity cell {cell!r} flagged iff rho >= 0.5")
    check(worst <= 0.0005 + 1e-9, f"{label}: the sanity column equals the CSV's rho averaged over "
          f"images and steps (max diff {worst:.4f})")


def check_localisation(loc, masks, maps, label):
    """Pointing game, energy and top-k IoU from the masks and maps, numpy."""
    worst, n = 0.0, 0
    for q in loc:
        key = (int(q["image"]), q["method"])
        if key not in maps:
            continue
        m, pm = maps[key], masks[int(q["image"])]
        top = m == m.max()
        point = (top & pm).sum() / top.sum()
        pos = np.maximum(m.astype(np.float64), 0)
        energy = pos[pm].sum() / pos.sum()
        k = int(pm.sum())
        sel = np.zeros(m.size, bool)
        sel[order(m, True)[:k]] = True
        iou = (sel & pm).sum() / (sel | pm).sum()
        for a, b in ((point, q["pointing"]), (energy, q["energy"]), (iou, q["topk_iou"])):
            worst = max(worst, abs(a - float(b)))
        n += 1
    check(n > 0 and worst < 1e-9, f"{label}: {n} localisation rows against numpy, max diff {worst:.1e}")


def builtin(args):
    default = os.path.join(os.path.dirname(__file__), "..", "..", "assets", "default")
    model = os.path.join(default, "model.safetensors")
    work = args.work
    n = args.count  # scenes (at least 3: two have their curves checked, the shards take 3)
    scenes = os.path.join(work, "scenes")
    shutil.rmtree(scenes, ignore_errors=True)
    subprocess.run([sys.executable, args.scenes, "--split", "test", "--count", str(n), "--out", scenes],
                   check=True, capture_output=True)
    os.remove(os.path.join(scenes, "scenes.txt"))
    with open(os.path.join(scenes, "broken.png"), "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n not really")
    photos = sorted(p for p in os.listdir(scenes) if p.endswith(".png") and "_mask" not in p)
    whole = os.path.join(work, "whole")
    shutil.rmtree(whole, ignore_errors=True)
    r = vitlens(args.app, "--eval", scenes, "--masks", scenes, "--eval-out", whole)
    check(r.returncode == 0, f"--eval on a folder of {n} scenes and a broken file ({r.stderr.strip()[-300:]})")
    check(f"{n} images evaluated, 1 skipped; {n} with a mask" in r.stdout,
          f"the summary counts {n} evaluated, 1 skipped, {n} masks")
    check("broken.png" in r.stdout and "broken.png" in r.stderr,
          "the broken file is named on stderr and under the table")
    rows = read_csv(os.path.join(whole, "perturbation.csv"))
    images = read_csv(os.path.join(whole, "images.csv"))
    check([q["path"].endswith(p) for q, p in zip(images, photos)] == [True] * len(photos),
          "images.csv lists the images in name order, masks left out")
    tab = table_of(r.stdout)
    # every map kind of the table (vitlens --list-kinds) that the built-in model offers (it
    # has a classifier, no MAP head: NEEDS, the 6th column) but the PCA's colours, which
    # have no order of patches to remove
    tags = [f[0] for f in (ln.split("\t") for ln in
            subprocess.run([args.app, "--list-kinds"], capture_output=True, text=True,
                           check=True).stdout.splitlines()) if f[5] in ("-", "classifier")]
    K = len([t for t in tags if t != "pca"])
    check(len(tab) == K + 2, f"{K + 2} methods: {K} map kinds (not the PCA's colours) and 2 "
          f"baselines: {list(tab)}")
    heads, L = 4, 4
    maps_of = {"attention": f"L{L:02d}_mean.npy", "rollout": f"L{L:02d}_rollout.npy",
               "chefer": "class{c}_chefer.npy", "attnlrp": "class{c}_attnlrp.npy",
               "flow": f"L{L:02d}_flow.npy", "random": "random", "gaussian": "gaussian"}
    exported = {}  # image index: its --export folder
    for i in (1, max(2, n - 2)):  # image 0 is broken.png; two scenes (1 and 4 of 6)
        photo = os.path.join(scenes, photos[i])
        c = int(images[i]["class"])
        methods = {t: f.format(c=c) for t, f in maps_of.items()}
        exported[i] = check_curves(args, model, heads, 1e-6, photo, i, rows, methods, 1e-5,
                                   f"built-in, {photos[i]}")
    names = {t: n for t, n in (("attention", "attention"), ("rollout", "rollout"),
                               ("chefer", "Chefer et al."), ("random", "random (baseline)"),
                               ("gaussian", "centred Gaussian (baseline)"), ("flow", "attention flow"))}
    check_table(r.stdout, rows, names, "built-in")
    # localisation: masks through the crop (the built-in model's is the whole 96 px scene)
    masks, maps = {}, {}
    for i, p in enumerate(photos):
        if p == "broken.png":
            continue
        mk = np.array(Image.open(os.path.join(scenes, p[:-4] + "_mask.png")).convert("RGB"))[..., 0] >= 128
        masks[i] = mk.reshape(12, 8, 12, 8).mean(axis=(1, 3)).ravel() >= 0.5
        d = exported.get(i) or os.path.join(work, f"ex{i}")  # the same command: reuse its maps
        if i not in exported:
            vitlens(args.app, "--export", d, os.path.join(scenes, p))
        c = int(images[i]["class"])
        maps[(i, "attention")] = np.load(os.path.join(d, f"L{L:02d}_mean.npy")).ravel()
        maps[(i, "chefer")] = np.load(os.path.join(d, f"class{c}_chefer.npy")).ravel()
        maps[(i, "gaussian")] = gaussian_map(12, 12)
    check_localisation(read_csv(os.path.join(whole, "localisation.csv")), masks, maps, "built-in")
    # the sanity check
    san = read_csv(os.path.join(whole, "sanity.csv"))
    kinds = {q["method"] for q in san}
    check("random" not in kinds and "gaussian" not in kinds and kinds == set(tags) - {"pca"},
          f"sanity rows for the {K} map kinds, not the baselines ({sorted(kinds)})")
    check(len(san) == n * K * (L + 1), f"sanity: {n} images x {K} kinds x {L + 1} steps ({len(san)} rows)")
    agnostic = ("attention", "rollout", "similarity", "norms", "flow", "tokenrank", "entropy")
    head_only = [float(q["spearman"]) for q in san if q["blocks_randomised"] == "0" and q["method"] in agnostic]
    check(min(head_only) > 1 - 1e-12,
          f"sanity: with only the head re-initialised, the class-agnostic maps are unchanged (min rho {min(head_only):.15f})")
    cls0 = [float(q["spearman"]) for q in san if q["blocks_randomised"] == "0" and q["method"] == "chefer"]
    check(np.mean(cls0) < 0.99, f"sanity: Chefer et al.'s map changes with the head (mean rho {np.mean(cls0):.3f})")
    att_all = [float(q["spearman"]) for q in san if q["blocks_randomised"] == str(L) and q["method"] == "attention"]
    check(np.mean(att_all) < 0.9, f"sanity: attention changes once every block is re-initialised (mean rho {np.mean(att_all):.3f})")
    check_sanity_column(r.stdout, san, names, "built-in")
    # the plots
    for name in ("positive", "negative", "deletion", "insertion", "sanity"):
        path = os.path.join(whole, name + ".png")
        ok = os.path.exists(path)
        if ok:
            im = np.array(Image.open(path).convert("RGB"))
            colours = len(np.unique(im.reshape(-1, 3), axis=0))
            ok = im.shape == (640, 1100, 3) and colours > 50
        check(ok, f"{name}.png: a 1100 x 640 plot with lines in colour")
    # shards merged equal the whole run. The shards are made by the README's GNU parallel
    # command, on this machine (--sshlogin ':'), or one after the other without it
    pdir = os.path.join(work, "shards")
    shutil.rmtree(pdir, ignore_errors=True)
    os.makedirs(pdir)
    if shutil.which("parallel"):
        rp = subprocess.run(["parallel", "--sshlogin", ":", "--jobs", "1", args.app, "--eval", scenes,
                             "--masks", scenes, "--shard", "{}/3", "--eval-out", pdir + "/shard{}",
                             ":::", "1", "2", "3"], capture_output=True, text=True, timeout=1200)
        check(rp.returncode == 0, f"GNU parallel over 3 shards ({rp.stderr.strip()[-200:]})")
    else:
        print("skip: GNU parallel is not installed (scripts/install-deps.sh installs it)")
        for k in (1, 2, 3):
            rk = vitlens(args.app, "--eval", scenes, "--masks", scenes, "--shard", f"{k}/3",
                         "--eval-out", os.path.join(pdir, f"shard{k}"))
            check(rk.returncode == 0, f"--shard {k}/3 ({rk.stderr.strip()[-200:]})")
    shards = [os.path.join(pdir, f"shard{k}") for k in (1, 2, 3)]
    merged = os.path.join(work, "merged")
    shutil.rmtree(merged, ignore_errors=True)
    rm = vitlens(args.app, "--eval-merge", *shards, "--eval-out", merged)
    check(rm.returncode == 0 and rm.stdout == r.stdout,
          f"--eval-merge of 3 shards prints the whole run's table ({rm.stderr.strip()})")
    for f in ("summary.md", "images.csv", "perturbation.csv", "localisation.csv", "sanity.csv"):
        with open(os.path.join(merged, f), "rb") as a, open(os.path.join(whole, f), "rb") as b:
            check(a.read() == b.read(), f"merged {f} equals the whole run's")
    rm = vitlens(args.app, "--eval-merge", shards[0], shards[0])
    check(rm.returncode == 1 and "two shards" in rm.stderr, f"a shard given twice is refused ({rm.stderr.strip()})")
    rm = vitlens(args.app, "--eval-merge", scenes)
    check(rm.returncode == 1 and "eval.csv" in rm.stderr, f"a folder that is not an --eval-out ({rm.stderr.strip()})")
    # a mask of the wrong size: reported, that image's localisation skipped
    bad = os.path.join(work, "badmasks")
    shutil.rmtree(bad, ignore_errors=True)
    shutil.copytree(scenes, bad)
    Image.new("L", (50, 40), 255).save(os.path.join(bad, photos[1][:-4] + "_mask.png"))
    d = os.path.join(work, "badmask_out")
    # (--eval-steps 2, the fewest: the curves are not what this run checks)
    rb = vitlens(args.app, "--eval", os.path.join(scenes, photos[2]), os.path.join(scenes, photos[1]),
                 "--masks", bad, "--no-sanity", "--eval-steps", "2", "--eval-out", d)
    im = read_csv(os.path.join(d, "images.csv")) if rb.returncode == 0 else []
    check(rb.returncode == 0 and "50 x 40" in rb.stderr and len(im) == 2 and im[1]["mask"] == "-1"
          and "1 with a mask" in rb.stdout,
          f"a mask of the wrong size is reported and skipped, the run goes on ({rb.stderr.strip()[:200]})")
    loc_imgs = {q["image"] for q in read_csv(os.path.join(d, "localisation.csv"))} if im else set()
    check(loc_imgs == {"0"}, f"only the image with a fitting mask has localisation rows ({loc_imgs})")
    check(not read_csv(os.path.join(d, "sanity.csv")) if im else False, "--no-sanity: no sanity rows")
    # usage
    for argv, want in ((["--eval"], "needs"), (["--eval", scenes, "--shard", "0/3"], "K/N"),
                       (["--eval", scenes, "--shard", "4/3"], "K/N"),
                       (["--eval", scenes, "--eval-steps", "1"], "2 to 1000"),
                       (["--masks", scenes, photos[1]], "--masks goes with --eval"),
                       (["--eval", scenes, "--top", "3"], "one at a time")):
        ru = vitlens(args.app, *argv)
        check(ru.returncode == 2 and want in ru.stderr, f"usage: {' '.join(argv[:3])}: exit 2, '{want}'")
    # progress bar on a terminal
    two = os.path.join(work, "two")  # two photos and the broken file: 3 to go
    shutil.rmtree(two, ignore_errors=True)
    os.makedirs(two)
    for p in ("broken.png", photos[1], photos[2]):
        shutil.copy(os.path.join(scenes, p), two)
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(args.app, [args.app, "--eval", two, "--eval-steps", "2"])  # the fewest steps
    out = b""
    while True:
        try:
            rd, _, _ = select.select([fd], [], [], 600)
            chunk = os.read(fd, 4096) if rd else b""
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    check(re.search(rb"images +\[#+\.*\] \d+/3", out) is not None and b"sanity" in out,
          "on a terminal, a progress bar on stderr (images, then the sanity check)")


def deit(args):
    model = os.path.join(args.shared, "models", "deit-tiny", "deit_tiny_patch16_224.safetensors")
    photo = os.path.join(args.shared, "images", "chelsea.png")
    if not os.path.exists(model) or not os.path.exists(photo):
        print("skip: no DeiT-Tiny or photo in", args.shared)
        return 77
    d = os.path.join(args.work, "deit")
    shutil.rmtree(d, ignore_errors=True)
    # --eval-steps 8, not the default 20 (the built-in model's run checks that): the
    # same code with 40% fewer passes, a step count apart from positive/negative's 10
    # (a mix-up of the two shows), and 196 patches / 8 = 24.5 per step, so odd steps
    # check count()'s round half up, which 196 / 20 never reaches
    r = vitlens(args.app, "--model", model, "--eval", photo, "--no-sanity", "--eval-steps", "8",
                "--eval-out", d)
    check(r.returncode == 0, f"DeiT-Tiny --eval ({r.stderr.strip()[-300:]})")
    rows = read_csv(os.path.join(d, "perturbation.csv"))
    c = int(read_csv(os.path.join(d, "images.csv"))[0]["class"])
    check_curves(args, model, 3, 1e-6, photo, 0, rows,
                 {"attention": "L12_mean.npy", "chefer": f"class{c}_chefer.npy",
                  "grad-input": f"class{c}_grad-input.npy", "tokenrank": "L12_tokenrank.npy"},
                 2e-5, "DeiT-Tiny, chelsea.png", steps=8)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--scenes", required=True)
    ap.add_argument("--shared", default="")
    ap.add_argument("--work", required=True)
    ap.add_argument("--deit", action="store_true")
    ap.add_argument("--count", type=int, default=6,
                    help="scenes for the built-in model's run (3 under the sanitizers)")
    ap.add_argument("--cache", default=os.environ.get("VITLENS_TEST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "vitlens", "test-reference"),
        help="where the reference's results are kept (class Probs; 'none': nowhere)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if args.cache == "none":
        args.cache = None
    else:
        try:
            os.makedirs(args.cache, exist_ok=True)
        except OSError as e:
            print(f"note: no reference cache ({e})")
            args.cache = None
    torch.set_num_threads(1)
    rc = deit(args) if args.deit else builtin(args)
    if rc == 77:
        return 77
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
