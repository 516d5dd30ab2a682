#!/usr/bin/env python3
"""The map kinds' table (app/view/mapkind.c, as `vitlens --list-kinds` prints it) against the
docs, so that a kind missing from them fails here:

  the man page (docs/vitlens.1)
    DESCRIPTION   names every kind
    --class       names every class-specific kind
    --export      names every kind's file tag (the first row's files go untagged)
    KEYS          E / Shift+E names every kind, in the table's order; every kind with a
                  key of its own has its entry
  README.md's key table
    E / Shift+E   names every kind, in the table's order
    its key       every kind with a key of its own has its row

The checks run first on the table with a made-up kind added (a row the docs cannot know):
each must then fail, or it could not catch a kind that is missing.

Usage: test_kinds_docs.py --app build/vitlens --man docs/vitlens.1 --readme README.md
"""
import argparse
import re
import subprocess
import sys

failures = []
quiet = False  # the control's checks: recorded, not printed (they are meant to fail)


def check(ok, what):
    if not quiet:
        print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def norm(s):
    """Text as the kinds' names compare: roff escapes and markdown gone, x for the times
    sign, spaces collapsed, lower case."""
    s = s.replace("\\-", "-").replace("\\&", "").replace("\\(mu", "x").replace("\\(en", "-")
    s = re.sub(r"\\f[BIRP]", "", s).replace("\u00d7", "x").replace("`", "").replace("*", "")
    return re.sub(r"\s+", " ", s).strip().lower()


def kinds(app):
    """[{tag, key, group, name, title, needs}] in the table's order."""
    r = subprocess.run([app, "--list-kinds"], capture_output=True, text=True, timeout=30)
    check(r.returncode == 0, f"vitlens --list-kinds exits 0 (got {r.returncode})")
    rows = []
    for line in r.stdout.splitlines():
        f = line.split("\t")
        check(len(f) == 6 and f[5] in ("-", "classifier", "map-head"),
              f"--list-kinds line of 6 fields, the last what a model needs: {line!r}")
        if len(f) == 6:
            rows.append(dict(zip(("tag", "key", "group", "name", "title", "needs"), f)))
    return rows


# --- the man page, by section and by .TP entry

def man_sections(text):
    """{section: text} and {tag line: entry text} of the .TP entries (tags normalised)."""
    sections, entries, cur, lines = {}, {}, None, text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(".SH "):
            cur = line[4:].strip().strip('"')
            sections[cur] = ""
        elif cur is not None:
            sections[cur] += line + "\n"
        if line.startswith(".TP") and i + 1 < len(lines):
            tag = norm(re.sub(r"^\.(B|BI|BR|I|IR|RB)\s+", "", lines[i + 1]).replace('"', ""))
            body = []
            for nxt in lines[i + 2:]:
                if nxt.startswith((".TP", ".SH", ".SS", ".PP")):
                    break
                body.append(nxt)
            entries[(cur, tag)] = norm(" ".join(body))
    return sections, entries


def in_order(text, names):
    """Do all names occur in text, in this order? The first one missing, or None."""
    at = 0
    for n in names:
        i = text.find(norm(n), at)
        if i < 0:
            return n
        at = i + len(norm(n))
    return None


def check_man(rows, man, label):
    sections, entries = man_sections(man)
    desc = norm(sections.get("DESCRIPTION", ""))
    missing = [k["name"] for k in rows if norm(k["name"]) not in desc]
    check(not missing, f"{label}: DESCRIPTION names every kind" +
          (f"; missing: {missing}" if missing else ""))
    cls = next((v for (s, t), v in entries.items() if s == "OPTIONS" and t.startswith("--class")),
               "")
    missing = [k["name"] for k in rows if k["group"] == "class" and norm(k["name"]) not in cls]
    check(cls and not missing, f"{label}: --class names every class-specific kind" +
          (f"; missing: {missing}" if missing else ""))
    exp = next((v for (s, t), v in entries.items() if s == "OPTIONS" and t.startswith("--export")),
               "")
    missing = [k["tag"] for k in rows[1:] if not re.search(r"(^|[^a-z-])" + re.escape(k["tag"]) +
                                                          r"($|[^a-z-])", exp)]
    check(exp and not missing, f"{label}: --export names every kind's file tag" +
          (f"; missing: {missing}" if missing else ""))
    e = entries.get(("KEYS", "e / shift+e"), "")
    first_missing = in_order(e, [k["name"] for k in rows])
    check(e and first_missing is None, f"{label}: KEYS' E / Shift+E names every kind in order" +
          (f"; first missing: {first_missing!r}" if first_missing else ""))
    missing = [k["key"] for k in rows if k["key"] != "-" and ("KEYS", norm(k["key"])) not in entries]
    check(not missing, f"{label}: KEYS has every kind's own key" +
          (f"; missing: {missing}" if missing else ""))


# --- README's key table: | key | what it does |

def readme_keys(readme):
    """{key cell: what cell} of the table under "| key | what it does |", normalised."""
    rows, on = {}, False
    for line in readme.splitlines():
        if re.match(r"\|\s*key\s*\|\s*what it does\s*\|", line):
            on = True
        elif on and line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 2 and not set(cells[0]) <= set("-: "):
                rows[norm(cells[0])] = norm(" | ".join(cells[1:]))
        elif on:
            break
    return rows


def check_readme(rows, readme, label):
    table = readme_keys(readme)
    check(len(table) >= 20, f"{label}: README's key table has {len(table)} rows")
    e = table.get("e / shift+e", "")
    first_missing = in_order(e, [k["name"] for k in rows])
    check(e and first_missing is None, f"{label}: README's E / Shift+E names every kind in order" +
          (f"; first missing: {first_missing!r}" if first_missing else ""))
    missing = [k["key"] for k in rows if k["key"] != "-" and norm(k["key"]) not in table]
    check(not missing, f"{label}: README's key table has every kind's own key" +
          (f"; missing: {missing}" if missing else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--man", required=True)
    ap.add_argument("--readme", required=True)
    a = ap.parse_args()
    rows = kinds(a.app)
    check(len(rows) >= 2, f"--list-kinds lists {len(rows)} kinds")
    # a class-specific map needs a classification head: every class row says so (the logit
    # lens, a token view, reads the head too)
    wrong = [k["tag"] for k in rows if k["group"] == "class" and k["needs"] != "classifier"]
    check(not wrong, f"NEEDS is 'classifier' for every kind of the class group (not: {wrong})")
    man, readme = open(a.man).read(), open(a.readme).read()

    # The control: a kind the docs cannot know, of each group and with a key, must be missed
    # by every check (else a check passes whatever the docs say).
    global failures, quiet
    fake = [dict(tag="zz-made-up", key="Shift+Q", group=g, name=f"made-up kind {g}",
                 title="made up") for g in ("attention", "class", "tokens")]
    before, quiet = list(failures), True
    check_man(rows + fake, man, "control")
    check_readme(rows + fake, readme, "control")
    want = ["DESCRIPTION", "--class", "--export", "KEYS' E", "KEYS has", "README's E",
            "README's key table has every"]
    passed = [w for w in want if not any(w in f for f in failures[len(before):])]
    failures, quiet = before, False
    check(not passed, "the control (a made-up kind added to the table) fails every check" +
          (f"; it passed: {passed}" if passed else ""))

    check_man(rows, man, "docs/vitlens.1")
    check_readme(rows, readme, "README.md")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
