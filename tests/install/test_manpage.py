#!/usr/bin/env python3
"""The man page (docs/vitlens.1) against `vitlens --help`: the same options, keys and
environment variables, both ways (a new option without its entry fails, and so does an
entry left for an option that is gone), and `man --warnings` silent on it.

Usage: test_manpage.py --app build/vitlens --man docs/vitlens.1
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


# --- --help: its sections, "options:", "keys:" and "environment:", two-space indented

def help_sections(text):
    """{section: [lines]} for the indented blocks after "options:", "keys:", ..."""
    sections, cur = {}, None
    for line in text.splitlines():
        if re.fullmatch(r"[a-z]+:", line):
            cur = sections.setdefault(line[:-1], [])
        elif not line.strip():
            cur = None
        elif cur is not None:
            cur.append(line)
    return sections


def help_options(lines):
    """Every option named at the start of an entry: "  -h, --help  this help" gives
    -h and --help."""
    opts = set()
    for line in lines:
        m = re.match(r"  (-[-\w, ]*?)(?:  | [A-Z]|$)", line)
        if m:
            opts.update(o.strip() for o in m.group(1).split(",") if o.strip().startswith("-"))
    return opts


def help_keys(lines):
    """The key column of the key table: printed "  %-14s  %s", so the key ends at the first
    run of two spaces."""
    return {re.split(r"\s{2,}", line.strip())[0] for line in lines if line.startswith("  ")}


def help_env(lines):
    return {m.group(1) for line in lines if (m := re.match(r"  (VITLENS_\w+)", line))}


# --- the man page: the tag after each .TP of a section, in roff

def unroff(s):
    """Plain text of a roff line's words: escapes and font changes removed, quotes of
    macro arguments dropped."""
    s = s.replace("\\-", "-").replace("\\&", "").replace("\\~", " ").replace("\\ ", " ")
    s = re.sub(r"\\f[BIRP]", "", s)
    s = s.replace("\\(en", "-").replace("\\(mu", "x")
    s = s.replace("\\e", "\\").replace("\\(rs", "\\")  # \e and \(rs print a backslash
    return s.replace('"', "")


def man_tags(text):
    """{section: [tag lines]}: the line after each .TP, unescaped, macro name dropped."""
    tags, cur, lines = {}, None, text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(".SH "):
            cur = tags.setdefault(line[4:].strip().strip('"'), [])
        elif line.startswith(".TP") and cur is not None and i + 1 < len(lines):
            tag = re.sub(r"^\.(B|BI|BR|I|IR|RB)\s+", "", lines[i + 1])
            cur.append(unroff(tag).strip())
    return tags


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--man", required=True)
    a = ap.parse_args()

    out = subprocess.run([a.app, "--help"], capture_output=True, text=True, timeout=30)
    check(out.returncode == 0, f"vitlens --help exits 0 (got {out.returncode})")
    sections = help_sections(out.stdout)
    h_opts = help_options(sections.get("options", []))
    h_keys = help_keys(sections.get("keys", []))
    h_env = help_env(sections.get("environment", []))
    check(len(h_opts) >= 15 and len(h_keys) >= 20 and len(h_env) >= 3,
          f"--help lists {len(h_opts)} options, {len(h_keys)} keys, {len(h_env)} variables")

    with open(a.man) as f:
        tags = man_tags(f.read())
    m_opts = set()
    for t in tags.get("OPTIONS", []):
        m_opts.update(w.strip(",") for w in t.split() if w.startswith("-"))
    m_keys = {re.sub(r"\s+", " ", t) for t in tags.get("KEYS", [])}
    m_env = {t.split("=")[0].split()[0] for t in tags.get("ENVIRONMENT", []) if t}
    # The keys as --help prints them, spaces collapsed likewise ("1 - 5, click a class").
    h_keys = {re.sub(r"\s+", " ", k) for k in h_keys}

    for name, h, m in [("options", h_opts, m_opts), ("keys", h_keys, m_keys),
                       ("environment variables", h_env, m_env)]:
        missing, stale = sorted(h - m), sorted(m - h)
        check(not missing, f"every one of --help's {len(h)} {name} has an entry in the man page"
              + (f"; missing: {missing}" if missing else ""))
        check(not stale, f"the man page's {name} are all in --help"
              + (f"; not in --help: {stale}" if stale else ""))

    # man-db's --warnings (groff -wmac by default) and groff's every warning: nothing to say.
    if shutil.which("man"):
        r = subprocess.run(["man", "--warnings", "-l", a.man], capture_output=True, text=True,
                           env=dict(os.environ, MANWIDTH="80"), timeout=60)
        check(r.returncode == 0 and not r.stderr.strip(),
              f"man --warnings -l {os.path.basename(a.man)}: no warnings" +
              (f"\n{r.stderr}" if r.stderr.strip() else ""))
        check("vitlens - see where a Vision Transformer looks" in r.stdout.replace("\u2010", "-")
              .replace("\u2212", "-"), "the page renders with its NAME line")
    else:
        check(False, "man is installed (Debian: man-db; scripts/install-deps.sh)")
    if shutil.which("groff"):
        r = subprocess.run(["groff", "-ww", "-man", "-z", a.man], capture_output=True,
                           text=True, timeout=60)
        check(not r.stderr.strip(), "groff -ww -man: no warnings" +
              (f"\n{r.stderr}" if r.stderr.strip() else ""))

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
