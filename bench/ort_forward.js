// ONNX Runtime's side of bench/compare.py, part 2 (issue 28): an ONNX model written by
// bench/onnx_export.py, served in turns as bench_forward --serve and bench/torch_forward.py
// are.
//
//   NODE_PATH=build-bench/ort/node_modules node bench/ort_forward.js --model M.onnx --threads K
//                                                       [--check FILE (default M.onnx.check)]
//
// onnxruntime-node (npm: ONNX Runtime's own Linux x64 CPU build), the CPU execution
// provider, graph optimisation level "all" (its fusions of attention, LayerNorm, GELU and
// bias adds), intraOpNumThreads = K, interOpNumThreads = 1, sequential execution. The input
// is the fixed random [1, 3, S, S] of M.onnx.check (float32 pixels, then PyTorch's logits
// [C]). Reads commands on stdin and answers each with one line:
//   ort N     ->  "ort <ms> ... <ms> cpu <c>"   N timed session.run calls; c: the mean CPU
//                 time per call of the process (all threads, user + system), ms
//   batch B N ->  "batch <ms> ... <ms> cpu <c>"  the same on B copies of that input at once
//                 ([B, 3, S, S]; needs a model with a free batch axis, NAME.batch.onnx:
//                 bench/batch_ort.sh)
//   check     ->  "check max_abs_diff <d> max_abs_logit <m> top1 <i> torch_top1 <j>"
//                 ONNX Runtime's logits on that input against PyTorch's
//   memory    ->  "memory peak_rss_mb <r>"
//   version   ->  "version <onnxruntime-node version>"
//   quit (or end of input)
// VITLENS_ORT_EXTRA='{"session": {"disable_prepacking": "1"}}' (JSON): session config entries
// (onnxruntime_session_options_config_keys.h) for experiments, e.g. without the weights'
// pre-packing or with the intra-op threads' spinning off ("intra_op": {"allow_spinning": "0"}).
// Errors: one line "error <what>", then exit 1.
"use strict";
const fs = require("fs");
const readline = require("readline");

function arg(name, dflt) {
  const i = process.argv.indexOf(name);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : dflt;
}

function argmax(a) {
  let k = 0;
  for (let i = 1; i < a.length; i++) if (a[i] > a[k]) k = i;
  return k;
}

async function main() {
  const ort = require("onnxruntime-node");
  const model = arg("--model", null);
  const threads = parseInt(arg("--threads", "1"), 10);
  if (!model || !(threads >= 1)) throw new Error("usage: node ort_forward.js --model M.onnx --threads K");
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ["cpu"],
    graphOptimizationLevel: "all",
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: "sequential",
    ...(process.env.VITLENS_ORT_EXTRA ? { extra: JSON.parse(process.env.VITLENS_ORT_EXTRA) } : {}),
  });
  const S = 224; // bench/make_weights.py's models: 224 px
  const n = 3 * S * S;
  const checkFile = arg("--check", model + ".check");
  const buf = fs.readFileSync(checkFile);
  const all = new Float32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
  if (all.length <= n) throw new Error(`${checkFile}: ${all.length} floats, expected more than ${n}`);
  const pixels = all.slice(0, n), torchLogits = all.slice(n);
  const feeds = { [session.inputNames[0]]: new ort.Tensor("float32", pixels, [1, 3, S, S]) };
  const out = session.outputNames[0];

  // k timed runs: "<ms> ... <ms> cpu <mean CPU ms per run, all threads>"
  async function timed(f, k) {
    const ms = [], c0 = process.cpuUsage();
    for (let i = 0; i < k; i++) {
      const t0 = process.hrtime.bigint();
      await session.run(f);
      ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    const c = process.cpuUsage(c0);
    return `${ms.map((t) => t.toFixed(3)).join(" ")} cpu ${((c.user + c.system) / 1e3 / k).toFixed(3)}`;
  }

  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    const words = line.trim().split(/\s+/);
    if (!words[0]) continue;
    if (words[0] === "quit") break;
    if (words[0] === "memory") {
      console.log(`memory peak_rss_mb ${(process.resourceUsage().maxRSS / 1024).toFixed(1)}`);
    } else if (words[0] === "version") {
      console.log(`version ${require("onnxruntime-node/package.json").version}`);
    } else if (words[0] === "check") {
      const got = (await session.run(feeds))[out].data;
      if (got.length !== torchLogits.length)
        throw new Error(`${got.length} logits from ONNX Runtime, ${torchLogits.length} from PyTorch`);
      let d = 0, m = 0;
      for (let i = 0; i < got.length; i++) {
        d = Math.max(d, Math.abs(got[i] - torchLogits[i]));
        m = Math.max(m, Math.abs(torchLogits[i]));
      }
      console.log(`check max_abs_diff ${d.toExponential(3)} max_abs_logit ${m.toFixed(4)} ` +
                  `top1 ${argmax(got)} torch_top1 ${argmax(torchLogits)}`);
    } else if (words[0] === "ort" && words.length === 2 && parseInt(words[1], 10) > 0) {
      console.log(`ort ${await timed(feeds, parseInt(words[1], 10))}`);
    } else if (words[0] === "batch" && words.length === 3 && parseInt(words[1], 10) > 0 &&
               parseInt(words[2], 10) > 0) {
      const B = parseInt(words[1], 10), many = new Float32Array(B * n);
      for (let b = 0; b < B; b++) many.set(pixels, b * n);
      const batchFeeds = { [session.inputNames[0]]: new ort.Tensor("float32", many, [B, 3, S, S]) };
      console.log(`batch ${await timed(batchFeeds, parseInt(words[2], 10))}`);
    } else {
      console.log(`error unknown command: ${line.trim()}`);
    }
  }
}

main().then(() => process.exit(0), (e) => {
  console.log(`error ${String(e.message || e).split("\n")[0]}`);
  process.exit(1);
});
