#!/usr/bin/python3
"""SigLIP's tokenizer (engine/text/spiece.c) against a reference written here from Hugging
Face's SiglipTokenizer and the processor's text call (transformers tokenization_siglip.py
@ 095a021d704b, tokenization_utils.py's PreTrainedTokenizer.tokenize and prepare_for_model;
transformers is not installed, so its steps are written out below).

    /usr/bin/python3 test_siglip_tokenizer.py --dump tok_dump --work DIR [--n 3000]
                                              [--control NAME]

There is no published spiece.model here (no internet): the test trains a small unigram
SentencePiece model (Debian's python3-sentencepiece, the same library as the engine's) with
T5's special ids (pad 0, </s> 1, <unk> 2, no BOS) and nmt_nfkc normalisation, on a corpus
written here, at a character coverage that leaves rare characters unknown.

Checks, on N strings drawn with a fixed seed plus hand-picked ones (punctuation of every
ASCII mark, runs of whitespace of Python's every kind, capitals, Greek's final sigma,
"İ", accents composed and decomposed, CJK, emoji, a literal "▁", the special tokens' text
"</s>" and "<unk>" in any case and with spaces around, texts that need more than 64 ids):
  - the 64 ids equal the reference's, and the "cut" flag too;
  - vit_tokenizer_find finds spiece.model beside a model file;
  - invalid UTF-8 and a text over the limit are refused; a model file that is not one,
    and a model without "</s>", are refused with a message naming the file.
--control NAME: the reference makes one plausible mistake (keep_punct: punctuation kept;
keep_case: no lower-casing; whole_lower: str.lower on the whole text (final sigma);
dummy_prefix: the model's dummy prefix left on and no "<unk>" trick; no_unk_trick: the
dummy prefix off but the first word encoded alone; pad0: padded with id 0; cut64: a long
text cut to its first 64 pieces, "</s>" not kept last). The run then exits 0 only when the
comparison caught the mistake on at least the given share of the strings. Two mistakes no
test can see, since the padding is "</s>" itself: "</s>" not appended, and the whitespace
around a special token not stripped (canonicalize_text strips it anyway).
"""
import argparse
import random
import re
import string
import subprocess
import sys
from pathlib import Path

try:
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb
except ImportError:  # Debian's python3-sentencepiece (with python3-protobuf)
    print("SKIP: no python3-sentencepiece")
    sys.exit(77)

UNDERLINE = "\u2581"
SPECIALS = ("</s>", "<unk>")
MAX_LEN = 64

# --- the reference: Hugging Face's steps ------------------------------------------------


class Reference:
    def __init__(self, model_path, control=None):
        self.control = control
        proto = pb.ModelProto.FromString(Path(model_path).read_bytes())
        if control != "dummy_prefix":  # SiglipTokenizer.get_spm_processor
            spec = pb.NormalizerSpec()
            spec.add_dummy_prefix = False
            proto.normalizer_spec.MergeFrom(spec)
        self.sp = spm.SentencePieceProcessor()
        self.sp.LoadFromSerializedProto(proto.SerializeToString())
        self.eos = self.sp.piece_to_id("</s>")
        self.added = {"</s>": self.eos, "<unk>": self.sp.piece_to_id("<unk>")}
        self.pad = 0 if control == "pad0" else self.eos  # pad_token "</s>"
        self.unk_len = len(self.sp.encode("<unk>"))  # unk_token_length

    def canonicalize(self, text):  # canonicalize_text, keep_punctuation_exact_string=None
        if self.control != "keep_punct":
            text = text.translate(str.maketrans("", "", string.punctuation))
        text = re.sub(r"\s+", " ", text)
        return text.strip()

    def _tokenize(self, text):
        text = self.canonicalize(text)
        if self.control in ("dummy_prefix", "no_unk_trick"):
            return self.sp.encode(text, out_type=str)
        tokens = self.sp.encode("<unk>" + text, out_type=str)
        return tokens[self.unk_len:] if len(tokens) >= self.unk_len else tokens

    def tokenize(self, text):
        text = UNDERLINE + text.replace(UNDERLINE, " ")  # SiglipTokenizer.tokenize
        if self.control == "whole_lower":
            text = text.lower()
        elif self.control != "keep_case":  # do_lower_case: one character at a time
            pat = r"(" + "|".join(re.escape(s) for s in SPECIALS) + r")|" + r"(.+?)"
            text = re.sub(pat, lambda m: m.groups()[0] or m.groups()[1].lower(), text)
        # tokens_trie.split: the added tokens' text, no empty pieces
        tokens = [t for t in re.split("(" + "|".join(re.escape(s) for s in SPECIALS) + ")", text)
                  if t]
        for i, tok in enumerate(tokens):  # AddedToken(lstrip=True, rstrip=True)
            if tok in SPECIALS:
                if i + 1 < len(tokens) and tokens[i + 1]:
                    tokens[i + 1] = tokens[i + 1].lstrip()
                if i > 0 and tokens[i - 1]:
                    tokens[i - 1] = tokens[i - 1].rstrip()
        out = []
        for tok in tokens:
            if not tok:
                continue
            out.extend([tok] if tok in SPECIALS else self._tokenize(tok))
        if len(out) > 1 and out[0] == UNDERLINE and out[1] in SPECIALS:
            out = out[1:]
        return out

    def __call__(self, text):
        """processor(text=[text], padding="max_length", truncation=True): (ids, cut)."""
        ids = [self.added[t] if t in self.added else self.sp.piece_to_id(t)
               for t in self.tokenize(text)]
        cut = len(ids) + 1 > MAX_LEN  # prepare_for_model: one special token to add
        if cut:
            ids = ids[:MAX_LEN if self.control == "cut64" else MAX_LEN - 1]
        if not (ids and ids[-1] == self.eos) and len(ids) < MAX_LEN:
            ids = ids + [self.eos]  # _add_eos_if_not_present (never past 64: cut first)
        return ids + [self.pad] * (MAX_LEN - len(ids)), cut


# --- the model and the strings ----------------------------------------------------------

WORDS = ("a photo of the cat dog red umbrella espresso cup on table in rain two green "
         "triangles blue square left right small large bird car street night sky tree sea "
         "house zebra quick brown fox jumps over lazy new york picture apple of an").split()
ACCENTED = ["café", "naïve", "résumé", "Ångström", "jalapeño", "São Paulo", "Zürich", "façade",
            "crème brûlée", "Dvořák", "Łódź", "niño", "Ærø", "İstanbul", "straße", "ΟΔΟΣ",
            "Σίσυφος", "ΣΑΣ σας", "Москва", "Ελλάδα", "ǅemal", "cafe\u0301", "ﬁsh", "Ｆｕｌｌ"]
OTHER = ["東京タワー", "北京", "한국어", "ひらがな", "العربية", "😀", "🐱", "👍🏽", "☕", "½", "²", "™"]
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2003", "\u1680", "\x1c", "\x85",
          "\u202f", " \t \n "]


def corpus(rng):
    lines = []
    for _ in range(3000):
        n = rng.randint(3, 12)
        words = [rng.choice(WORDS) for _ in range(n)]
        if rng.random() < 0.3:
            words.insert(rng.randrange(n), rng.choice(ACCENTED).lower())
        if rng.random() < 0.05:
            words.insert(rng.randrange(n), rng.choice(OTHER))
        if rng.random() < 0.2:
            words.insert(rng.randrange(n), str(rng.randint(0, 2000)))
        lines.append(" ".join(words))
    return lines


def random_text(rng):
    parts = []
    for _ in range(rng.choice([1, 2, 3, 5, 8, 40])):
        r = rng.random()
        w = rng.choice(WORDS)
        if r < 0.15:
            w = w.capitalize() if rng.random() < 0.5 else w.upper()
        elif r < 0.3:
            w = rng.choice(ACCENTED)
        elif r < 0.36:
            w = rng.choice(OTHER)
        elif r < 0.42:
            w = rng.choice(string.punctuation) * rng.randint(1, 3) + w
        elif r < 0.48:
            w = w + rng.choice(string.punctuation)
        elif r < 0.51:
            w = rng.choice(["</s>", "<unk>", "<UNK>", "</S>", " </s> ", "<pad>", UNDERLINE])
        elif r < 0.54:
            w = str(rng.randint(0, 99999))
        parts.append(w)
        parts.append(rng.choice(SPACES) if rng.random() < 0.2 else " ")
    text = "".join(parts)
    if rng.random() < 0.2:
        text = rng.choice(SPACES) + text
    if rng.random() < 0.3:
        text = text.rstrip() + rng.choice(SPACES)
    return text


HAND = ["an apple", "a picture of an apple", "A Cat.", "a photo of a dog!", "  many   spaces  ",
        "tabs\tand\nnewlines", "ΟΔΟΣ", "İstanbul", "straße", "C'est l'été", "U.S.A.", "e-mail",
        "a_b", "`backtick`", "{braces} [brackets] (parens) <angles>", "100% sure", "1,000.5",
        "\u2581leading underline", "mid\u2581underline", "</s>", "a cat</s>", "a cat </s>",
        "</s>a cat", "<unk> dog", "a <unk> b", "<UNK> dog", "a</s></s>b", "!!!", "?", "é",
        "e\u0301", "😀 cat", "東京", "ﬁsh", "Ｆｕｌｌ ｗｉｄｔｈ", "non\u00a0breaking",
        "ideographic\u3000space", "x\x1cy", "x\x85y", "word " * 70, "elephant " * 63,
        "a b c d e f g h i j k l m n o p q r s t u v w x y z " * 3, "café ½ ² ™"]

# share of the strings each control's mistake must change
CONTROL_SHARE = {"keep_punct": 0.05, "keep_case": 0.05, "whole_lower": 0.001, "dummy_prefix": 0.1,
                 "no_unk_trick": 0.3, "pad0": 0.5, "cut64": 0.05}


def run_dump(dump, vocab, texts, work, name, max_ids=MAX_LEN):
    f = work / f"{name}.hex"
    f.write_text("".join(t.encode("utf-8", "surrogateescape").hex() + "\n" for t in texts))
    return subprocess.run([dump, str(vocab), str(f), str(max_ids)], capture_output=True, text=True,
                          timeout=600)


def train(work, name, **extra):
    rng = random.Random(35)
    (work / f"{name}.txt").write_text("\n".join(corpus(rng)) + "\n")
    args = dict(input=str(work / f"{name}.txt"), model_prefix=str(work / name), vocab_size=350, hard_vocab_limit=False,
                model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
                character_coverage=0.995, num_threads=1, minloglevel=2)
    args.update(extra)
    spm.SentencePieceTrainer.train(**args)
    return work / f"{name}.model"


FAILS = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--control", choices=sorted(CONTROL_SHARE))
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    model = train(work, "spiece")
    ref = Reference(model, a.control)
    rng = random.Random(2024)
    texts = HAND + [random_text(rng) for _ in range(a.n)]
    r = run_dump(a.dump, model, texts, work, "texts")
    check(r.returncode == 0, f"tok_dump on {len(texts)} strings: exit {r.returncode} {r.stderr[:300]}")
    lines = r.stdout.splitlines()
    check(len(lines) == len(texts), f"{len(lines)} lines for {len(texts)} strings")
    mism, shown, n_cut = 0, 0, 0
    for text, line in zip(texts, lines):
        want, cut = ref(text)
        n_cut += cut
        got = line.split()
        exp = ["cut" if cut else "ok"] + [str(i) for i in want]
        if got != exp:
            mism += 1
            if shown < 5 and not a.control:
                shown += 1
                print(f"  differs on {text!r}:\n    engine    {' '.join(got)}\n"
                      f"    reference {' '.join(exp)}\n"
                      f"    pieces    {ref.tokenize(text)}")
    if a.control:
        share = CONTROL_SHARE[a.control]
        if FAILS or mism < share * len(texts):
            print(f"CONTROL FAILED: the mistake '{a.control}' differs on {mism} of {len(texts)} "
                  f"strings (needs {share:.1%})")
            return 1
        print(f"control ok: the mistake '{a.control}' differs on {mism} of {len(texts)} strings")
        return 0
    print(f"     {len(texts)} strings, {n_cut} cut at {MAX_LEN} ids")
    check(mism == 0, f"ids equal the reference's on all {len(texts)} strings ({mism} differ)")
    check(n_cut >= 10, f"{n_cut} strings needed cutting (at least 10 exercise the cut)")
    # the hand-picked cases' expectations, independent of the reference
    pieces = ref.tokenize("A Cat.")
    check(pieces == ref.tokenize("a cat"), f"'A Cat.' is 'a cat': {pieces}")
    # vit_tokenizer_find beside a model file
    (work / "m").mkdir(exist_ok=True)
    (work / "m" / "spiece.model").write_bytes(model.read_bytes())
    (work / "m" / "model.safetensors").write_bytes(b"")
    r = subprocess.run([a.dump, "--find", str(work / "m" / "model.safetensors")],
                       capture_output=True, text=True)
    check(r.stdout.strip() == str(work / "m" / "spiece.model"), f"--find: {r.stdout.strip()}")
    # the folder itself as the vocabulary
    r = run_dump(a.dump, work / "m", ["a cat"], work, "folder")
    check(r.stdout.split() == ["ok"] + [str(i) for i in ref("a cat")[0]],
          f"the folder with spiece.model: {r.stdout.strip()[:60]}")
    # bad text: refused, no crash
    f = work / "bad.hex"
    f.write_text("ff61\n" + "c3\n" + ("61" * 20000) + "\n")
    r = subprocess.run([a.dump, str(model), str(f), "64"], capture_output=True, text=True)
    check(r.returncode == 0 and r.stdout.splitlines() == ["err argument"] * 3,
          f"invalid UTF-8 (2 kinds), 20000 bytes: {r.stdout.splitlines()}")
    # bad models: a message naming the file, exit 1
    bad = work / "garbage.model"
    bad.write_bytes(b"\x0a\xff\xff\xff\xff\x0f" + bytes(range(256)))
    no_eos = train(work, "noeos", eos_id=-1, pad_id=-1, unk_id=0)
    for m in (bad, no_eos, work / "missing.model"):
        r = run_dump(a.dump, m, ["a"], work, "badmodel")
        check(r.returncode == 1 and m.name in r.stderr and "Traceback" not in r.stderr,
              f"model {m.name}: exit {r.returncode}: {r.stderr.strip()[:160]}")
    print("FAILED: " + "; ".join(FAILS) if FAILS else "all ok")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
