#!/usr/bin/python3
"""SigLIP 2's tokenizer (engine/text/spiece.c over Gemma's tokenizer.model) against a reference
written here from big_vision's SigLIP 2 pipeline (SigLIP2_demo.ipynb:
lower(key="text")|tok(length=64, model="gemma", bos="no", eos="sticky"); pp/ops_text.py
get_lower = tf.strings.lower with its default encoding "" (ASCII), SentencepieceTokenizer.to_int
= [bos] + sp.EncodeAsIds(text) + [eos]; pp/proj/paligemma/ops.py get_tokenize / get_tolen:
length >= 64 -> ids[:63] + ids[-1:], else padded with sp.pad_id()). TensorFlow is not
installed: the steps are written out below, over the same SentencePiece library.

    /usr/bin/python3 test_gemma_tokenizer.py --dump tok_dump --work DIR [--n 3000]
                                             [--control NAME]

Gemma's tokenizer.model is not here (no internet, and it is licensed): the test trains a small
BPE SentencePiece model with Gemma's settings (Debian's python3-sentencepiece): "<pad>" 0,
"<eos>" 1, "<bos>" 2, "<unk>" 3, byte fallback, normalizer "identity", no dummy prefix, no
whitespace removal, digits split, whitespace-only pieces allowed, a few user-defined symbols
("<mask>", "<start_of_turn>", "<end_of_turn>"); at a character coverage that leaves rare
characters (CJK, emoji) to the byte pieces.

Checks, on N strings drawn with a fixed seed plus hand-picked ones (ASCII, every punctuation
mark, capitals, accented and Greek capitals, Cyrillic, CJK, emoji, "<eos>" typed, whitespace
of several kinds, texts of 63, 64, 65 ids and far longer):
  - the 64 ids equal the reference's, and the "cut" flag too (cuts and the boundary covered);
  - independent of the reference: an emoji is its UTF-8 bytes' "<0xNN>" pieces, "A Cat." is
    "a cat." (punctuation kept) and not "a cat", "ÉCOLE" keeps its "É", position 63 of a short
    text is "<pad>" (0);
  - the model is recognised as Gemma's (vit_tokenizer_kind), SigLIP's trained spiece.model
    as SigLIP's; vit_tokenizer_find finds tokenizer.model beside a model file; the folder
    works as the vocabulary;
  - invalid UTF-8 refused; a model with "<eos>"/"<pad>" but no byte fallback (neither kind) and
    a garbage file refused with a message naming the file.
--control NAME: the reference makes one plausible mistake (unicode_lower: str.lower (all of
Unicode, as transformers' Siglip2Tokenizer does); keep_case: no lower-casing; pad_eos: padded
with "<eos>" as SigLIP pads; cut_plain: a long text cut to its first 64 ids, "<eos>" lost; bos:
"<bos>" prepended; no_eos: "<eos>" not appended; dummy_prefix: the model's dummy prefix turned
on). The run then exits 0 only when the comparison caught it on at least the given share of
the strings.
"""
import argparse
import random
import string
import subprocess
import sys
from pathlib import Path

import test_siglip_tokenizer as st  # exits 77 without python3-sentencepiece

spm, pb = st.spm, st.pb

MAX_LEN = 64
ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
USER_SYMBOLS = ["<mask>", "<start_of_turn>", "<end_of_turn>"]

# --- the reference: big_vision's steps --------------------------------------------------


class Reference:
    def __init__(self, model_path, control=None):
        self.control = control
        proto = pb.ModelProto.FromString(Path(model_path).read_bytes())
        if control == "dummy_prefix":
            proto.normalizer_spec.add_dummy_prefix = True
        self.sp = spm.SentencePieceProcessor()
        self.sp.LoadFromSerializedProto(proto.SerializeToString())
        self.eos, self.pad, self.bos = self.sp.eos_id(), self.sp.pad_id(), self.sp.bos_id()

    def lower(self, text):  # tf.strings.lower(text): encoding "" is ASCII
        if self.control == "unicode_lower":
            return text.lower()
        return text if self.control == "keep_case" else text.translate(ASCII_LOWER)

    def __call__(self, text):
        """-> (64 ids, cut)."""
        ids = self.sp.EncodeAsIds(self.lower(text))  # SentencepieceTokenizer.to_int
        if self.control == "bos":
            ids = [self.bos] + ids
        if self.control != "no_eos":
            ids = ids + [self.eos]
        cut = len(ids) > MAX_LEN
        if len(ids) >= MAX_LEN:  # get_tolen(sticky_end=True)
            ids = ids[:MAX_LEN] if self.control == "cut_plain" else ids[:MAX_LEN - 1] + ids[-1:]
        pad = self.eos if self.control == "pad_eos" else self.pad
        return ids + [pad] * (MAX_LEN - len(ids)), cut


def train(work, name, **extra):
    """A Gemma-like BPE model trained on st.corpus's lines (and some with capitals)."""
    rng = random.Random(35)
    lines = st.corpus(rng)
    lines += [ln.title() for ln in lines[:300]] + ["<start_of_turn>user " + ln for ln in lines[:50]]
    (work / f"{name}.txt").write_text("\n".join(lines) + "\n")
    args = dict(input=str(work / f"{name}.txt"), model_prefix=str(work / name), vocab_size=600,
                hard_vocab_limit=False, model_type="bpe", byte_fallback=True,
                pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>",
                bos_piece="<bos>", unk_piece="<unk>", user_defined_symbols=USER_SYMBOLS,
                normalization_rule_name="identity", add_dummy_prefix=False,
                remove_extra_whitespaces=False, split_digits=True,
                allow_whitespace_only_pieces=True, character_coverage=0.995, num_threads=1,
                minloglevel=2)
    args.update(extra)
    spm.SentencePieceTrainer.train(**args)
    return work / f"{name}.model"


def random_text(rng):
    parts = []
    for _ in range(rng.choice([1, 2, 3, 5, 8, 40])):
        r = rng.random()
        w = rng.choice(st.WORDS)
        if r < 0.2:
            w = w.capitalize() if rng.random() < 0.5 else w.upper()
        elif r < 0.32:
            w = rng.choice(st.ACCENTED)
            w = w.upper() if rng.random() < 0.3 else w
        elif r < 0.4:
            w = rng.choice(st.OTHER)
        elif r < 0.46:
            w = rng.choice(string.punctuation) * rng.randint(1, 3) + w
        elif r < 0.52:
            w = w + rng.choice(string.punctuation)
        elif r < 0.55:
            w = rng.choice(["<eos>", "<pad>", "<bos>", "<EOS>", "<mask>", "<start_of_turn>", "</s>"])
        elif r < 0.58:
            w = str(rng.randint(0, 99999))
        parts.append(w)
        parts.append(rng.choice(st.SPACES) if rng.random() < 0.2 else " ")
    text = "".join(parts)
    if rng.random() < 0.2:
        text = rng.choice(st.SPACES) + text
    return text.rstrip() if rng.random() < 0.7 else text


HAND = ["an apple", "a picture of an apple", "A Cat.", "a cat.", "a cat", "A PHOTO OF A DOG!",
        "ÉCOLE", "école", "ΟΔΟΣ", "Москва", "İstanbul", "straße", "東京タワー", "😀", "😀 cat",
        "👍🏽", "<eos>", "a cat<eos>", "<pad>", "<start_of_turn>user a cat", "<mask>",
        string.punctuation, "  many   spaces  ", "tabs\tand\nnewlines", "1,000.5 and 2024",
        "", " ", "\u2581leading underline", "café ½ ² ™"]
HAND += [" ".join(["cat"] * k) for k in range(58, 68)] + ["elephant " * 70, "😀" * 40]

CONTROL_SHARE = {"unicode_lower": 0.1, "keep_case": 0.3, "pad_eos": 0.5, "cut_plain": 0.05,
                 "bos": 0.9, "no_eos": 0.9, "dummy_prefix": 0.5}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--control", choices=sorted(CONTROL_SHARE))
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    model = train(work, "tokenizer")
    ref = Reference(model, a.control)
    rng = random.Random(2025)
    texts = HAND + [random_text(rng) for _ in range(a.n)]
    r = st.run_dump(a.dump, model, texts, work, "texts")
    st.check(r.returncode == 0, f"tok_dump on {len(texts)} strings: exit {r.returncode} "
             f"{r.stderr[:300]}")
    lines = r.stdout.splitlines()
    st.check(len(lines) == len(texts), f"{len(lines)} lines for {len(texts)} strings")
    mism, shown, n_cut, lens = 0, 0, 0, set()
    plain = Reference(model)
    for text, line in zip(texts, lines):
        want, cut = ref(text)
        n_cut += cut
        lens.add(len(plain.sp.EncodeAsIds(text.translate(ASCII_LOWER))) + 1)
        exp = ["cut" if cut else "ok"] + [str(i) for i in want]
        if line.split() != exp:
            mism += 1
            if shown < 5 and not a.control:
                shown += 1
                print(f"  differs on {text!r}:\n    engine    {line}\n"
                      f"    reference {' '.join(exp)}")
    if a.control:
        share = CONTROL_SHARE[a.control]
        if st.FAILS or mism < share * len(texts):
            print(f"CONTROL FAILED: the mistake '{a.control}' differs on {mism} of {len(texts)} "
                  f"strings (needs {share:.1%})")
            return 1
        print(f"control ok: the mistake '{a.control}' differs on {mism} of {len(texts)} strings")
        return 0
    print(f"     {len(texts)} strings, {n_cut} cut at {MAX_LEN} ids")
    st.check(mism == 0, f"ids equal the reference's on all {len(texts)} strings ({mism} differ)")
    st.check(n_cut >= 10, f"{n_cut} strings needed cutting (at least 10 exercise the cut)")
    st.check({63, 64, 65} <= lens, "texts of exactly 63, 64 and 65 ids (with <eos>) are among them")

    # expectations independent of the reference, read from the engine's own output
    def engine(*ts):
        r = st.run_dump(a.dump, model, list(ts), work, "hand")
        return [ln.split() for ln in r.stdout.splitlines()]
    sp = plain.sp
    emoji = engine("😀")[0]
    want = ["ok"] + [str(sp.piece_to_id(f"<0x{b:02X}>")) for b in "😀".encode()] + ["1"]
    st.check(emoji[:6] == want and all(sp.is_byte(int(i)) for i in emoji[1:5]),
             f"an emoji is its 4 UTF-8 bytes' pieces, then <eos>: {emoji[:6]}")
    upper, dot, bare, ecole = engine("A Cat.", "a cat.", "a cat", "ÉCOLE")
    st.check(upper == dot and dot != bare, "'A Cat.' is 'a cat.' (lower-cased), not 'a cat' "
             "(punctuation kept)")
    e_acute, e_low = engine("École", "école")
    st.check(ecole == e_acute and ecole != e_low, "'ÉCOLE' is 'École': its É kept (ASCII "
             "lower-casing only)")
    st.check(bare[-1] == "0" and bare[1:].count("1") == 1, f"a short text: one <eos>, position 63 "
             f"<pad> 0: {' '.join(bare[:8])} ... {bare[-1]}")
    # which tokenizer: Gemma's, SigLIP's
    r = subprocess.run([a.dump, "--kind", str(model)], capture_output=True, text=True)
    st.check(r.stdout.strip() == "gemma", f"recognised as Gemma's: {r.stdout.strip()} {r.stderr}")
    siglip = st.train(work, "spiece")
    r = subprocess.run([a.dump, "--kind", str(siglip)], capture_output=True, text=True)
    st.check(r.stdout.strip() == "siglip", f"SigLIP's spiece.model still SigLIP's: {r.stdout}")
    # vit_tokenizer_find beside a model file; the folder as the vocabulary
    (work / "m").mkdir(exist_ok=True)
    (work / "m" / "tokenizer.model").write_bytes(model.read_bytes())
    (work / "m" / "model.safetensors").write_bytes(b"")
    r = subprocess.run([a.dump, "--find", str(work / "m" / "model.safetensors")],
                       capture_output=True, text=True)
    st.check(r.stdout.strip() == str(work / "m" / "tokenizer.model"), f"--find: {r.stdout.strip()}")
    r = st.run_dump(a.dump, work / "m", ["a cat"], work, "folder")
    st.check(r.stdout.split() == ["ok"] + [str(i) for i in ref("a cat")[0]],
             f"the folder with tokenizer.model: {r.stdout.strip()[:60]}")
    # bad text: refused, no crash
    f = work / "bad.hex"
    f.write_text("ff61\n" + "c3\n" + "eda080\n")
    r = subprocess.run([a.dump, str(model), str(f), "64"], capture_output=True, text=True)
    st.check(r.returncode == 0 and r.stdout.splitlines() == ["err argument"] * 3,
             f"invalid UTF-8 (3 kinds): {r.stdout.splitlines()}")
    # neither kind: "<eos>"/"<pad>" without byte fallback; garbage
    nobytes = train(work, "nobytes", byte_fallback=False)
    bad = work / "garbage.model"
    bad.write_bytes(b"\x0a\xff\xff\xff\xff\x0f" + bytes(range(256)))
    for m in (nobytes, bad):
        r = st.run_dump(a.dump, m, ["a"], work, "badmodel")
        st.check(r.returncode == 1 and m.name in r.stderr and "Traceback" not in r.stderr,
                 f"model {m.name}: exit {r.returncode}: {r.stderr.strip()[:200]}")
    print("FAILED: " + "; ".join(st.FAILS) if st.FAILS else "all ok")
    return 1 if st.FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
