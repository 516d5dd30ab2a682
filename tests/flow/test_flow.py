"""test_flow.py - attention flow (engine/maps/flow.c; Abnar & Zuidema 2020, "Quantifying
Attention Flow in Transformers", §3) against networkx's maximum flow.

    /usr/bin/python3 test_flow.py graphs --dump flow_dump --work DIR
    /usr/bin/python3 test_flow.py random --dump flow_dump --work DIR
    /usr/bin/python3 test_flow.py deit   --dump flow_dump --work DIR --shared SHARED

The reference: a networkx DiGraph built here, node (l, i) for token i at level l
(level 0 the input tokens, level l + 1 the tokens after block l), an edge (l, j) ->
(l + 1, i) of capacity cap[l, i, j] for every i, j (zeros included), and
nx.maximum_flow_value((0, j), (L, query)) (preflow-push) for each input token j. The
attention capacities, in float64 from the engine's own attention (att.f32):
cap[l] = rownorm(0.5 * mean_h att[l, h] + 0.5 * I), as the paper's code
(samiraabnar/attention_flow, get_flow_relevance) makes them.

graphs: vit_max_flow_layers (flow_dump caps) on random graphs: 1 to 6 layers, 1 to 24
        tokens, uniform capacities with a share of zeros, sparse ones, small integers
        (many equal paths), attention-like rows, a single layer, one token, a layer of
        zeros, large and tiny scales; every input token, 1 and 2 threads the same bit
        for bit; bad capacities and arguments refused (exit 3, the message).
random: vit_attention_flow of the CLS token after every block (flow_dump model) of
        small random timm ViTs (1 to 6 layers, 5 to 145 tokens, 1 to 3 heads), every
        input token against networkx (a share of them when T > 40), the attention kept
        and recomputed giving the same flows bit for bit.
deit:   DeiT-Tiny on every photo in SHARED/images (exit 77 without SHARED): the CLS
        flow after the last block against networkx for 7 input tokens (the CLS token,
        the smallest, median and largest flow, three patches); a patch token's flow
        after block 3 on the same attention (where Dinic needs several phases) for 6;
        recomputed attention the same; the paper's observation that the flow map
        follows attention rollout (vit_rollout, mean fusion, no discard): Spearman and
        Pearson correlation over the patches after the last block, whose mean over the
        photos must be clearly positive (> CORR_MIN). Measured: astronaut 0.46 / 0.47,
        chelsea 0.70 / 0.67, coffee 0.74 / 0.67, rocket -0.29 / -0.25 (Spearman /
        Pearson; mean 0.40 / 0.39): not every photo. Why: after 12 blocks the CLS flow
        of input token j is min(1, its capacity out of level 0, sum_i cap[0, i, j]) for
        99 to 100% of the tokens (printed): the cut lies at the first block's edges,
        so the flow map is block 0's received attention, clipped at 1, while rollout
        also weighs the later blocks; on the rocket photo they part from block 5 on.
Tolerance: max |engine - networkx| <= 1e-6 (relative to the largest flow): the engine
returns float32 (6e-8 relative) of the max flow of float32 capacities, the reference
uses the float64 capacities. Measured: see the commit message / the printed maxima.
Negative controls (random and deit): flows through plausible mistakes, computed by
vit_max_flow_layers on wrong capacities, must be further than WRONG x the tolerance
from the engine's on some model: the capacities transposed (the edge j -> i carrying
j's attention to i), and the residual left out (cap = mean_h att).
"""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import networkx as nx
import numpy as np
import torch
from networkx.algorithms.flow import build_residual_network, preflow_push

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "parity"))
from test_parity import Report, random_weights, write_safetensors  # noqa: E402

TOL = 1e-6
WRONG = 20
CORR_MIN = 0.2  # flow vs rollout over the patches: the mean over the photos of Spearman, Pearson

torch.set_num_threads(1)


# --- the reference ------------------------------------------------------------------

def nx_graph(cap):
    """The layered DiGraph of cap [L, T, T] (cap[l, i, j]: (l, j) -> (l + 1, i))."""
    L, T, _ = cap.shape
    G = nx.DiGraph()
    for l in range(L):
        for i in range(T):
            for j in range(T):
                G.add_edge((l, j), (l + 1, i), capacity=float(cap[l, i, j]))
    return G


def nx_flows(cap, query, sources):
    """networkx's max flow from (0, j) to (L, query) for j in sources."""
    G = nx_graph(cap)
    L = cap.shape[0]
    R = build_residual_network(G, "capacity")  # reused: preflow_push resets it
    return np.array([nx.maximum_flow_value(G, (0, j), (L, query), flow_func=preflow_push,
                                           residual=R) for j in sources])


def attention_caps(att):
    """rownorm(0.5 mean_h att + 0.5 I), float64: [L, T, T]."""
    a = att.astype(np.float64).mean(axis=1)
    c = 0.5 * a + 0.5 * np.eye(a.shape[-1])
    return c / c.sum(axis=-1, keepdims=True)


def rel_err(got, want):
    return float(np.abs(np.asarray(got, np.float64) - want).max() / max(np.abs(want).max(), 1e-30))


# --- the engine ---------------------------------------------------------------------

def engine_caps(dump, work, cap, query, threads=2):
    """flow_dump caps: (exit code, out [T] or None, stderr)."""
    work.mkdir(parents=True, exist_ok=True)
    L, T, _ = cap.shape
    np.ascontiguousarray(cap, np.float32).tofile(work / "cap.f32")
    out = work / "out.f32"
    out.unlink(missing_ok=True)
    r = subprocess.run([dump, "caps", work / "cap.f32", str(L), str(T), str(query), str(threads),
                        out], capture_output=True, text=True)
    flows = np.fromfile(out, np.float32) if r.returncode == 0 else None
    return r.returncode, flows, r.stderr


def engine_model(dump, args, out):
    """flow_dump model: {att, flow, rollout} and the shapes."""
    out.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([dump, "model"] + [str(a) for a in args] + ["--out", str(out)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"flow_dump model {' '.join(map(str, args))} exited "
                           f"{r.returncode}:\n{r.stderr}")
    s = json.loads(r.stdout)
    L, H, T, N = s["L"], s["H"], s["T"], s["N"]
    res = {"flow": np.fromfile(out / "flow.f32", np.float32).reshape(L, T),
           "rollout": np.fromfile(out / "rollout.f32", np.float32).reshape(L, N)}
    if (out / "att.f32").exists():
        res["att"] = np.fromfile(out / "att.f32", np.float32).reshape(L, H, T, T)
    return res, s


# --- graphs -------------------------------------------------------------------------

def random_graph(rng, L, T, kind):
    if kind == "uniform":
        c = rng.random((L, T, T))
        c[rng.random(c.shape) < 0.3] = 0
    elif kind == "sparse":
        c = rng.random((L, T, T)) * (rng.random((L, T, T)) < 0.15)
    elif kind == "integer":
        c = rng.integers(0, 4, (L, T, T)).astype(np.float64)
    elif kind == "attention":
        s = np.exp(3 * rng.standard_normal((L, T, T)))
        c = 0.5 * s / s.sum(-1, keepdims=True) + 0.5 * np.eye(T)
    elif kind == "zero layer":
        c = rng.random((L, T, T))
        c[L // 2] = 0
    elif kind == "large":
        c = rng.random((L, T, T)) * 1e4
    elif kind == "tiny":
        c = rng.random((L, T, T)) * 1e-4
    return c.astype(np.float32)


def test_graphs(args, rep):
    rng = np.random.default_rng(14)
    work = Path(args.work)
    shapes = [(1, 1), (1, 6), (3, 1), (2, 2), (2, 5), (3, 4), (4, 7), (5, 9), (6, 6), (3, 16),
              (2, 24)]
    kinds = ["uniform", "sparse", "integer", "attention", "zero layer", "large", "tiny"]
    worst, n = 0.0, 0
    for L, T in shapes:
        for kind in kinds:
            q = int(rng.integers(0, T))
            cap = random_graph(rng, L, T, kind)
            rc, got, err = engine_caps(args.dump, work, cap, q)
            if not rep.check(rc == 0, f"L={L} T={T} {kind}: flow_dump exited {rc}: {err}"):
                continue
            want = nx_flows(cap.astype(np.float64), q, range(T))
            e = rel_err(got, want) if want.max() > 0 else float(np.abs(got).max())
            worst, n = max(worst, e), n + 1
            rep.check(e <= TOL, f"L={L} T={T} q={q} {kind}: error {e:.2e} > {TOL:.0e}\n"
                                f"    engine {got}\n    networkx {want}")
            _, got1, _ = engine_caps(args.dump, work, cap, q, threads=1)
            rep.check(np.array_equal(got, got1), f"L={L} T={T} {kind}: 1 and 2 threads differ")
    print(f"{n} graphs, every input token: max error against networkx {worst:.2e} "
          f"(tolerance {TOL:.0e})")

    cap = random_graph(rng, 2, 3, "uniform")
    for val, what in ((np.nan, "NaN"), (-0.25, "negative"), (np.inf, "infinite")):
        bad = cap.copy()
        bad[1, 2, 0] = val
        rc, _, err = engine_caps(args.dump, work, bad, 0)
        rep.check(rc == 3 and "capacity [1][2][0]" in err,
                  f"a {what} capacity: exit {rc}, expected 3 and the index: {err.strip()}")
    for q in (-1, 3):
        rc, _, err = engine_caps(args.dump, work, cap, q)
        rep.check(rc == 3 and f"query token {q} out of range [0, 3)" in err,
                  f"query {q}: exit {rc}: {err.strip()}")
    rc, _, err = engine_caps(args.dump, work, cap, 0, threads=0)
    rep.check(rc == 3 and "0 threads" in err, f"0 threads: exit {rc}: {err.strip()}")


# --- models -------------------------------------------------------------------------

# Small timm ViTs (tests/parity/test_parity.py's random_weights: peaked attention);
# heads D / 64. T = (S / P)^2 + 1.
MODELS = [
    dict(name="l1_t5", P=16, S=32, D=64, L=1, F=128, C=5),
    dict(name="l2_t17", P=16, S=64, D=128, L=2, F=256, C=10),
    dict(name="l4_t65", P=8, S=64, D=192, L=4, F=256, C=0),
    dict(name="l6_t37", P=8, S=48, D=128, L=6, F=256, C=3),
    dict(name="l3_t145", P=8, S=96, D=128, L=3, F=256, C=7),
]
MAX_SOURCES = 40  # networkx on more input tokens than this: a spread-out share of them


def write_model(m, work, seed):
    d = Path(work) / m["name"]
    d.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    write_safetensors(d / "model.safetensors", random_weights(m, g), "F32")
    x = torch.randn(3, m["S"], m["S"], generator=g)
    x.numpy().astype(np.float32).tofile(d / "input.f32")
    return d, ["--model", d / "model.safetensors", "--input", d / "input.f32"]


def sources_of(T, flow, rng, k=MAX_SOURCES):
    if T <= k:
        return list(range(T))
    picks = {0, int(np.argmin(flow)), int(np.argmax(flow)), int(np.argsort(flow)[T // 2])}
    picks |= set(int(j) for j in rng.choice(T, k - len(picks), replace=False))
    return sorted(picks)[:k]


def controls(dump, work, att, flow, layer, query, missed):
    """Flows through the mistakes (vit_max_flow_layers on wrong capacities): their
    distance to the engine's flow, per mistake, into missed."""
    good = attention_caps(att[:layer + 1])
    wrong = {"capacities transposed": good.transpose(0, 2, 1),
             "residual left out": att[:layer + 1].astype(np.float64).mean(axis=1)}
    for what, cap in wrong.items():
        rc, got, err = engine_caps(dump, work / "control", cap, query)
        if rc != 0:
            raise RuntimeError(f"control {what}: {err}")
        missed.setdefault(what, []).append(rel_err(flow, got))


def finish_controls(rep, missed):
    for what, ds in missed.items():
        print(f"control '{what}': largest distance {max(ds):.2e}")
        rep.check(max(ds) > WRONG * TOL,
                  f"control '{what}': never further than {WRONG} x {TOL:.0e} from the engine")


def test_random(args, rep):
    rng = np.random.default_rng(7)
    worst, missed = 0.0, {}
    for i, m in enumerate(MODELS):
        d, dargs = write_model(m, args.work, 1400 + i)
        t0 = time.time()
        res, s = engine_model(args.dump, dargs + ["--threads", 2], d / "keep")
        res2, _ = engine_model(args.dump, dargs + ["--threads", 2, "--att", "recompute"],
                               d / "recompute")
        rep.check(np.array_equal(res["flow"], res2["flow"]),
                  f"{m['name']}: the flow differs with the attention recomputed")
        caps = attention_caps(res["att"])
        L, T = s["L"], s["T"]
        errs = []
        for l in range(L):
            src = sources_of(T, res["flow"][l], rng)
            want = nx_flows(caps[:l + 1], 0, src)
            e = rel_err(res["flow"][l][src], want)
            errs.append(e)
            rep.check(e <= TOL, f"{m['name']}: flow after block {l}: error {e:.2e} > {TOL:.0e}")
            controls(args.dump, d, res["att"], res["flow"][l], l, 0, missed)
        rep.check(np.allclose(res["flow"][0], caps[0][0], rtol=0, atol=TOL),
                  f"{m['name']}: after block 0 the flow is not row 0 of the capacities")
        worst = max(worst, max(errs))
        print(f"  {m['name']}: L={L} T={T} H={s['H']}, {min(T, MAX_SOURCES)} input tokens per "
              f"layer, max error per layer {' '.join(f'{e:.1e}' for e in errs)} "
              f"({time.time() - t0:.1f} s)")
    print(f"\nmax error against networkx {worst:.2e} (tolerance {TOL:.0e})")
    finish_controls(rep, missed)


# --- DeiT-Tiny ----------------------------------------------------------------------

def ranks(x):
    """Ranks 0 .. n-1, ties given their mean rank (Spearman's rule)."""
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(len(x))
    for v in np.unique(x):
        tie = x == v
        if tie.sum() > 1:
            r[tie] = r[tie].mean()
    return r


def pearson(a, b):
    a, b = a - a.mean(), b - b.mean()
    return float(a @ b / np.sqrt((a @ a) * (b @ b)))


def test_deit(args, rep):
    shared = Path(args.shared) if args.shared else None
    model = shared / "models/deit-tiny/deit_tiny_patch16_224.safetensors" if shared else None
    photos = sorted(p for p in (shared / "images").glob("*")
                    if p.suffix.lower() in (".png", ".jpg", ".jpeg")) if shared else []
    if not model or not model.exists() or not photos:
        print(f"skip: no DeiT-Tiny weights or photos under '{args.shared}'")
        return 77
    rng = np.random.default_rng(3)
    worst, missed, corr = 0.0, {}, []
    for photo in photos:
        work = Path(args.work) / photo.stem
        dargs = ["--model", model, "--image", photo, "--threads", 2]
        t0 = time.time()
        res, s = engine_model(args.dump, dargs, work / "keep")
        res2, _ = engine_model(args.dump, dargs + ["--att", "recompute"], work / "recompute")
        rep.check(np.array_equal(res["flow"], res2["flow"]),
                  f"{photo.name}: the flow differs with the attention recomputed")
        L, T, Np = s["L"], s["T"], s["Np"]
        caps = attention_caps(res["att"])
        flow = res["flow"][L - 1]
        srt = np.argsort(flow, kind="stable")
        src = sorted({0, int(srt[0]), int(srt[T // 2]), int(srt[-1])} |
                     set(int(j) for j in rng.choice(np.arange(Np, T), 3, replace=False)))
        want = nx_flows(caps, 0, src)
        e_last = rel_err(flow[src], want)
        rep.check(e_last <= TOL, f"{photo.name}: CLS flow after block {L - 1}: error "
                                 f"{e_last:.2e} > {TOL:.0e}")
        # a patch token's flow after block 3, through vit_max_flow_layers on the same
        # capacities in float32 (several Dinic phases there)
        q = Np + 7 * 14 + 7
        rc, got, err = engine_caps(args.dump, work / "patch", caps[:4], q)
        if not rep.check(rc == 0, f"{photo.name}: flow_dump caps: {err}"):
            continue
        src4 = sorted({0, q, int(np.argmin(got)), int(np.argmax(got))} |
                      set(int(j) for j in rng.choice(np.arange(Np, T), 2, replace=False)))
        e_mid = rel_err(got[src4], nx_flows(caps[:4], q, src4))
        rep.check(e_mid <= TOL, f"{photo.name}: patch {q}'s flow after block 3: error "
                                f"{e_mid:.2e} > {TOL:.0e}")
        worst = max(worst, e_last, e_mid)
        controls(args.dump, work, res["att"], flow, L - 1, 0, missed)

        fp, rp = flow[Np:].astype(np.float64), res["rollout"][L - 1].astype(np.float64)
        sp, pe = pearson(ranks(fp), ranks(rp)), pearson(fp, rp)
        corr.append((sp, pe))
        at_source = np.mean(np.abs(flow - np.minimum(1.0, caps[0].sum(axis=0))) <= TOL)
        print(f"  {photo.name}: CLS flow {flow.min():.3f} .. {flow.max():.3f}, networkx on "
              f"{len(src)} tokens: {e_last:.1e}, patch {q} after block 3 on {len(src4)}: "
              f"{e_mid:.1e}; flow vs rollout over the patches: Spearman {sp:.2f}, "
              f"Pearson {pe:.2f}; flow = min(1, capacity out of level 0) for "
              f"{100 * at_source:.0f}% of the tokens ({time.time() - t0:.1f} s)")
    print(f"\nmax error against networkx {worst:.2e} (tolerance {TOL:.0e})")
    c = np.array(corr)
    print(f"flow vs rollout, last layer, over {len(corr)} photos: Spearman "
          f"{c[:, 0].min():.2f} .. {c[:, 0].max():.2f} (mean {c[:, 0].mean():.2f}), Pearson "
          f"{c[:, 1].min():.2f} .. {c[:, 1].max():.2f} (mean {c[:, 1].mean():.2f})")
    rep.check(c[:, 0].mean() > CORR_MIN and c[:, 1].mean() > CORR_MIN,
              f"flow vs rollout: mean Spearman {c[:, 0].mean():.2f}, Pearson "
              f"{c[:, 1].mean():.2f}, expected both > {CORR_MIN}")
    finish_controls(rep, missed)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["graphs", "random", "deit"])
    ap.add_argument("--dump", required=True)
    ap.add_argument("--work", default="/tmp/test_flow")
    ap.add_argument("--shared", default="")
    args = ap.parse_args()
    rep = Report()
    rc = {"graphs": test_graphs, "random": test_random, "deit": test_deit}[args.what](args, rep)
    if rc == 77:
        sys.exit(77)
    sys.exit(rep.exit_code())


if __name__ == "__main__":
    main()
