#!/usr/bin/python3
"""The interventions on the command line (--ablate, --drop-patches, --fill-patches,
--pos-embed, --pos-seed, --temperature): what --top prints and --export writes equal
vit_dump run with the same intervention in the engine's 0-based terms (so the options
reach the engine with layers, heads, rows and columns counted from 1 as on screen), a
dropped patch is NaN in the .npy files, --eval runs the intervened model, and every bad
value is an error naming its option. On the built-in model (no display, no shared/).

  /usr/bin/python3 test_cli_interv.py --app build/vitlens --dump build/tests/parity/vit_dump \
      --model assets/default/model.safetensors --image assets/default/demo/X.png --out DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

failures = 0


def check(cond, what):
    global failures
    print(f"{'ok  ' if cond else 'FAIL'} {what}", flush=True)
    failures += not cond


XDG = tempfile.mkdtemp(prefix="vitlens-interv-xdg-")


def vitlens(app, *args):
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(XDG, "c"), XDG_DATA_HOME=os.path.join(XDG, "d"))
    env.pop("DISPLAY", None)
    env.pop("VITLENS_MODELS_DIR", None)
    return subprocess.run([app, *map(str, args)], capture_output=True, text=True, env=env, timeout=600)


def dump(a, out, *flags):
    shutil.rmtree(out, ignore_errors=True)
    r = subprocess.run([a.dump, "--model", a.model, "--image", a.image, "--out", out, *flags],
                       capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise RuntimeError(r.stderr)
    return {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".npy")}, \
        json.load(open(os.path.join(out, "config.json")))


def top(a, *flags):
    r = vitlens(a.app, "--model", a.model, "--top", 5, *flags, a.image)
    rows = [ln.split(" ", 3) for ln in r.stdout.splitlines()]
    return r, [(int(x[2]), float(x[1])) for x in rows if len(x) >= 3]


def main():
    ap = argparse.ArgumentParser()
    for k in ("app", "dump", "model", "image", "out"):
        ap.add_argument("--" + k, required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    _, cfg = dump(a, os.path.join(a.out, "plain"))
    L, H, gh, gw = cfg["n_layers"], cfg["n_heads"], cfg["grid_h"], cfg["grid_w"]
    print(f"model: L={L} H={H} grid {gh}x{gw}")

    # --- the options reach the engine, 1-based -> 0-based --------------------------------
    cases = [
        ("--ablate 1:1,L:H", ["--ablate", f"1:1,{L}:{H}"], ["--ablate", f"0:0,{L - 1}:{H - 1}"]),
        ("--drop-patches", ["--drop-patches", f"1,1;{gh},{gw - 1};3,2"],
         ["--drop", f"0,{(gh - 1) * gw + gw - 2},{2 * gw + 1}"]),
        ("--fill-patches", ["--fill-patches", f"2,3;{gh},1"], ["--fill", f"{gw + 2},{(gh - 1) * gw}"]),
        ("--pos-embed shuffle --pos-seed 7", ["--pos-embed", "shuffle", "--pos-seed", "7"],
         ["--pos", "shuffle:7"]),
        ("--pos-embed shuffle (seed 0)", ["--pos-embed", "shuffle"], ["--pos", "shuffle:0"]),
        ("--pos-embed zero", ["--pos-embed", "zero"], ["--pos", "zero"]),
        ("--temperature", ["--temperature", f"{L}:0.25"], ["--temp", f"{L - 1}:0.25"]),
    ]
    plain_r, plain_top = top(a)
    for name, opts, dflags in cases:
        r, got = top(a, *opts)
        eng, _ = dump(a, os.path.join(a.out, "d"), *dflags)
        want = [(int(i), float(eng["probs"][i])) for i in np.argsort(-eng["probs"], kind="stable")[:5]]
        ok = r.returncode == 0 and [g[0] for g in got] == [w[0] for w in want] and \
            all(abs(g[1] - w[1]) <= 6e-5 for g, w in zip(got, want))
        check(ok, f"--top {name}: {got[:2]} = vit_dump's {[(i, round(p, 4)) for i, p in want[:2]]}")
        check(got != plain_top, f"--top {name}: not the plain model's prediction")

    # --- --export: a dropped patch is NaN, the rest vit_dump's --------------------------
    ex = os.path.join(a.out, "export")
    shutil.rmtree(ex, ignore_errors=True)
    r = vitlens(a.app, "--model", a.model, "--drop-patches", f"2,2;{gh},{gw}", "--ablate", "1:1",
                "--export", ex, a.image)
    check(r.returncode == 0, f"--export with --drop-patches and --ablate exits 0 ({r.stderr.strip()[:200]})")
    eng, _ = dump(a, os.path.join(a.out, "d"), "--drop", f"{gw + 1},{gh * gw - 1}", "--ablate", "0:0")
    m = np.load(os.path.join(ex, f"L{L:02d}_H01.npy")) if r.returncode == 0 else np.zeros((gh, gw))
    nan = np.isnan(m)
    want_nan = np.zeros((gh, gw), bool)
    want_nan[1, 1] = want_nan[gh - 1, gw - 1] = True
    check((nan == want_nan).all(), f"L{L:02d}_H01.npy: NaN exactly at the dropped patches (2,2) and ({gh},{gw})")
    ref = eng["cls_att"][L - 1, 0].reshape(gh, gw)
    d = float(np.abs(np.where(nan, 0, m) - np.where(nan, 0, ref)).max())
    check(d <= 1e-6, f"L{L:02d}_H01.npy elsewhere = vit_dump's CLS attention (max diff {d:.1e})")
    check(os.path.exists(os.path.join(ex, f"L{L:02d}_H01.png")), "the PNG is written beside it")

    # --- --export's head importance table and pruning curve ------------------------------
    # on the intervened model of the export above: vit_dump's, to the CSV's 7 decimals
    eng, _ = dump(a, os.path.join(a.out, "d"), "--drop", f"{gw + 1},{gh * gw - 1}", "--ablate", "0:0",
                  "--importance", "-1:3")
    try:
        rows = np.genfromtxt(os.path.join(ex, "head_importance.csv"), delimiter=",", skip_header=2)
        pr = np.genfromtxt(os.path.join(ex, "head_pruning.csv"), delimiter=",", skip_header=1)
    except OSError as e:
        rows, pr = np.zeros((0, 4)), np.zeros((0, 5))
        check(False, f"head_importance.csv, head_pruning.csv: {e}")
    ok = rows.shape == (L * H, 4) and (rows[:, 0] == np.repeat(np.arange(1, L + 1), H)).all() and \
        (rows[:, 1] == np.tile(np.arange(1, H + 1), L)).all()
    d = float(np.abs(rows[:, 2] - eng["importance"].reshape(-1)).max()) if ok else 1.0
    check(ok and d <= 2e-6, f"head_importance.csv: {L}x{H} rows, layer and head from 1, "
          f"= vit_head_importance's (max diff {d:.1e}); head 1:1 (ablated already) 0: "
          f"{rows[0, 2] if ok else None}")
    ok = pr.shape == (L * H + 1, 5) and (pr[:, 0] == np.arange(L * H + 1)).all()
    d = float(np.abs(pr[:, 4] - eng["prune"]).max()) if ok else 1.0
    order = (pr[1:, 2] - 1) * H + (pr[1:, 3] - 1) if ok else None
    check(ok and d <= 2e-6 and (order == eng["order"]).all(),
          f"head_pruning.csv: {L * H + 1} rows, the heads in vit_head_pruning's order, its "
          f"probabilities (max diff {d:.1e})")

    # --- --eval on the intervened model ------------------------------------------------
    ev = os.path.join(a.out, "eval")
    shutil.rmtree(ev, ignore_errors=True)
    r = vitlens(a.app, "--model", a.model, "--eval", "--no-sanity", "--eval-steps", 2, "--fill-patches",
                "1,1", "--ablate", "1:1", "--eval-out", ev, a.image)
    check(r.returncode == 0 and os.path.exists(os.path.join(ev, "summary.md")),
          f"--eval with --fill-patches and --ablate runs ({r.stderr.strip()[-200:]})")
    r = vitlens(a.app, "--model", a.model, "--eval", "--drop-patches", "1,1", a.image)
    check(r.returncode == 2 and "--drop-patches" in r.stderr and "--eval" in r.stderr,
          f"--eval refuses --drop-patches: {r.stderr.strip()}")

    # --- bad input: an error naming the option ------------------------------------------
    all_patches = ";".join(f"{i},{j}" for i in range(1, gh + 1) for j in range(1, gw + 1))
    bad = [
        (["--ablate", f"{L + 1}:1"], "--ablate", f"layer {L + 1}"),
        (["--ablate", f"1:{H + 1}"], "--ablate", f"head {H + 1}"),
        (["--ablate", "0:1"], "--ablate", "from 1"),
        (["--ablate", ""], "--ablate", "empty set"),
        (["--ablate", ","], "--ablate", "expected L:H"),
        (["--ablate", "1:1,"], "--ablate", "expected L:H"),
        (["--ablate", "1-1"], "--ablate", "expected L:H"),
        (["--drop-patches", f"{gh + 1},1"], "--drop-patches", "outside"),
        (["--drop-patches", f"1,{gw + 1}"], "--drop-patches", "outside"),
        (["--drop-patches", ""], "--drop-patches", "empty set"),
        (["--drop-patches", "1;1"], "--drop-patches", "expected R,C"),
        (["--drop-patches", all_patches], "--drop-patches", "every one of"),
        (["--fill-patches", "0,1"], "--fill-patches", "from 1"),
        (["--fill-patches", ""], "--fill-patches", "empty set"),
        (["--pos-embed", "random"], "--pos-embed", "shuffle or zero"),
        (["--pos-seed", "-3"], "--pos-seed", "non-negative"),
        (["--temperature", "1:0"], "--temperature", "> 0"),
        (["--temperature", "1:-2"], "--temperature", "> 0"),
        (["--temperature", "1:nan"], "--temperature", "> 0"),
        (["--temperature", "2"], "--temperature", "expected L:TAU"),
        (["--temperature", f"{L + 1}:2"], "--temperature", f"layer {L + 1}"),
        (["--temperature", "0:2"], "--temperature", "from 1"),
    ]
    for opts, opt, words in bad:
        r = vitlens(a.app, "--model", a.model, "--top", 3, *opts, a.image)
        err = r.stderr.strip()
        check(r.returncode == 2 and opt in err and words in err and not r.stdout and
              "Traceback" not in err, f"{' '.join(opts)[:40]}: exit {r.returncode}, \"{err[:120]}\"")
    # the same kind of bad value, the same exit status, in every mode: one that does not
    # fit the model (checked once it is loaded) is bad usage as one that cannot parse
    for mode in (["--top", 3], ["--eval"], []):  # [] : the window, refused before it opens
        for opts, words in ((["--ablate", f"{L + 1}:1"], f"layer {L + 1}"), (["--ablate", "0:1"], "from 1")):
            r = vitlens(a.app, "--model", a.model, *mode, *opts, a.image)
            check(r.returncode == 2 and words in r.stderr,
                  f"{' '.join(map(str, mode)) or 'the window'} {' '.join(opts)}: exit {r.returncode} (2), "
                  f"\"{r.stderr.strip()[:100]}\"")
    r = vitlens(a.app, "--eval-merge", "--ablate", "1:1", a.out)
    check(r.returncode == 2 and "--eval-merge" in r.stderr, f"--eval-merge refuses interventions: {r.stderr.strip()}")
    shutil.rmtree(XDG, ignore_errors=True)
    print(f"\n{failures} failure(s)" if failures else "\nall checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
