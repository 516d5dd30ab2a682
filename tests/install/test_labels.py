#!/usr/bin/env python3
"""Tests findable from the source (tests/README.md): every source folder of app/ and engine/
has its ctest label (the folder's path with '/' as '.', app/main.c: app.main) on at least one
test, every test carries at least one folder's label, and no label names a folder that is
not there (a folder renamed, a typo in a vitlens_label call).

    test_labels.py --ctest CTEST --build BUILD_DIR --source SOURCE_DIR

The labels are read from `ctest --show-only=json-v1` (what `ctest -L` selects on), the
folders from the tree: a folder holding a .c, .h or .cc file. engine/ itself holds
internal.h alone, the declarations its folders share: it has no label of its own.

The control: the same check on four edited copies must fail, each with its own complaint:
a folder's label taken off every test, a test left with no folder label, a label naming no
folder, a new source folder without tests. Exit 0 when the tree passes and every control
fails, 1 otherwise."""
import argparse
import copy
import json
import os
import subprocess
import sys

SOURCE_EXT = (".c", ".h", ".cc")


def source_folders(src):
    """{label: folder} for app/ and engine/."""
    out = {}
    for top in ("app", "engine"):
        for root, dirs, files in os.walk(os.path.join(src, top)):
            dirs.sort()
            if not any(f.endswith(SOURCE_EXT) for f in files):
                continue
            rel = os.path.relpath(root, src)
            if rel == "engine":  # internal.h: no code of its own
                continue
            label = "app.main" if rel == "app" else rel.replace(os.sep, ".")
            out[label] = rel
    return out


def ctest_labels(ctest, build):
    """{test name: [labels]} as ctest sees them."""
    js = json.loads(subprocess.run([ctest, "--show-only=json-v1"], cwd=build, check=True,
                                   capture_output=True, text=True).stdout)
    tests = {}
    for t in js["tests"]:
        labels = []
        for p in t.get("properties", []):
            if p["name"] == "LABELS":
                labels = list(p["value"])
        tests[t["name"]] = labels
    return tests


def is_folder_label(label):
    return label.startswith("app.") or label.startswith("engine.")


def check(folders, tests):
    """The complaints, one string each; [] when all is well."""
    bad = []
    for label, folder in sorted(folders.items()):
        n = sum(label in labels for labels in tests.values())
        if n == 0:
            bad.append(f"{folder}/: no test carries the label {label}")
    for name, labels in sorted(tests.items()):
        if not any(is_folder_label(lb) for lb in labels):
            bad.append(f"test {name}: no source folder's label (labels: {labels or 'none'})")
        for lb in labels:
            if is_folder_label(lb) and lb not in folders:
                bad.append(f"test {name}: label {lb} names no source folder")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctest", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    folders = source_folders(a.source)
    tests = ctest_labels(a.ctest, a.build)
    if len(folders) < 10 or len(tests) < 10:
        print(f"FAIL: {len(folders)} folders, {len(tests)} tests: not this project's tree?")
        return 1
    ok = True
    bad = check(folders, tests)
    for b in bad:
        print("FAIL:", b)
    ok &= not bad
    counts = {lb: sum(lb in t for t in tests.values()) for lb in folders}
    print(f"{len(folders)} folders, {len(tests)} tests; tests per label:",
          ", ".join(f"{lb} {n}" for lb, n in sorted(counts.items())))

    # the controls: each edit must be caught, by its own complaint
    first = sorted(folders)[0]
    some = sorted(tests)[0]
    controls = []
    t1 = {n: [lb for lb in ls if lb != first] for n, ls in tests.items()}
    controls.append(("a folder's label off every test", folders, t1, f"label {first}"))
    t2 = copy.deepcopy(tests)
    t2[some] = [lb for lb in t2[some] if not is_folder_label(lb)] + ["memcheck"]
    controls.append(("a test with no folder label", folders, t2, f"test {some}: no source"))
    t3 = copy.deepcopy(tests)
    t3[some] = t3[some] + ["engine.nowhere"]
    controls.append(("a label naming no folder", folders, t3, "engine.nowhere names no"))
    f4 = dict(folders, **{"engine.newfolder": "engine/newfolder"})
    controls.append(("a new folder without tests", f4, tests, "engine/newfolder/: no test"))
    for what, f, t, want in controls:
        got = check(f, t)
        caught = any(want in g for g in got)
        print(f"control ({what}): {'caught' if caught else 'NOT CAUGHT'}")
        ok &= caught
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
