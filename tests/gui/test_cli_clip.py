#!/usr/bin/python3
"""CLIP on the command line (issue 27): --classes, --prompts, --template(s), --text and --vocab
with --top, --export and --eval, on tiny random CLIP checkpoints the test writes
(clip_models.py) in both naming schemes with the same weights, and every bad input a clear
message naming the option or file, never a crash:

  - zero-shot: --top K prints softmax(logit_scale * cos) over the classes (sums to 1), the same
    in Hugging Face's and OpenAI's names; --prompts FILE (comments, blank lines) is --classes;
    --templates FILE of the default template is the default; another template changes the
    numbers (it is read);
  - --text: its class-specific maps exported as the head's last class, named after the phrase
    (a-red-umbrella_chefer.npy; phrase_stem below: lower case, other characters a '-', UTF-8
    kept, 48 bytes cut at a character, class2_ when two phrases share a name), the same in
    both schemes; a phrase past 77 tokens is cut with a notice;
  - bad input: an empty phrase, an empty class name, a template without {}, --classes with
    --prompts, --class with --text, a missing / comment-only prompts file, a missing or corrupt
    vocabulary (--vocab, and a model without one beside it), invalid UTF-8, a checkpoint with
    only its image tower (the image views still run: --export), one with only its text tower,
    a model that is not CLIP.

  test_cli_clip.py --app build/vitlens --vocab ../shared/clip/bpe_simple_vocab_16e6.txt.gz \\
      --builtin assets/default/model.safetensors --image assets/default/demo/X.png --out DIR
Exits 0, 1 on a failed check, 77 (skip) without the shared vocabulary.
"""
import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import clip_models as cm  # noqa: E402
import clip_reference as ref  # noqa: E402

FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def phrase_stem(label):
    """What --export names a zero-shot class after (scene.h model_class_stem), written again
    from its description: ASCII letters lower-cased, digits, '_' and non-ASCII characters
    kept, any other run a single '-', none first or last, at most 48 UTF-8 bytes."""
    out = ""
    for ch in label:
        c = ch.lower() if "A" <= ch <= "Z" else ch
        if ("a" <= c <= "z") or ("0" <= c <= "9") or c == "_" or ord(c) >= 0x80:
            if len((out + c).encode()) > 48:
                break
            out += c
        elif out and not out.endswith("-"):
            out += "-"
        if len(out.encode()) >= 48:
            break
    return out.strip("-")


def run(app, *args):
    r = subprocess.run([app, *args], capture_output=True, text=True,
                       env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
    return r.returncode, r.stdout, r.stderr.strip()


def top(out):
    """--top's lines: [(rank, prob, id, label)]."""
    rows = []
    for ln in out.splitlines():
        p = ln.split(" ", 3)
        rows.append((int(p[0]), float(p[1]), int(p[2]), p[3] if len(p) > 3 else ""))
    return rows


def refused(app, args, rc, words, what):
    """args exit with rc and a message on stderr holding every one of words."""
    code, _, err = run(app, *args)
    ok = code == rc and all(w in err for w in words) and "Sanitizer" not in err
    check(ok, f"{what}: exit {code} (want {rc}), {err!r}")


def main():
    ap = argparse.ArgumentParser()
    for a in ("--app", "--vocab", "--builtin", "--image", "--out"):
        ap.add_argument(a, required=True)
    ap.add_argument("--control", choices=["raw-mean"], default=None,
                    help="the negative control: the reference averages the templates' raw "
                         "embeddings (not normalised first); the zero-shot check must fail")
    a = ap.parse_args()
    if not os.path.exists(a.vocab):
        print(f"SKIP: no CLIP vocabulary at {a.vocab}")
        return 77
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    app, img = a.app, a.image
    hf = cm.write(out / "hf", "hf", vocab=a.vocab)
    oa = cm.write(out / "openai", "openai", vocab=a.vocab)
    novocab = cm.write(out / "novocab", "hf")
    image_only = cm.write(out / "image-only", "hf", vocab=a.vocab, part="image")
    text_only = cm.write(out / "text-only", "hf", vocab=a.vocab, part="text")

    # --- the numbers: --top against the float64 reference (clip_reference.py) on a photo of the
    # model's input size (64 px: no resize), two templates averaged and a phrase after them
    photo64 = out / "photo64.png"
    from PIL import Image
    Image.open(img).convert("RGB").resize((64, 64), Image.BICUBIC).save(photo64)
    tpl = out / "templates2.txt"
    tpl.write_text("a photo of a {}.\na drawing of a {}.\n")
    names, phrase = ["cat", "dog", "espresso cup"], "a red umbrella"
    want = ref.zero_shot(cm.random_clip(0), ref.Bpe(a.vocab), ref.pixels_of(photo64), names,
                         ["a photo of a {}.", "a drawing of a {}."], cm.SHAPE, phrase,
                         normalise_each=a.control != "raw-mean")
    for name, m in (("hf", hf), ("openai", oa)):
        rc, o, e = run(app, "--model", str(m), "--classes", ", ".join(names), "--templates",
                       str(tpl), "--text", phrase, "--top", "4", str(photo64))
        got = {r[2]: r[1] for r in top(o)} if rc == 0 else {}
        err = max((abs(got.get(c, 9) - float(want[c])) for c in range(4)), default=9)
        check(rc == 0 and err <= 1e-4,
              f"{name}: --top's zero-shot probabilities (2 templates averaged, the phrase last) "
              f"= the float64 reference within 1e-4 (printed to 4 decimals): max diff {err:.2e} "
              f"({o.strip()!r} vs {[round(float(p), 4) for p in want]}) {e!r}")
    if a.control:
        print(f"cli_clip control {a.control}: {'FAILED' if FAILS else 'passed'}")
        return 1 if FAILS else 0

    # --- zero-shot labels: --top, both schemes
    classes = "cat, dog, espresso cup"
    rc, o, e = run(app, "--model", str(hf), "--classes", classes, "--top", "5", img)
    rows = top(o) if rc == 0 else []
    check(rc == 0 and len(rows) == 3 and {r[3] for r in rows} == {"cat", "dog", "espresso cup"},
          f"--classes \"{classes}\" --top 5: the three classes ranked ({o.strip()!r} {e!r})")
    check(rows and abs(sum(r[1] for r in rows) - 1) < 2e-4 and
          all(rows[i][1] >= rows[i + 1][1] for i in range(len(rows) - 1)),
          "their probabilities are a softmax: descending, summing to 1")
    rc2, o2, _ = run(app, "--model", str(oa), "--classes", classes, "--top", "5", img)
    rows2 = top(o2) if rc2 == 0 else []
    same = len(rows2) == len(rows) and all(
        x[2] == y[2] and abs(x[1] - y[1]) <= 2e-4 for x, y in zip(rows, rows2))
    check(same, f"OpenAI's names, the same weights: the same ranking and probabilities ({o2!r})")
    prompts = out / "prompts.txt"
    prompts.write_text("# my classes\ncat\n\n  dog  \n# a comment between\nespresso cup\n")
    rc3, o3, e3 = run(app, "--model", str(hf), "--prompts", str(prompts), "--top", "5", img)
    check(rc3 == 0 and o3 == o, f"--prompts FILE (comments, blank lines) = --classes ({e3!r})")
    tpl = out / "templates.txt"
    tpl.write_text("# one template\na photo of a {}.\n")
    rc4, o4, e4 = run(app, "--model", str(hf), "--classes", classes, "--templates", str(tpl),
                      "--top", "5", img)
    check(rc4 == 0 and o4 == o, f"--templates FILE of the default template = the default ({e4!r})")
    rc5, o5, _ = run(app, "--model", str(hf), "--classes", classes, "--template",
                     "a drawing of a {}.", "--top", "5", img)
    check(rc5 == 0 and o5 != o, "--template \"a drawing of a {}.\": other numbers (it is read)")
    tpl.write_text("a photo of a {}.\na drawing of a {}.\n")
    rc6, o6, _ = run(app, "--model", str(hf), "--classes", classes, "--templates", str(tpl),
                     "--top", "5", img)
    check(rc6 == 0 and o6 not in (o, o5), "two templates: their average, neither one's numbers")

    # --- --text: the phrase's maps, the head's last class
    ex = {}
    for name, m in (("hf", hf), ("openai", oa)):
        d = out / f"export-{name}"
        rc, o, e = run(app, "--model", str(m), "--classes", "cat, dog", "--text",
                       "a red umbrella", "--export", str(d), img)
        ok = (rc == 0 and (d / "a-red-umbrella_chefer.npy").exists() and
              (d / "a-red-umbrella_legrad.npy").exists() and not list(d.glob("class2_*")))
        check(ok, f"{name}: --classes \"cat, dog\" --text --export: the phrase's maps, named after "
                  f"it (a-red-umbrella_chefer.npy, a-red-umbrella_legrad.npy) ({e!r})")
        ex[name] = d
    # the names of other phrases: punctuation, a path, UTF-8 (2- and 4-byte), a long phrase
    # cut at a character, and two phrases of one name (then by number: class1_)
    long_phrase = "an extraordinarily long description of a small striped café cat"
    for i, (classes, text, want) in enumerate((
            ("cat, dog", "A Red-Umbrella!!", "a-red-umbrella"),
            ("cat, dog", "../etc/passwd", "etc-passwd"),
            ("cat, dog", "un chat noir à Paris 🐈", None),
            ("cat, dog", long_phrase, None),
            ("cat, dog", "x" + "\u00e9" * 30, "x" + "\u00e9" * 23),  # 47 bytes: not inside an é
            ("a cat, dog", "A cat?", "class2"))):
        want = want or phrase_stem(text)
        d = out / f"export-stem{i}"
        rc, o, e = run(app, "--model", str(hf), "--classes", classes, "--text", text,
                       "--export", str(d), img)
        got = sorted(p.name[:-len("_chefer.npy")] for p in d.glob("*_chefer.npy"))
        check(rc == 0 and got == [want] and len(want.encode()) <= 48,
              f"--text {text!r} --export: named {got} (want [{want!r}]) ({e[-200:]!r})")
    check(phrase_stem(long_phrase) == long_phrase[:48].rstrip().replace(" ", "-") and
          phrase_stem("un chat noir à Paris 🐈") == "un-chat-noir-à-paris-🐈",
          "the test's own phrase_stem on two phrases written out by hand")
    for kind in ("chefer", "legrad", "grad-input"):
        try:
            x = np.load(ex["hf"] / f"a-red-umbrella_{kind}.npy")
            y = np.load(ex["openai"] / f"a-red-umbrella_{kind}.npy")
            err = float(np.abs(x - y).max() / max(np.abs(x).max(), 1e-30))
        except (OSError, ValueError) as exc:
            err = str(exc)
        check(isinstance(err, float) and err < 1e-4,
              f"--text, {kind}: both naming schemes give the same map (rel. diff {err})")
    rc, o, e = run(app, "--model", str(hf), "--text", "a red umbrella", "--top", "1", img)
    check(rc == 0 and top(o) == [(1, 1.0, 0, "a red umbrella")],
          f"--text alone --top 1: one class, the phrase, probability 1 ({o.strip()!r} {e!r})")
    long_text = " ".join(["a cat"] * 60)  # 120 words, 360 bytes
    rc, o, e = run(app, "--model", str(hf), "--classes", "cat", "--text", long_text, "--top", "2",
                   img)
    check(rc == 0 and "cut to CLIP's 77 tokens" in e and len(top(o)) == 2,
          f"a phrase of 120 words: cut to 77 tokens, with a notice ({e!r})")
    d = out / "eval"
    rc, o, e = run(app, "--model", str(hf), "--classes", "cat, dog", "--text", "a red umbrella",
                   "--eval", img, "--eval-out", str(d), "--no-sanity", "--eval-steps", "4")
    check(rc == 0 and (d / "summary.md").exists(), f"--text with --eval runs ({e[-300:]!r})")

    # --- bad input: a message naming the option or file
    refused(app, ["--model", str(hf), "--text", "", "--top", "1", img], 2,
            ["--text", "empty phrase"], "--text \"\"")
    refused(app, ["--model", str(hf), "--text", "   ", "--export", str(out / "x"), img], 2,
            ["--text", "empty phrase"], "--text of spaces")
    refused(app, ["--model", str(hf), "--classes", "cat,,dog", "--top", "1", img], 1,
            ["--classes", "empty name"], "--classes \"cat,,dog\"")
    refused(app, ["--model", str(hf), "--classes", "cat", "--template", "a photo", "--top", "1",
                  img], 2, ["--template", "{}"], "--template without {}")
    refused(app, ["--model", str(hf), "--classes", "cat", "--prompts", str(prompts), "--top", "1",
                  img], 2, ["--classes", "--prompts"], "--classes with --prompts")
    refused(app, ["--model", str(hf), "--class", "0", "--text", "a cat", "--top", "1", img], 2,
            ["--class", "--text"], "--class with --text")
    refused(app, ["--model", str(hf), "--prompts", str(out / "none.txt"), "--top", "1", img], 1,
            ["--prompts", "none.txt"], "--prompts of a missing file")
    comments = out / "comments.txt"
    comments.write_text("# nothing but\n\n# comments\n")
    refused(app, ["--model", str(hf), "--prompts", str(comments), "--top", "1", img], 1,
            ["--prompts", "comments.txt", "no line"], "--prompts of comments only")
    refused(app, ["--model", str(hf), "--text", "a cat", "--vocab", str(out / "no-vocab.txt.gz"),
                  "--top", "1", img], 1, ["--vocab", "no-vocab.txt.gz"], "--vocab of a missing file")
    bad_gz = out / "bad_vocab.txt.gz"
    bad_gz.write_bytes(b"this is not gzip data" * 10)
    refused(app, ["--model", str(hf), "--text", "a cat", "--vocab", str(bad_gz), "--top", "1",
                  img], 1, ["--vocab", "bad_vocab.txt.gz"], "--vocab of a corrupt .gz")
    bad_dir = out / "bad-hf-vocab"
    bad_dir.mkdir(exist_ok=True)
    cm.write_hf_vocab(a.vocab, bad_dir)
    (bad_dir / "merges.txt").write_text("#version: 0.2\ni n\nthis line has three\n")
    refused(app, ["--model", str(hf), "--text", "a cat", "--vocab", str(bad_dir), "--top", "1",
                  img], 1, ["--vocab", "merges.txt"], "--vocab of a broken merges.txt")
    refused(app, ["--model", str(novocab), "--text", "a cat", "--top", "1", img], 1,
            ["--text", "vocabulary", "--vocab", str(novocab)], "a model with no vocabulary beside it")
    rc, o, e = run(app, "--model", str(novocab), "--vocab", a.vocab, "--text", "a cat", "--top",
                   "1", img)
    check(rc == 0 and top(o)[:1] == [(1, 1.0, 0, "a cat")],
          f"the same with --vocab: runs ({e!r})")
    r = subprocess.run([app.encode(), b"--model", str(hf).encode(), b"--text", b"caf\xff",
                        b"--top", b"1", img.encode()], capture_output=True)
    err = r.stderr.decode("utf-8", "replace")
    check(r.returncode == 1 and "--text" in err and "UTF-8" in err,
          f"--text of invalid UTF-8: exit {r.returncode}, {err.strip()!r}")
    refused(app, ["--model", str(image_only), "--text", "a cat", "--top", "1", img], 1,
            ["--text", "model.safetensors", "no text tower"],
            "a checkpoint with only its image tower, --text")
    d = out / "export-image-only"
    rc, o, e = run(app, "--model", str(image_only), "--export", str(d), img)
    check(rc == 0 and (d / "L01_H01.npy").exists() and (d / "L02_rollout.npy").exists(),
          f"the image tower alone: --export writes every image view ({e!r})")
    refused(app, ["--model", str(image_only), "--top", "1", img], 1,
            ["no classification head", "--classes"], "the image tower alone, --top")
    refused(app, ["--model", str(text_only), "--top", "1", img], 1,
            ["model.safetensors", "text tower only", "no image tower"],
            "a checkpoint with only its text tower")
    refused(app, ["--model", a.builtin, "--text", "a cat", "--top", "1", img], 1,
            ["--text", "not a CLIP model"], "--text on a model that is not CLIP")
    refused(app, ["--model", a.builtin, "--classes", "cat", "--export", str(out / "y"), img], 1,
            ["--classes", "not a CLIP model"], "--classes on a model that is not CLIP")

    print(f"cli_clip: {'all checks passed' if not FAILS else f'{len(FAILS)} checks failed'}")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
