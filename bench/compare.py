#!/usr/bin/python3
"""The engine against PyTorch and ONNX Runtime, in turns, in one run: bench/run.sh calls this.

  /usr/bin/python3 bench/compare.py --bench build-bench/bench/bench_forward \\
      --weights build-bench/weights [--models a,b] [--threads 1,2] [--rounds 6] [--per-round 5]
      [--large] [--backward | --backward-only] [--ort NODE_MODULES]

For each model and thread count it starts two servers on the same checkpoint, the
engine (bench_forward --serve) and PyTorch (torch_forward.py), and asks them in
turns for a few timed forward passes each, round after round, so that whatever
else the machine is doing falls on both alike. Per round, in an order that
alternates: the engine's forward pass (every attention map kept), the engine's
GEMMs alone (the same cblas_sgemm calls and nothing else: the floor), PyTorch's
explicit-attention forward (tests/parity/reference.py, probabilities kept), and
torchvision's fused forward (for information), and with --ort ONNX Runtime (issue 28:
torchvision's model on the same weights exported at opset 14 by bench/onnx_export.py as
NAME.onnx, served by bench/ort_forward.js with the npm package onnxruntime-node found in
NODE_MODULES, intraOpNumThreads = K; it keeps no attention map, the engine keeps them
all). Before the ONNX Runtime turns, a check line: its logits against PyTorch's on the
same input (NAME.onnx.check), so that both run the same model. It prints each one's
median, min and max over all rounds, the ratios engine / PyTorch, engine / ONNX Runtime
and engine / GEMM floor, and the engine's peak resident memory against the weights file. Each server also
reports the CPU time its process spent per run: at 1 thread that is the time on
a core, which other processes on a busy machine do not stretch as they do the
wall time, so its ratio is the steadier one there.

Both sides get the same thread count: OPENBLAS_NUM_THREADS=K for OpenBLAS (which
both use for their GEMMs), OMP_NUM_THREADS=K and torch.set_num_threads(K) for
PyTorch, whose OpenMP threads wait passively (OMP_WAIT_POLICY=PASSIVE) so that
they and OpenBLAS's pthreads do not spin against each other. A pause separates
the turns, so that one side's idle threads have gone to sleep before the other
starts.

--large adds a DINOv2-L/14-sized model at 518 px (T = 1370, 1.2 GB of weights, written
on first use): bench_forward run once keeping the attention (2.9 GB) and once with the
default, which recomputes it from the kept queries and keys; each run's peak resident
memory, and the maps the two wrote (bench_forward --maps) compared byte for byte.

--backward adds, after the forward tables, the backward pass (--backward-only: it
alone). The same servers and turns, the engine with bench_forward --backward: its
forward pass, forward + vit_backward(VIT_GRAD_EXACT) for the top-1 class, that
backward alone and AttnLRP's pass alone (VIT_GRAD_LRP), against PyTorch's forward
("attn" above) and its forward + logits[c].backward() of the same explicit-attention
model, the input requiring grad and the weights not (no weight gradients on either
side). It prints the ratios engine / PyTorch of forward + backward, the engine's
backward / its own forward, and both processes' peak resident memory. With --large:
a DINOv2-L/14-sized model at 518 px with a 1000-class head, the attention recomputed
(VIT_ATT_RECOMPUTE), one forward + vit_grad_init + vit_backward: its peak resident
memory against 2 GB, and the times of that one run.
"""
import argparse
import ctypes
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAUSE_S = 0.3  # between turns: OpenBLAS's idle pthreads yield-spin for ~0.1 s


class Server:
    """A process answering "<cmd> N" with one line "<cmd> ms ms ...", in turn."""

    def __init__(self, argv, env):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                  text=True, bufsize=1)
        self.header = []

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        while True:
            out = self.p.stdout.readline()
            if not out:
                raise RuntimeError(f"{self.p.args[0]} ended (asked: {line})")
            word = out.split()[0] if out.split() else ""
            if word == line.split()[0]:
                return out.split()[1:]
            if word == "error":
                raise RuntimeError(out.strip())
            self.header.append(out.rstrip())  # e.g. bench_forward's "model ..." line

    def close(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        self.p.wait(timeout=60)


def stats(ms):
    return statistics.median(ms), min(ms), max(ms)


def machine():
    """Lines describing the machine and what else runs on it."""
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.processor())
    flags = next((l for l in open("/proc/cpuinfo") if l.startswith("flags")), "").split()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    try:
        ob = ctypes.CDLL("libopenblas.so.0")
        ob.openblas_get_corename.restype = ctypes.c_char_p
        ob.openblas_get_config.restype = ctypes.c_char_p
        core = ob.openblas_get_corename().decode()
        blas = f"{ob.openblas_get_config().decode().split(' NO_')[0]}, kernels {core}"
        if core.lower() == "prescott" and isa != "no AVX2" and not os.environ.get("OPENBLAS_CORETYPE"):
            # Debian's OpenBLAS 0.3.21 does not know some CPU models (e.g. a VM's generic
            # "Intel Xeon Processor") and falls back to SSE3: 3-4x slower GEMMs. The engine's
            # programs then start again with the CPU's kernels (engine/passes/blas.c); the
            # same variable gives them to PyTorch (and numpy) in this run too.
            want = "SkylakeX" if isa == "AVX-512" else "Haswell"
            blas = (f"{blas.split(', kernels')[0]}, kernels {want}: OpenBLAS did not recognise this "
                    f"{isa} CPU and fell back to its SSE3 ones (Prescott); the engine and PyTorch "
                    f"both run with OPENBLAS_CORETYPE={want}")
            os.environ["OPENBLAS_CORETYPE"] = want
        elif os.environ.get("OPENBLAS_CORETYPE"):
            blas += f" (OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']})"
    except OSError:
        blas = "OpenBLAS not found by ctypes"
    torch_v = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    lines = [f"machine  {os.cpu_count()} cores, {cpu} ({isa}), Linux {platform.release()}",
             f"blas     {blas}",
             f"torch    {torch_v} (Debian python3-torch), OMP_WAIT_POLICY=PASSIVE"]
    return lines


def load_line():
    ps = subprocess.run(["ps", "-eo", "pcpu,ni,comm", "--sort=-pcpu", "--no-headers"],
                        capture_output=True, text=True).stdout.splitlines()
    busy = [" ".join(p.split()[2:]) + f" ({p.split()[0]}% nice {p.split()[1]})" for p in ps
            if float(p.split()[0]) >= 5.0 and p.split()[2:] != ["ps"]]
    return (f"load average {' '.join(open('/proc/loadavg').read().split()[:3])}; busy: "
            + (", ".join(busy[:6]) or "nothing else"))


FORWARD_TURNS = [("vitlens forward", "eng", "forward"), ("vitlens GEMMs", "eng", "gemm"),
                 ("torch attention", "tor", "attn"), ("torch fused", "tor", "fused")]
BACKWARD_TURNS = [("vitlens forward", "eng", "forward"), ("vitlens fwd+bwd", "eng", "fwdbwd"),
                  ("vitlens backward", "eng", "backward"), ("vitlens LRP pass", "eng", "lrp"),
                  ("torch forward", "tor", "attn"), ("torch fwd+bwd", "tor", "fwdbwd")]


ORT_TURN = ("onnxruntime", "ort", "ort")
ORT_CHECK_TOL = 1e-3  # largest |logit difference| from PyTorch's accepted as the same model


def run_config(args, model, threads, turn_spec=FORWARD_TURNS, eng_args=()):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               OMP_WAIT_POLICY="PASSIVE")
    path = Path(args.weights) / f"{model}.safetensors"
    onnx = Path(args.weights) / f"{model}.onnx"
    ort = None
    # DINOv3: no ONNX Runtime turn (bench/onnx_export.py exports torchvision's ViT: no RoPE)
    if args.ort and turn_spec is FORWARD_TURNS and not model.startswith("dinov3"):
        if not onnx.exists():
            raise RuntimeError(f"--ort: {onnx} is missing (bench/onnx_export.py writes it)")
        ort = Server(["node", str(HERE / "ort_forward.js"), "--model", str(onnx), "--threads",
                      str(threads)], dict(env, NODE_PATH=str(Path(args.ort).resolve())))
        chk = ort.ask("check")  # max_abs_diff d max_abs_logit m top1 i torch_top1 j
        diff, top, ttop = float(chk[1]), chk[5], chk[7]
        ok = diff <= ORT_CHECK_TOL and top == ttop
        print(f"  check {model}, {threads} thr: ONNX Runtime's logits against PyTorch's "
              f"(reference.py, float32) on the same input: max |difference| {diff:.2e} "
              f"(largest |logit| {float(chk[3]):.2f}), top-1 {top} / {ttop}: "
              f"{'the same model' if ok else 'DIFFERENT'}", flush=True)
        if not ok:
            ort.close()
            raise RuntimeError(f"ONNX Runtime's {onnx} does not compute PyTorch's logits "
                               f"(tolerance {ORT_CHECK_TOL})")
        turn_spec = turn_spec + [ORT_TURN]
    eng = Server([args.bench, "--model", str(path), "--threads", str(threads), "--serve",
                  *eng_args], env)
    tor = Server([sys.executable, str(HERE / "torch_forward.py"), "--model", str(path),
                  "--threads", str(threads)], env)
    sides = {"eng": eng, "tor": tor, "ort": ort}
    try:
        turns = [(name, sides[side], cmd) for name, side, cmd in turn_spec]
        times = {name: [] for name, _, _ in turns}
        cpus = {name: [] for name, _, _ in turns}  # CPU ms per run, one value per turn
        for name, srv, cmd in turns:  # warm-up: page faults, thread start, packing buffers
            srv.ask(f"{cmd} {args.warmup}")
        for r in range(args.rounds):
            for name, srv, cmd in turns if r % 2 == 0 else turns[::-1]:
                time.sleep(PAUSE_S)
                got = srv.ask(f"{cmd} {args.per_round}")
                if got != ["none"]:
                    times[name] += [float(t) for t in got[:got.index("cpu")]]
                    cpus[name].append(float(got[got.index("cpu") + 1]))
        mem = eng.ask("memory")
        rss, weights = float(mem[1]), float(mem[3])
        tor_rss = float(tor.ask("memory")[1])
    finally:
        eng.close()
        tor.close()
        if ort:
            ort.close()
    return eng.header, times, cpus, rss, weights, tor_rss


LARGE = "vit_large_patch14_dinov2_518"
LARGE_HEAD = "vit_large_patch14_518_head"  # the same with a head, for the backward pass
LARGE_LIMIT_MB = 2048  # the target: explorable within 2 GB resident


def parse_single(stdout):
    """bench_forward's figures of a single run (--iters 1): stage times in ms, peak RSS and
    weights in MB, the attention storage it used, the backward buffers' size."""
    got = {}
    for line in stdout.splitlines():
        w = line.split()
        if w[:1] == ["stage"]:
            got[w[1]] = float(w[3])
        elif w[:1] == ["memory"]:
            got["rss"], got["weights"] = float(w[2]), float(w[4])
        elif w[:1] == ["memory_forward"]:
            got["rss_forward"] = float(w[2])
        elif w[:1] == ["grad_buffers_mb"]:
            got["grad_mb"] = float(w[1])
        elif w[:1] == ["run"]:
            got["how"] = line.split("attention=")[1]
    return got


def run_large(args, threads):
    """DINOv2-L/14 at 518 px (T = 1370), random weights: the attention kept (2.9 GB of
    it) against recomputed from the kept queries and keys (the default above 512 MiB).
    Each run: one forward pass, then a set of maps (bench_forward --maps) written to a
    file; the two files must be equal byte for byte. Returns the summary rows."""
    sys.path.insert(0, str(HERE))
    import make_weights  # noqa: E402  (torch: only when --large is asked for)
    path = make_weights.make(args.weights, LARGE)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    rows, files = [], []
    for att in ("keep", "auto"):
        out = Path(args.weights) / f"{LARGE}.{att}.maps"
        p = subprocess.run([args.bench, "--model", str(path), "--threads", str(threads),
                            "--iters", "1", "--warmup", "0", "--att", att, "--maps", str(out)],
                           capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise RuntimeError(f"bench_forward --att {att}: {p.stderr.strip()}")
        got = parse_single(p.stdout)
        print(f"  --att {att:<5} {got['how']:<34} forward {got['forward']:9.0f} ms  "
              f"maps {got['maps']:8.0f} ms (rollout {got['rollout']:7.0f})  peak RSS "
              f"{got['rss']:6.0f} MB (weights {got['weights']:.0f} MB)", flush=True)
        rows.append((att, got))
        files.append(out.read_bytes())
        out.unlink()
    same = files[0] == files[1]
    print(f"  maps of the two runs {'identical, byte for byte' if same else 'DIFFERENT'} "
          f"({len(files[0]) // 4} floats)")
    return rows, same


def run_large_backward(args, threads):
    """The DINOv2-L/14-sized model at 518 px with a head, the attention recomputed: one
    forward pass, vit_grad_init, one vit_backward (exact; peak RSS measured here), one
    AttnLRP pass. Returns bench_forward's figures."""
    sys.path.insert(0, str(HERE))
    import make_weights  # noqa: E402
    path = make_weights.make(args.weights, LARGE_HEAD)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    p = subprocess.run([args.bench, "--model", str(path), "--threads", str(threads), "--iters",
                        "1", "--warmup", "0", "--att", "recompute", "--backward"],
                       capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"bench_forward --backward: {p.stderr.strip()}")
    got = parse_single(p.stdout)
    print(f"  --att recompute  forward {got['forward']:7.0f} ms  backward {got['backward']:7.0f} ms"
          f"  LRP pass {got['lrp']:7.0f} ms\n  peak RSS after the forward pass "
          f"{got['rss_forward']:6.0f} MB, after the backward {got['rss']:6.0f} MB (weights "
          f"{got['weights']:.0f} MB; vit_grad_init's buffers {got['grad_mb']:.0f} MB)", flush=True)
    return got


def print_backward(model, threads, header, times, cpus, rss, weights, tor_rss):
    """One configuration's backward figures; returns its summary row."""
    print(f"\n{model}, {threads} thread{'s' if threads > 1 else ''}, backward  "
          f"({' '.join(header[0].split()[2:]) if header else ''})")
    for name, ms in times.items():
        med, lo, hi = stats(ms)
        print(f"  {name:<17} median {med:8.2f}  min {lo:8.2f}  max {hi:8.2f}  "
              f"({len(ms)} runs)   cpu/run median {statistics.median(cpus[name]):8.2f}")
    f, fb, b, lrp, tf, tfb = (stats(times[k]) for k in (
        "vitlens forward", "vitlens fwd+bwd", "vitlens backward", "vitlens LRP pass",
        "torch forward", "torch fwd+bwd"))
    print(f"  ratio vitlens / torch, forward + backward  median {fb[0] / tfb[0]:.2f}  "
          f"min {fb[1] / tfb[1]:.2f}   (forward alone {f[0] / tf[0]:.2f})")
    print(f"  ratio vitlens backward / its forward       median {b[0] / f[0]:.2f}  "
          f"min {b[1] / f[1]:.2f}   (LRP pass {lrp[0] / f[0]:.2f})")
    ce, ct = (statistics.median(cpus[k]) for k in ("vitlens fwd+bwd", "torch fwd+bwd"))
    print(f"  ratio of CPU time per run, forward + backward, vitlens / torch  {ce / ct:.2f}")
    print(f"  peak resident memory  vitlens {rss:.0f} MB (weights file {weights:.0f} MB, "
          f"+{rss - weights:.0f} MB)   torch {tor_rss:.0f} MB", flush=True)
    return (model, threads, f[0], fb[0], tfb[0], fb[0] / tfb[0], fb[1] / tfb[1], b[0], b[0] / f[0],
            lrp[0], rss, tor_rss)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="bench_forward")
    ap.add_argument("--weights", required=True, help="folder of NAME.safetensors")
    ap.add_argument("--models", default="deit_tiny_patch16_224,deit_small_patch16_224,"
                    "vit_base_patch16_224,dinov3_vits16_224")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--per-round", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--large", action="store_true",
                    help=f"also {LARGE} (T = 1370): memory with the attention kept vs recomputed")
    ap.add_argument("--backward", action="store_true",
                    help="also the backward pass: engine forward + vit_backward against PyTorch's "
                    "forward + backward()")
    ap.add_argument("--backward-only", action="store_true",
                    help="the backward pass alone (no forward table, no GEMM floor)")
    ap.add_argument("--ort", default="", help="a node_modules folder holding onnxruntime-node: "
                    "also ONNX Runtime on NAME.onnx (bench/onnx_export.py), forward only")
    a = ap.parse_args()
    forward, backward = not a.backward_only, a.backward or a.backward_only
    models = [m for m in a.models.split(",") if m]
    thread_counts = list(map(int, a.threads.split(",")))
    for line in machine():
        print(line)
    if a.ort:
        ver = json.loads((Path(a.ort) / "onnxruntime-node" / "package.json").read_text())
        print(f"onnxrt   onnxruntime-node {ver['version']} (npm, its own CPU build), CPU provider, "
              f"intraOpNumThreads = threads, interOpNumThreads 1, graph optimisation 'all'")
    print(f"runs     {a.rounds} rounds x {a.per_round} per side, in turns, after {a.warmup} "
          f"warm-up runs; times in ms")
    print(f"start    {load_line()}", flush=True)

    summary = []
    for model in models if forward else []:
        for threads in thread_counts:
            header, times, cpus, rss, weights, tor_rss = run_config(a, model, threads)
            print(f"\n{model}, {threads} thread{'s' if threads > 1 else ''}  "
                  f"({' '.join(header[0].split()[2:]) if header else ''})")
            for name, ms in times.items():
                if ms:
                    med, lo, hi = stats(ms)
                    print(f"  {name:<16} median {med:8.2f}  min {lo:8.2f}  max {hi:8.2f}  "
                          f"({len(ms)} runs)   cpu/run median {statistics.median(cpus[name]):8.2f}")
            e, g, t = (stats(times[k]) for k in ("vitlens forward", "vitlens GEMMs",
                                                 "torch attention"))
            print(f"  ratio vitlens / torch attention  median {e[0] / t[0]:.2f}  min {e[1] / t[1]:.2f}")
            o = stats(times[ORT_TURN[0]]) if times.get(ORT_TURN[0]) else None
            if o:
                print(f"  ratio vitlens / onnxruntime      median {e[0] / o[0]:.2f}  "
                      f"min {e[1] / o[1]:.2f}   (onnxruntime / vitlens's GEMM floor "
                      f"{o[0] / g[0]:.2f})")
            print(f"  ratio vitlens / its GEMM floor   median {e[0] / g[0]:.2f}  min {e[1] / g[1]:.2f}")
            ce, ct = (statistics.median(cpus[k]) for k in ("vitlens forward", "torch attention"))
            co = statistics.median(cpus[ORT_TURN[0]]) if o else None
            print(f"  ratio of CPU time per run, vitlens / torch attention  {ce / ct:.2f}"
                  + (f", vitlens / onnxruntime {ce / co:.2f}" if o else "")
                  + ("   (1 thread: the time on a core, which other load does not stretch)"
                     if threads == 1 else "   (all threads, waiting included)"))
            print(f"  peak resident memory  vitlens {rss:.0f} MB (weights file {weights:.0f} MB, "
                  f"+{rss - weights:.0f} MB)   torch {tor_rss:.0f} MB", flush=True)
            summary.append((model, threads, e[0], t[0], e[0] / t[0], e[1] / t[1], g[0],
                            e[0] / g[0], rss - weights,
                            (o[0], e[0] / o[0], e[1] / o[1]) if o else None,
                            (ce, statistics.median(cpus["vitlens GEMMs"]), ct, co)))

    bsummary = []
    for model in models if backward else []:
        for threads in thread_counts:
            got = run_config(a, model, threads, BACKWARD_TURNS, ["--backward"])
            bsummary.append(print_backward(model, threads, *got))

    large = large_bwd = None
    threads = max(thread_counts)
    if a.large and forward:
        print(f"\n{LARGE}, {threads} threads (width 1024, 24 layers, 16 heads, 518 px: T = 1370)")
        large = run_large(a, threads)
    if a.large and backward:
        print(f"\n{LARGE_HEAD}, {threads} threads, backward (the same with a 1000-class head)")
        large_bwd = run_large_backward(a, threads)

    print(f"\nend      {load_line()}")
    if summary:
        print("\nsummary (medians; ratio min: of the minima)    targets: vitlens/torch <= 0.80, "
              "vitlens/GEMM <= 1.10 (ViT-B), RSS - weights <= 100 MB (ViT-B)"
              + (", vitlens/ORT <= 1.00" if a.ort else ""))
        print(f"{'model':<26} thr  vitlens ms  torch ms  vitlens/torch (min)  GEMM ms  "
              f"vitlens/GEMM  RSS-weights MB" + ("   ORT ms  vitlens/ORT (min)" if a.ort else ""))
    for m, th, e, t, r, rmin, g, rg, extra, o, _ in summary:
        print(f"{m:<26} {th:>3}  {e:10.2f}  {t:8.2f}  {r:9.2f} ({rmin:4.2f})    {g:7.2f}  "
              f"{rg:12.2f}  {extra:14.0f}"
              + (f"  {o[0]:7.2f}  {o[1]:11.2f} ({o[2]:4.2f})" if o else ""))
    if summary:
        print("\nCPU time per run (medians of the turns' means, ms; at 1 thread the time on a core, "
              "which other load stretches less than the wall time)")
        print(f"{'model':<26} thr  vitlens  GEMMs   torch" + ("     ORT  vitlens/ORT  ORT/GEMMs"
                                                           if a.ort else "") + "  vitlens/GEMMs")
    for m, th, *_, (ce, cg, ct, co) in summary:
        print(f"{m:<26} {th:>3}  {ce:7.2f} {cg:7.2f} {ct:7.2f}"
              + (f" {co:7.2f}  {ce / co:11.2f}  {co / cg:9.2f}" if co else "")
              + f"  {ce / cg:13.2f}")
    if bsummary:
        print("\nbackward summary (medians; ratio min: of the minima)    targets: fwd+bwd "
              "vitlens/torch <= 0.80, vitlens bwd/fwd <= 2.0")
        print(f"{'model':<26} thr  fwd ms  fwd+bwd ms  torch fwd+bwd ms  ratio (min)    "
              f"bwd ms  bwd/fwd  LRP ms  RSS MB  torch RSS MB")
    for m, th, f, fb, tfb, r, rmin, b, rb, lrp, rss, trss in bsummary:
        print(f"{m:<26} {th:>3}  {f:6.1f}  {fb:10.1f}  {tfb:16.1f}  {r:5.2f} ({rmin:4.2f})  "
              f"{b:8.1f}  {rb:7.2f}  {lrp:6.1f}  {rss:6.0f}  {trss:12.0f}")
    if large_bwd:
        ok = large_bwd["rss"] <= LARGE_LIMIT_MB
        print(f"\n{LARGE_HEAD}, attention recomputed: peak RSS of forward + vit_grad_init + "
              f"vit_backward {large_bwd['rss']:.0f} MB (weights {large_bwd['weights']:.0f}), "
              f"target <= {LARGE_LIMIT_MB}: {'met' if ok else 'NOT met'} (forward alone "
              f"{large_bwd['rss_forward']:.0f} MB); forward "
              f"{large_bwd['forward']:.0f} ms, backward {large_bwd['backward']:.0f} ms, LRP pass "
              f"{large_bwd['lrp']:.0f} ms (one run each)")
    if large:
        rows, same = large
        print(f"\n{LARGE}: peak RSS (MB) with the attention kept / recomputed, target <= "
              f"{LARGE_LIMIT_MB} without changing a map")
        for att, got in rows:
            print(f"  --att {att:<5} {got['rss']:7.0f}  (weights {got['weights']:.0f})  "
                  f"forward {got['forward']:.0f} ms  maps {got['maps']:.0f} ms")
        print(f"  maps identical: {'yes' if same else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
