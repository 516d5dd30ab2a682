#!/usr/bin/python3
"""CLIP's tokenizer (engine/text/tokenizer.c) against a reference written here from the
published algorithm (OpenAI's clip/simple_tokenizer.py, Radford et al. 2021).

    /usr/bin/python3 test_tokenizer.py --dump tok_dump --vocab bpe_simple_vocab_16e6.txt.gz
                                       --work DIR [--n 10000] [--control no_w|rank]

The reference: bytes_to_unicode; the vocabulary from the merges (lines 2 .. 48895 of the
file); the cleaning: ftfy.fix_text's deterministic steps written here from ftfy 6's source
(ftfy is not in Debian; fix_encoding, its mojibake repair, is left out on both sides),
Python's own html.unescape twice, strip, the regex module's `\\s+` -> ' ', str.lower(); the
split with the `regex` module's pattern (IGNORECASE); BPE by rank; [SOT] + ids + [EOT] cut
as clip.tokenize(truncate=True) cuts it. Checked once by hand against ftfy 6 (git 74dd045)
and OpenAI's clip/simple_tokenizer.py themselves on these 10 000 strings: 0 differ with
fix_encoding off, 6 with it on (strings that look like mojibake, e.g. "&Atilde;—" -> "×").

Checks, on N strings drawn with a fixed seed (words, punctuation, digits, accents
composed and decomposed, emoji, CJK, Greek's final sigma, ligatures, full-width letters,
curly quotes, HTML entities, runs of whitespace and control characters, contractions, the
special tokens' text, 100+ word sentences that must be cut):
  - the ids equal the reference's, and so does the "cut" flag;
  - the same ids from Hugging Face's form of the vocabulary (vocab.json + merges.txt,
    written here from the .gz), given as a folder and as the vocab.json;
  - vit_tokenizer_find beside a model, in its tokenizer/ folder, for a model's folder;
  - bad input: empty and whitespace-only text, invalid UTF-8, a text over the limit;
  - bad vocabularies: missing, a cut gzip, a merge line of one symbol, a merge of
    unknown symbols, a vocab.json that is not an object: a message naming the file.
--control no_w: the reference forgets the "</w>" of a word's last symbol; --control rank:
it merges the first pair that has a rank instead of the lowest-ranked. The run then exits
0 only when the comparison caught the mistake on most strings (a crash fails it).
"""
import argparse
import gzip
import html
import html.entities
import json
import random
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

try:
    import regex
except ImportError:  # Debian's python3-regex
    print("SKIP: no python3-regex")
    sys.exit(77)

SOT, EOT = "<|startoftext|>", "<|endoftext|>"


# --- the reference ---------------------------------------------------------------------

def bytes_to_unicode():
    """Printable Latin-1 bytes stand for themselves, the rest for U+0100 on."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    out, n = {}, 0
    for b in keep:
        out[b] = chr(b)
    for b in range(256):
        if b not in out:
            out[b] = chr(256 + n)
            n += 1
    return {b: out[b] for b in keep + [b for b in range(256) if b not in keep]}


# ftfy.fix_text's steps that tokenizer.c does, written here from ftfy 6's source
# (ftfy/__init__.py fix_text and fix_and_explain, fixes.py, chardata.py); ftfy itself is not
# in Debian 12. Not done, on both sides: fix_encoding (mojibake), fix_surrogates (UTF-8
# has none).
def _ftfy_entities():
    ent = {}
    for name, char in html.entities.html5.items():
        if name.endswith(";"):
            ent["&" + name] = char
            if name == name.lower():
                up = "&" + name.upper()
                if html.unescape(up) == up:
                    ent[up] = char.upper()
    return ent


FTFY_ENTITIES = _ftfy_entities()
FTFY_ENTITY_RE = re.compile(r"&#?[0-9A-Za-z]{1,24};")


def ftfy_unescape(text):
    def one(m):
        t = m.group(0)
        if t in FTFY_ENTITIES:
            return FTFY_ENTITIES[t]
        if t.startswith("&#"):
            u = html.unescape(t)
            return t if ";" in u else u
        return t
    return FTFY_ENTITY_RE.sub(one, text)


def _sloppy_1252(b):
    try:
        return bytes([b]).decode("cp1252")
    except UnicodeDecodeError:  # 0x81, 0x8D, 0x8F, 0x90, 0x9D: themselves
        return chr(b)


C1 = {c: _sloppy_1252(c) for c in range(0x80, 0xA0)}
LIGATURES = {ord(k): v for k, v in {"Ĳ": "IJ", "ĳ": "ij", "ŉ": "ʼn", "Ǳ": "DZ", "ǲ": "Dz",
             "ǳ": "dz", "Ǆ": "DŽ", "ǅ": "Dž", "ǆ": "dž", "Ǉ": "LJ", "ǈ": "Lj", "ǉ": "lj",
             "Ǌ": "NJ", "ǋ": "Nj", "ǌ": "nj", "ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi",
             "ﬄ": "ffl", "ﬅ": "ſt", "ﬆ": "st"}.items()}
WIDTH = {0x3000: " ", **{c: unicodedata.normalize("NFKC", chr(c)) for c in range(0xFF01, 0xFFF0)
                         if unicodedata.normalize("NFKC", chr(c)) != chr(c)}}
QUOTES = {0x2BC: "'", **{c: "'" for c in range(0x2018, 0x201C)},
          **{c: '"' for c in range(0x201C, 0x2020)}}
ANSI_RE = re.compile("\033\\[((?:\\d|;)*)([a-zA-Z])")
CONTROL = {c: None for c in [*range(0x00, 0x09), 0x0B, *range(0x0E, 0x20), 0x7F,
                             *range(0x206A, 0x2070), 0xFEFF, *range(0xFFF9, 0xFFFD)]}


# ftfy's per-character steps in its order, composed into one table (each maps characters
# alone, so chaining the tables on one character is chaining them on the text)
CHAR_FIXES = {c: chr(c).translate(C1).translate(LIGATURES).translate(WIDTH).translate(QUOTES)
              for c in {**C1, **LIGATURES, **WIDTH, **QUOTES}}


def fix_segment(text, html_on):
    while True:
        orig = text
        if html_on:
            text = ftfy_unescape(text)
        text = text.translate(CHAR_FIXES)  # fix_c1_controls .. uncurl_quotes, in turn
        text = (text.replace("\r\n", "\n").replace("\r", "\n").replace("\u2028", "\n")
                .replace("\u2029", "\n").replace("\u0085", "\n"))
        text = ANSI_RE.sub("", text).translate(CONTROL)
        text = unicodedata.normalize("NFC", text)
        if text == orig:
            return text


def fix_text(text):
    """ftfy.fix_text: line by line (each with its \\n), HTML off from a line with '<' on."""
    out, pos, html_on = [], 0, True
    while pos < len(text):
        end = text.find("\n", pos) + 1 or len(text)
        seg = text[pos:end]
        html_on = html_on and "<" not in seg
        out.append(fix_segment(seg, html_on))
        pos = end
    return "".join(out)


class Reference:
    def __init__(self, gz, mistake=None):
        merges = gzip.open(gz).read().decode("utf-8").split("\n")[1:49152 - 256 - 2 + 1]
        merges = [tuple(m.split()) for m in merges]
        self.byte_encoder = bytes_to_unicode()
        vocab = list(self.byte_encoder.values())
        vocab += [v + "</w>" for v in vocab] + ["".join(m) for m in merges] + [SOT, EOT]
        self.vocab = vocab
        self.encoder = {v: i for i, v in enumerate(vocab)}
        self.ranks = {m: i for i, m in enumerate(merges)}
        self.mistake = mistake
        self.pat = regex.compile(r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+""",
                                 regex.IGNORECASE)
        self.cache = {SOT: [SOT], EOT: [EOT]}  # the special tokens' text is the token

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        end = "" if self.mistake == "no_w" else "</w>"
        word = list(token[:-1]) + [token[-1] + end]
        while len(word) > 1:
            pairs = [(word[i], word[i + 1]) for i in range(len(word) - 1)]
            ranked = [p for p in pairs if p in self.ranks]
            if not ranked:
                break
            first, second = ranked[0] if self.mistake == "rank" else min(ranked, key=self.ranks.get)
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == first and word[i + 1] == second:
                    out.append(first + second)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            word = out
        self.cache[token] = word
        return word

    def encode(self, text, max_ids=77):
        # basic_clean, whitespace_clean (simple_tokenizer.py imports regex as re), lower
        text = html.unescape(html.unescape(fix_text(text))).strip()
        text = regex.sub(r"\s+", " ", text).strip().lower()
        ids = []
        for piece in self.pat.findall(text):
            piece = "".join(self.byte_encoder[b] for b in piece.encode("utf-8"))
            # the mistaken reference may make symbols the vocabulary lacks: -1
            ids += [self.encoder.get(s, -1) for s in self.bpe(piece)]
        ids = [self.encoder[SOT]] + ids + [self.encoder[EOT]]
        cut = len(ids) > max_ids
        if cut:
            ids = ids[:max_ids]
            ids[-1] = self.encoder[EOT]
        return ids, cut, text


# --- the strings -----------------------------------------------------------------------

WORDS = ("a photo of the cat dog red umbrella espresso cup on a table in the rain two green "
         "triangles blue square left right small large bird car street night sky "
         "tree Sea HOUSE Zebra quick Brown FOX jumps over lazy New York").split()
ACCENTED = ["café", "naïve", "résumé", "Ångström", "jalapeño", "São Paulo", "Zürich", "façade",
            "crème brûlée", "Dvořák", "Łódź", "coöperate", "niño", "Ærø", "Øresund", "İstanbul",
            "straße", "ΟΔΟΣ", "Σίσυφος", "ΣΑΣ σας", "Москва", "Київ", "Ελλάδα", "ǅemal"]
EMOJI = ["😀", "🐱", "👍🏽", "👩‍💻", "🇫🇷", "❤️", "☕", "🌧️", "🚗💨", "🧑🏿‍🚀"]
OTHER = ["東京タワー", "北京", "한국어", "ひらがな", "العربية", "עברית", "हिन्दी", "ไทย", "中文字",
         "ｆｕｌｌｗｉｄｔｈ", "ＡＢＣ１２３", "ﬁsh ﬂower ﬀ ﬃ ﬅ", "Ĳssel ŉ Ǆ", "“quoted” ‘single’ ʼtis",
         "„low“ ‚low‘", "½ ⅔ ² ³ ①", "Ⅻ", "٣٤٥", "১২৩"]
ENTITIES = ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;", "&nbsp;", "&#233;", "&#x1F600;", "&#65;",
            "&amp;lt;", "&#x27;", "&#8220;", "AT&T", "&unknown;", "&copy;", "& amp;",
            "&amp;amp;amp;", "&amp;amp;amp;amp;lt;", "&notit;", "&copy2024", "&ampx", "&#59;",
            "&#x3b;", "&#0;", "&#128;", "&#x9d;", "&#xD800;", "&#99999999999999999999;", "&#1;",
            "&#65279;", "&#x;", "&#;", "&#12ab;", "&EACUTE;", "&SZLIG;", "&AMP;", "&Eacute",
            "&eacute", "&AElig", "&frac12;", "&NotNestedGreaterGreater;", "&acE;", "&fjlig;",
            "a < b &amp;lt; c", "&lt;b&gt;", "&#x41;&#X42;&#67", "&&amp;;"]
HTML5 = sorted(html.entities.html5)
ANSI = ["\x1b[31m", "\x1b[1;32m", "\x1b[0m", "\x1b[m", "\x1b[٣m", "\x1b[", "\x1b[12"]
C1_TEXT = ["\x80", "\x81", "\x85", "\x91", "\x92", "\x93", "\x94", "\x96", "\x9d", "\x9f"]
HALFWIDTH = ["ﾊﾟﾝ", "ｶﾞｷﾞ", "ｱｲｳ", "￥100", "￠", "｟x｠", "｡｢｣", "ﾡﾢ", "ￂￃ", "￨￩"]
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u2003", "\u3000", "\u2028", " \t \n "]
CONTROLS = ["\x01", "\x07", "\x0b", "\x1b", "\x7f", "\ufeff", "\u206b", "\U000e0041", "\x0c", "\x85"]
PUNCT = [".", ",", "!", "?", "...", "--", "(", ")", "[x]", "{", "}", "#", "@", "$", "%", "^", "*",
         "+", "=", "/", "\\", "|", "~", "`", "<", ">", ";", ":", "'", '"', "-", "_", "…", "—", "¿", "¡"]
CONTRACTIONS = ["it's", "don't", "we're", "they've", "I'm", "you'll", "he'd", "IT'S", "Cat's",
                "o'clock", "rock'n'roll", "'twas", "isn't"]
DIGITS = ["0", "42", "3.14", "1,000,000", "2024-11-26", "v2", "x86_64", "ViT-B/16", "224px"]
SPECIAL = [SOT, EOT, "<|ENDOFTEXT|>", "<|endoftext", "|>"]


def entity(rng):
    """A random HTML reference: a name of the standard's (cut, upper-cased, without its
    ';'), or a number from the ranges html.unescape treats apart."""
    r = rng.random()
    if r < 0.5:
        name = rng.choice(HTML5)
        if rng.random() < 0.2:
            name = name.upper()
        if rng.random() < 0.2:
            name = name[:rng.randint(1, len(name))] + rng.choice(["", "x", "9;", ";"])
        return "&" + name
    v = rng.choice([rng.randint(0, 0x20), rng.randint(0x7E, 0xA0), rng.randint(0xD7F0, 0xE010),
                    rng.randint(0xFDC0, 0xFFFF), rng.randint(0x10000, 0x10FFFF),
                    rng.randint(0x10FFF0, 0x110010), rng.randint(0x20, 0x3000)])
    num = f"#x{v:x}" if r < 0.7 else f"#X{v:X}" if r < 0.75 else f"#{v}"
    return "&" + ("amp;" if rng.random() < 0.1 else "") + num + (";" if rng.random() < 0.85 else "")


def draw(rng):
    """One string: a mix of parts, sometimes long."""
    kinds = [WORDS, WORDS, WORDS, ACCENTED, EMOJI, OTHER, ENTITIES, PUNCT, CONTRACTIONS, DIGITS,
             SPECIAL, ANSI, C1_TEXT, HALFWIDTH, None]
    n = rng.choice([1, 2, 3, 5, 8, 13]) if rng.random() < 0.9 else rng.randint(100, 160)
    parts = []
    for _ in range(n):
        k = rng.choice(kinds)
        w = entity(rng) if k is None else rng.choice(k)
        if k is ACCENTED and rng.random() < 0.5:
            w = unicodedata.normalize("NFD", w)  # decomposed: NFC must compose it again
        if k is WORDS and rng.random() < 0.2:
            w = w.upper() if rng.random() < 0.5 else w.capitalize()
        if rng.random() < 0.05:
            w += rng.choice(CONTROLS)
        parts.append(w)
        r = rng.random()
        parts.append(rng.choice(SPACES) if r < 0.15 else "" if r < 0.25 else rng.choice(PUNCT)
                     if r < 0.35 else " ")
    s = "".join(parts)
    if rng.random() < 0.1:
        s = rng.choice(SPACES) + s + rng.choice(SPACES)
    if rng.random() < 0.03:  # random code points from assigned letters, marks and symbols
        s += "".join(chr(rng.choice([rng.randint(0x41, 0x24F), rng.randint(0x370, 0x52F),
                                     rng.randint(0x4E00, 0x4FFF), rng.randint(0x1F300, 0x1F5FF)]))
                     for _ in range(rng.randint(1, 12)))
    return s


# --- running ---------------------------------------------------------------------------

def run_dump(dump, vocab, texts, work, name, max_ids=77):
    f = work / f"{name}.hex"
    f.write_text("".join(t.encode("utf-8").hex() + "\n" for t in texts))
    r = subprocess.run([str(dump), str(vocab), str(f), str(max_ids)], capture_output=True, text=True)
    return r


def parse(out):
    res = []
    for line in out.splitlines():
        k, *ids = line.split()
        res.append((k, [int(i) for i in ids] if k != "err" else ids))
    return res


def write_hf(ref, d):
    """Hugging Face's files for the same vocabulary: vocab.json and merges.txt."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "vocab.json").write_text(json.dumps(ref.encoder, ensure_ascii=False))
    merges = sorted(ref.ranks, key=ref.ranks.get)
    (d / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--control", choices=["no_w", "rank"])
    a = ap.parse_args()
    gz = Path(a.vocab)
    if not gz.exists():
        print(f"SKIP: no {gz}")
        return 77
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    failed = []

    def check(ok, msg):
        print(("ok   " if ok else "FAIL ") + msg)
        if not ok:
            failed.append(msg)

    ref = Reference(gz, a.control)
    good = Reference(gz) if a.control else ref
    rng = random.Random(20261126)
    texts = [draw(rng) for _ in range(a.n)]
    r = run_dump(a.dump, gz, texts, work, "texts")
    check(r.returncode == 0, f"tok_dump on {len(texts)} strings: exit {r.returncode}")
    got = parse(r.stdout)
    check(len(got) == len(texts), f"{len(got)} answers for {len(texts)} strings")
    mism, n_cut, n_err, shown = 0, 0, 0, 0
    for t, (k, ids) in zip(texts, got):
        want, cut, cleaned = ref.encode(t)
        if not cleaned:  # nothing left: the engine refuses it
            n_err += 1
            ok = k == "err"
        else:
            n_cut += cut
            ok = k == ("cut" if cut else "ok") and ids == want
        if not ok:
            mism += 1
            if shown < 5 and not a.control:
                shown += 1
                print(f"     {t!r}\n       cleaned {cleaned!r}\n       engine {k} {ids}\n"
                      f"       reference {want} cut {cut}")
    print(f"     {len(texts)} strings, {n_cut} cut at 77 tokens, {n_err} empty after cleaning, "
          f"{mism} differ from the reference")
    if a.control:
        # the mistake must show on most strings, and nothing else may fail
        if failed or mism < 0.5 * len(texts):
            print(f"CONTROL FAILED: the mistake '{a.control}' differs on {mism} of {len(texts)} "
                  f"strings; other failures: {failed}")
            return 1
        print(f"control ok: the mistake '{a.control}' differs on {mism} of {len(texts)} strings")
        return 0
    check(mism == 0, f"every string's ids equal the reference's ({mism} differ)")
    check(n_cut >= 50, f"{n_cut} strings were long enough to be cut")
    tok_ids = {good.encoder[SOT], good.encoder[EOT]}
    check(tok_ids == {49406, 49407} and len(good.vocab) == 49408, "49408 ids, SOT 49406, EOT 49407")

    # Hugging Face's files: the same ids, from the folder and from vocab.json
    hf = work / "hf"
    write_hf(good, hf)
    for v in (hf, hf / "vocab.json"):
        r2 = run_dump(a.dump, v, texts[:2000], work, "hf")
        check(r2.returncode == 0 and r2.stdout.splitlines() == r.stdout.splitlines()[:2000],
              f"{v.name}: the same ids on 2000 strings as the .gz gives")

    # vit_tokenizer_find: beside the model, in its tokenizer/ folder, a model's folder;
    # vocab.json + merges.txt before the .gz; one of the pair alone is not a vocabulary
    fd = work / "find"
    for sub, files in [("m1", ["model.safetensors", "vocab.json", "merges.txt"]),
                       ("m2", ["model.pth", "tokenizer/bpe_simple_vocab_16e6.txt.gz"]),
                       ("m3", ["model.safetensors", "vocab.json", "tokenizer/merges.txt"]),
                       ("m4", ["model.safetensors", "bpe_simple_vocab_16e6.txt.gz", "vocab.json",
                               "merges.txt"])]:
        for name in files:
            f = fd / sub / name
            f.parent.mkdir(parents=True, exist_ok=True)
            if name.endswith(".gz"):
                f.unlink(missing_ok=True)
                f.symlink_to(gz.resolve())
            else:
                f.write_text("")
    for model, want in [("m1/model.safetensors", "m1/vocab.json"),
                        ("m2/model.pth", "m2/tokenizer/bpe_simple_vocab_16e6.txt.gz"),
                        ("m3/model.safetensors", "none"), ("m4/model.safetensors", "m4/vocab.json"),
                        ("m1", "m1/vocab.json"), ("m2", "m2/tokenizer/bpe_simple_vocab_16e6.txt.gz"),
                        ("missing/model.safetensors", "none")]:
        rf = subprocess.run([str(a.dump), "--find", str(fd / model)], capture_output=True, text=True)
        got_path = rf.stdout.strip()
        check(got_path == (want if want == "none" else str(fd / want)),
              f"vit_tokenizer_find({model}): {got_path.replace(str(fd) + '/', '')}")
    r5 = run_dump(a.dump, fd / "m2/tokenizer/bpe_simple_vocab_16e6.txt.gz", texts[:200], work, "found")
    check(r5.returncode == 0 and r5.stdout.splitlines() == r.stdout.splitlines()[:200],
          "the vocabulary found loads and gives the same ids")

    # bad text
    bad = ["", "   \t\n ", "\x01\x07", b"caf\xe9".decode("latin-1").encode("latin-1"), "x" * 20000]
    f = work / "bad.hex"
    f.write_text("".join((t if isinstance(t, bytes) else t.encode("utf-8")).hex() + "\n" for t in bad))
    r3 = subprocess.run([str(a.dump), str(gz), str(f)], capture_output=True, text=True)
    lines = r3.stdout.splitlines()
    errs = r3.stderr.splitlines()
    check(lines == ["err argument"] * 5, f"empty, whitespace, controls only, invalid UTF-8, 20000 bytes: {lines}")
    check(len(errs) == 5 and "empty" in errs[0] and "UTF-8" in errs[3] and "0xE9 at offset 3" in errs[3] and "16384" in errs[4],
          f"their messages: {errs}")
    r4 = subprocess.run([str(a.dump), str(gz), str(work / "texts.hex"), "1"], capture_output=True, text=True)
    check("err argument" in r4.stdout, "room for 1 id: refused")

    # bad vocabularies: a message naming the file, exit 1, no crash
    data = gz.read_bytes()
    (work / "cut.txt.gz").write_bytes(data[:len(data) // 2])
    (work / "notgz.txt.gz").write_bytes(b"hello, not gzip")
    one = work / "one_symbol"
    write_hf(good, one)
    m = (one / "merges.txt").read_text().split("\n")
    m[7] = "th"
    (one / "merges.txt").write_text("\n".join(m))
    unk = work / "unknown_symbol"
    write_hf(good, unk)
    m = (unk / "merges.txt").read_text().split("\n")
    m[3] = "\u4e00 \u4e01"
    (unk / "merges.txt").write_text("\n".join(m))
    notobj = work / "not_object"
    write_hf(good, notobj)
    (notobj / "vocab.json").write_text("[1, 2, 3]")
    nomerges = work / "no_merges"
    nomerges.mkdir(exist_ok=True)
    (nomerges / "vocab.json").write_text("{}")
    cases = [(work / "missing.txt.gz", "missing.txt.gz", "cannot open"),
             (work / "cut.txt.gz", "cut.txt.gz", ""),
             (work / "notgz.txt.gz", "notgz.txt.gz", "not a gzip file"),
             (one, "merges.txt", "line 8"),
             (unk, "merges.txt", "line 4"),
             (notobj, "vocab.json", "object"),
             (nomerges, "no_merges", "merges.txt"),
             (work / "texts.hex", "texts.hex", "")]
    for v, name, words in cases:
        rb = subprocess.run([str(a.dump), str(v), str(work / "texts.hex")], capture_output=True, text=True)
        msg = rb.stderr.strip()
        check(rb.returncode == 1 and name in msg and words in msg and not rb.stdout,
              f"vocabulary {v.name}: exit {rb.returncode}: {msg[:160]}")

    print("all checks passed" if not failed else f"{len(failed)} check(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
