#!/usr/bin/python3
"""The engine against PyTorch, in turns, in one run: bench/run.sh calls this.

  /usr/bin/python3 bench/compare.py --bench build-bench/bench/bench_forward \\
      --weights build-bench/weights [--models a,b] [--threads 1,2] [--rounds 6] [--per-round 5]
      [--large]

For each model and thread count it starts two servers on the same checkpoint, the
engine (bench_forward --serve) and PyTorch (torch_forward.py), and asks them in
turns for a few timed forward passes each, round after round, so that whatever
else the machine is doing falls on both alike. Per round, in an order that
alternates: the engine's forward pass (every attention map kept), the engine's
GEMMs alone (the same cblas_sgemm calls and nothing else: the floor), PyTorch's
explicit-attention forward (tests/parity/reference.py, probabilities kept), and
torchvision's fused forward (for information). It prints each one's median, min
and max over all rounds, the ratios engine / PyTorch and engine / GEMM floor, and
the engine's peak resident memory against the weights file. Each server also
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
"""
import argparse
import ctypes
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
        blas = (f"{ob.openblas_get_config().decode().split(' NO_')[0]}, kernels "
                f"{ob.openblas_get_corename().decode()}")
    except OSError:
        blas = "OpenBLAS not found by ctypes"
    torch_v = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    lines = [f"machine  {os.cpu_count()} cores, {cpu} ({isa}), Linux {platform.release()}",
             f"blas     {blas}"
             + (f" (OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']})"
                if os.environ.get("OPENBLAS_CORETYPE") else ""),
             f"torch    {torch_v} (Debian python3-torch), OMP_WAIT_POLICY=PASSIVE"]
    return lines


def load_line():
    ps = subprocess.run(["ps", "-eo", "pcpu,ni,comm", "--sort=-pcpu", "--no-headers"],
                        capture_output=True, text=True).stdout.splitlines()
    busy = [" ".join(p.split()[2:]) + f" ({p.split()[0]}% nice {p.split()[1]})" for p in ps
            if float(p.split()[0]) >= 5.0 and p.split()[2:] != ["ps"]]
    return (f"load average {' '.join(open('/proc/loadavg').read().split()[:3])}; busy: "
            + (", ".join(busy[:6]) or "nothing else"))


def run_config(args, model, threads):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               OMP_WAIT_POLICY="PASSIVE")
    path = Path(args.weights) / f"{model}.safetensors"
    eng = Server([args.bench, "--model", str(path), "--threads", str(threads), "--serve"], env)
    tor = Server([sys.executable, str(HERE / "torch_forward.py"), "--model", str(path),
                  "--threads", str(threads)], env)
    try:
        turns = [("vitlens forward", eng, "forward"), ("vitlens GEMMs", eng, "gemm"),
                 ("torch attention", tor, "attn"), ("torch fused", tor, "fused")]
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
    return eng.header, times, cpus, rss, weights, tor_rss


LARGE = "vit_large_patch14_dinov2_518"
LARGE_LIMIT_MB = 2048  # the target: explorable within 2 GB resident


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
        got = {}
        for line in p.stdout.splitlines():
            w = line.split()
            if w[:1] == ["stage"]:
                got[w[1]] = float(w[3])
            elif w[:1] == ["memory"]:
                got["rss"], got["weights"] = float(w[2]), float(w[4])
            elif w[:1] == ["run"]:
                got["how"] = line.split("attention=")[1]
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="bench_forward")
    ap.add_argument("--weights", required=True, help="folder of NAME.safetensors")
    ap.add_argument("--models", default="deit_tiny_patch16_224,deit_small_patch16_224,"
                    "vit_base_patch16_224")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--per-round", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--large", action="store_true",
                    help=f"also {LARGE} (T = 1370): memory with the attention kept vs recomputed")
    a = ap.parse_args()
    for line in machine():
        print(line)
    print(f"runs     {a.rounds} rounds x {a.per_round} per side, in turns, after {a.warmup} "
          f"warm-up runs; times in ms")
    print(f"start    {load_line()}", flush=True)

    summary = []
    for model in [m for m in a.models.split(",") if m]:
        for threads in map(int, a.threads.split(",")):
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
            print(f"  ratio vitlens / its GEMM floor   median {e[0] / g[0]:.2f}  min {e[1] / g[1]:.2f}")
            ce, ct = (statistics.median(cpus[k]) for k in ("vitlens forward", "torch attention"))
            print(f"  ratio of CPU time per run, vitlens / torch attention  {ce / ct:.2f}"
                  + ("   (1 thread: the time on a core, which other load does not stretch)"
                     if threads == 1 else "   (all threads, waiting included)"))
            print(f"  peak resident memory  vitlens {rss:.0f} MB (weights file {weights:.0f} MB, "
                  f"+{rss - weights:.0f} MB)   torch {tor_rss:.0f} MB", flush=True)
            summary.append((model, threads, e[0], t[0], e[0] / t[0], e[1] / t[1], g[0],
                            e[0] / g[0], rss - weights))

    large = None
    if a.large:
        threads = max(map(int, a.threads.split(",")))
        print(f"\n{LARGE}, {threads} threads (width 1024, 24 layers, 16 heads, 518 px: T = 1370)")
        large = run_large(a, threads)

    print(f"\nend      {load_line()}")
    print("\nsummary (medians; ratio min: of the minima)    targets: vitlens/torch <= 0.80, "
          "vitlens/GEMM <= 1.10 (ViT-B), RSS - weights <= 100 MB (ViT-B)")
    print(f"{'model':<26} thr  vitlens ms  torch ms  vitlens/torch (min)  GEMM ms  "
          f"vitlens/GEMM  RSS-weights MB")
    for m, th, e, t, r, rmin, g, rg, extra in summary:
        print(f"{m:<26} {th:>3}  {e:10.2f}  {t:8.2f}  {r:9.2f} ({rmin:4.2f})    {g:7.2f}  "
              f"{rg:12.2f}  {extra:14.0f}")
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
