"""lesson_table.py - the lesson's steps as the app's table lists them (LESSON_STEP_INFO in
app/view/lessonfile.c, in the order of the enum in app/view/lessonfile.h), for the tests that
check which steps a model's lesson has: a row added to the table needs no edit here or in them.

    steps(has)   the step names a model offers, in order; has: a set of the needs the model
                 has, of "head", "rope", "map" (LESSON_NEEDS_HEAD, _ROPE, _MAP). A step whose
                 needs include one of LESSON_NEEDS_OPTIONAL the model lacks is not offered; a
                 head step without a head is (its picture says so).
    rows()       [(name, title, per_block, needs)] for every row, in order.
"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _needs(expr):
    """'LESSON_NEEDS_ROPE | LESSON_NEEDS_MAP' or '0' -> {"rope", "map"}"""
    return {m.lower() for m in re.findall(r"LESSON_NEEDS_([A-Z]+)", expr)}


def rows():
    header = (ROOT / "app/view/lessonfile.h").read_text()
    source = (ROOT / "app/view/lessonfile.c").read_text()
    body = re.search(r"enum \{\s*(LESSON_PATCHES,.*?)LESSON_STEP_TOTAL", header, re.S).group(1)
    order = re.findall(r"^\s*(LESSON_[A-Z0-9_]+),", body, re.M)
    table = {}
    for key, name, title, per_block, needs in re.findall(
            r'\[(LESSON_[A-Z0-9_]+)\]\s*=\s*\{\s*"([^"]+)",\s*"([^"]*)",\s*(\d),\s*([^}]*)\}', source):
        table[key] = (name, title, int(per_block), _needs(needs))
    missing = [k for k in order if k not in table]
    if missing or len(table) != len(order):
        raise SystemExit(f"lesson_table.py: cannot read LESSON_STEP_INFO (rows missing: {missing})")
    return [table[k] for k in order]


def optional():
    """The needs without which a step is left out (LESSON_NEEDS_OPTIONAL)."""
    header = (ROOT / "app/view/lessonfile.h").read_text()
    return _needs(re.search(r"#define LESSON_NEEDS_OPTIONAL\s*\(([^)]*)\)", header).group(1))


def steps(has):
    opt = optional()
    return [name for name, _, _, needs in rows() if not (needs & opt) - set(has)]


if __name__ == "__main__":
    for r in rows():
        print(*r)
