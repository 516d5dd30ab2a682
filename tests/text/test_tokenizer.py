#!/usr/bin/python3
"""CLIP's tokenizer (engine/text/tokenizer.c) against a reference written here from the
published algorithm (OpenAI's clip/simple_tokenizer.py, Radford et al. 2021).

    /usr/bin/python3 test_tokenizer.py --dump tok_dump --vocab bpe_simple_vocab_16e6.txt.gz
                                       --work DIR [--n 10000] [--control no_w|rank|html_once|ascii_lower]

The reference: bytes_to_unicode; the vocabulary from the merges (lines 2 .. 48895 of the
file); the cleaning: ftfy.fix_text's deterministic steps written here from ftfy 6's source
(ftfy is not in Debian; fix_encoding, its mojibake repair, is left out on both sides),
Python's own html.unescape twice, strip, the regex module's `\\s+` -> ' ', str.lower(); the
split with the `regex` module's pattern (IGNORECASE); BPE by rank; [SOT] + ids + [EOT] cut
as clip.tokenize(truncate=True) cuts it. Checked once by hand against ftfy 6 (git 74dd045)
and OpenAI's clip/simple_tokenizer.py themselves on these 10 000 strings: 0 differ with
fix_encoding off, 8 with it on (strings that look like mojibake, e.g. "&Atilde;—" -> "×").

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
it merges the first pair that has a rank instead of the lowest-ranked; --control
html_once: it unescapes HTML once, not twice as basic_clean does; --control ascii_lower:
it lower-cases ASCII only (C's tolower). The run then exits 0 only when the comparison
caught the mistake (on most strings for the BPE ones, on 1% and 5% for the cleaning ones;
a crash fails it).
"""
import argparse
import html
import html.entities
import random
import subprocess
import sys
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    from clip_bpe import EOT, SOT, Reference, write_hf  # noqa: E402
except ImportError:  # Debian's python3-regex
    print("SKIP: no python3-regex")
    sys.exit(77)

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
         "„low“ ‚low‘", "½ ⅔ ² ³ ①", "Ⅻ", "٣٤٥", "১২৩",
         "x\u180ey", "it'ſ", "'\u212a", "ẞ'S", "x\u200by", "ℌello", "ǰ̌"]
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
    while True:
        v = rng.choice([rng.randint(0, 0x20), rng.randint(0x7E, 0xA0), rng.randint(0xD7F0, 0xE010),
                        rng.randint(0xFDC0, 0xFFFF), rng.randint(0x10000, 0x10FFFF),
                        rng.randint(0x10FFF0, 0x110010), rng.randint(0x20, 0x3000)])
        # not a character Unicode 15 added (ICU 72's and PCRE2's tables have it, Python
        # 3.11's Unicode 14 does not: a letter to one, unassigned to the other)
        if (v > 0x10FFFF or 0xD800 <= v <= 0xDFFF or (v & 0xFFFE) == 0xFFFE or 0xFDD0 <= v <= 0xFDEF
                or unicodedata.category(chr(v)) != "Cn"):
            break
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


# the share of strings each control's mistake must change
CONTROL_SHARE = {"no_w": 0.5, "rank": 0.5, "html_once": 0.01, "ascii_lower": 0.05}


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--control", choices=sorted(CONTROL_SHARE))
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
        # the mistake must show (the BPE mistakes on most strings, the cleaning ones on the
        # strings that hold what they get wrong), and nothing else may fail
        if failed or mism < CONTROL_SHARE[a.control] * len(texts):
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
