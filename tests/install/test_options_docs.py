#!/usr/bin/env python3
"""The options' table (app/config/opttable.c, as `vitlens --list-options` prints it) against
the docs, so that an option missing from them, or documented with another argument, fails
here (--help is printed from the table; install_manpage compares it with the man page):

  the man page          an entry (.TP) per row under OPTIONS, its tag "[ALIAS, ]NAME[ ARG]"
  (docs/vitlens.1)      exactly (the argument as the table has it), and no entry for an
                        option that is not a row
  README.md's table     "| option | what it does |": a `[ALIAS, ]NAME[ ARG]` in a first
                        cell per row, and no option there that is not a row

The checks run first on the table changed in three ways the docs cannot know (a made-up
option added, the first row's argument changed, the second row left out): each check must
then fail, or it could not catch what it is for.

Usage: test_options_docs.py --app build/vitlens --man docs/vitlens.1 --readme README.md
"""
import argparse
import re
import subprocess
import sys

failures = []
quiet = False  # the control's checks: recorded, not printed (they are meant to fail)
MODES = {"window", "top", "export", "eval", "eval-merge", "lesson-export", "agreement"}


def check(ok, what):
    if not quiet:
        print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def label(row):
    """An option as --help, the man page and README write it: "-h, --help", "--top K"."""
    names = f"{row['alias']}, {row['name']}" if row["alias"] != "-" else row["name"]
    return names + (f" {row['arg']}" if row["arg"] != "-" else "")


def names_of(text):
    """The option names a label starts with: "-h, --help" -> {-h, --help}; "--top K" ->
    {--top}."""
    return {part.split(" ")[0] for part in text.split(", ") if part.startswith("-")}


def options(app):
    """[{name, alias, arg, group, modes}] in the table's order."""
    r = subprocess.run([app, "--list-options"], capture_output=True, text=True, timeout=30)
    check(r.returncode == 0, f"vitlens --list-options exits 0 (got {r.returncode})")
    rows, bad = [], []
    for line in r.stdout.splitlines():
        f = line.split("\t")
        if len(f) == 5 and f[0].startswith("-") and (f[4] == "any" or
                                                     set(f[4].split(",")) <= MODES):
            rows.append(dict(zip(("name", "alias", "arg", "group", "modes"), f)))
        else:
            bad.append(line)
    check(not bad, "--list-options: every line 5 fields, NAME an option, MODES known ones" +
          (f"; not: {bad}" if bad else ""))
    return rows


# --- the man page: the .TP entries' tags under OPTIONS, as roff prints them

def roff_words(line):
    """A macro line's arguments: split at spaces outside double quotes."""
    return [q or w for q, w in re.findall(r'"([^"]*)"|(\S+)', line)]


def unroff(s):
    s = s.replace("\\-", "-").replace("\\&", "").replace("\\~", " ").replace("\\ ", " ")
    return re.sub(r"\\f[BIRP]", "", s).replace("\\(en", "-").replace("\\(mu", "x")


def man_labels(text):
    """{names: label} of the OPTIONS section's .TP tags: .BI / .BR / ... join their
    arguments without spaces, .B / .I with one."""
    out, section, lines = {}, None, text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(".SH "):
            section = line[4:].strip().strip('"')
        elif line.startswith(".TP") and section == "OPTIONS" and i + 1 < len(lines):
            m = re.match(r"\.(B|I|BI|IB|BR|RB|IR|RI)\s+(.*)", lines[i + 1])
            if not m:
                continue
            args = roff_words(m.group(2))
            lab = unroff(("" if len(m.group(1)) == 2 else " ").join(args)).strip()
            out[frozenset(names_of(lab))] = lab
    return out


# --- README's options table: | option | what it does |

def readme_labels(readme):
    """{names: label} of the code spans in the first cells of the table under
    "| option | what it does |" ("\\|" a pipe, "…" three dots)."""
    out, on = {}, False
    for line in readme.splitlines():
        if re.match(r"\|\s*option\s*\|\s*what it does\s*\|", line):
            on = True
        elif on and line.startswith("|"):
            first = re.split(r"(?<!\\)\|", line.strip())[1]
            for span in re.findall(r"`([^`]+)`", first):
                lab = span.replace("\\|", "|").replace("\u2026", "...").strip()
                if lab.startswith("-"):
                    out[frozenset(names_of(lab))] = lab
        elif on:
            break
    return out


def check_doc(rows, labels, where, tag):
    """Each row has an entry in labels (by its names), with its argument; no entry
    names an option that is not a row."""
    missing = [r["name"] for r in rows if not any(names_of(label(r)) & k for k in labels)]
    check(not missing, f"{tag}: {where} has every option" +
          (f"; missing: {missing}" if missing else ""))
    wrong = []
    for r in rows:
        got = [v for k, v in labels.items() if names_of(label(r)) & k]
        if got and label(r) not in got:
            wrong.append(f"{label(r)!r} (there: {got[0]!r})")
    check(not wrong, f"{tag}: {where} gives each option its argument" +
          (f"; not: {wrong}" if wrong else ""))
    known = set().union(*(names_of(label(r)) for r in rows)) if rows else set()
    stale = sorted(v for k, v in labels.items() if not k <= known)
    check(not stale, f"{tag}: {where} names no option that is not a row" +
          (f"; not rows: {stale}" if stale else ""))


def check_all(rows, docs, tag):
    for where, labels in docs.items():
        check_doc(rows, labels, where, tag)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--man", required=True)
    ap.add_argument("--readme", required=True)
    a = ap.parse_args()
    rows = options(a.app)
    check(len(rows) >= 30, f"--list-options lists {len(rows)} options")
    names = [n for r in rows for n in names_of(label(r))]
    check(len(names) == len(set(names)), "no option named twice")
    docs = {"the man page's OPTIONS": man_labels(open(a.man).read()),
            "README's options table": readme_labels(open(a.readme).read())}
    for where, labels in docs.items():
        check(len(labels) >= 20, f"{where}: {len(labels)} options read")

    # The control: a made-up option, the first row with another argument, the second row
    # left out: every check must fail on it (else it passes whatever the docs say).
    global failures, quiet
    fake = dict(name="--made-up-option", alias="-", arg="ZZ", group="info", modes="any")
    control = [dict(rows[0], arg="ZZ-NOT-ITS-ARG")] + rows[2:] + [fake]
    before, quiet = list(failures), True
    check_all(control, docs, "control")
    want = [f"control: {w} {c}" for w in docs for c in
            ("has every option", "gives each option its argument", "names no option")]
    passed = [w for w in want if not any(f.startswith(w) for f in failures[len(before):])]
    failures, quiet = before, False
    check(not passed, "the control (an option made up, one's argument changed, one left out) "
          "fails every check" + (f"; it passed: {passed}" if passed else ""))

    check_all(rows, docs, "the table")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
