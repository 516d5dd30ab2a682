"""CLIP's tokenizer in Python, written from the published algorithm (OpenAI's
clip/simple_tokenizer.py, Radford et al. 2021): the tests' one reference for it.
test_tokenizer.py checks engine/text/tokenizer.c against it on 10 000 strings (its docstring
says what is done and how it was checked against ftfy and simple_tokenizer.py themselves);
tests/gui/clip_reference.py tokenizes the zero-shot prompts with it; clip_models.py writes
Hugging Face's vocabulary files from it. Needs Debian's python3-regex (the split pattern's
\\p{L}): importing this module raises ImportError without it.
"""
import html
import html.entities
import gzip
import json
import re
import unicodedata
from pathlib import Path

import regex

SOT, EOT = "<|startoftext|>", "<|endoftext|>"


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
        if self.mistake == "html_once":  # one html.unescape: "&amp;lt;" stays "&lt;"
            text = html.unescape(fix_text(text)).strip()
        else:
            text = html.unescape(html.unescape(fix_text(text))).strip()
        text = regex.sub(r"\s+", " ", text).strip()
        if self.mistake == "ascii_lower":  # C's tolower: "ÉTÉ" stays "ÉtÉ"
            text = "".join(c.lower() if c < "\x80" else c for c in text)
        else:
            text = text.lower()
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


def write_hf(ref, d):
    """Hugging Face's files for the same vocabulary, as a CLIP download carries them:
    vocab.json (the 256 byte characters, the same with </w>, a token per merge in rank order,
    then <|startoftext|> and <|endoftext|>: 49 408 ids) and merges.txt. Returns the ids' count."""
    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    (d / "vocab.json").write_text(json.dumps(ref.encoder, ensure_ascii=False), "utf-8")
    merges = sorted(ref.ranks, key=ref.ranks.get)
    (d / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges),
                                  "utf-8")
    return len(ref.encoder)
