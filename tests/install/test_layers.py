#!/usr/bin/env python3
"""The layers written down and kept (docs/architecture.md, "Who calls whom"): every call the
build's object files make between source folders (and between app/view's files) goes down
the doc's block, never up nor sideways; app/ calls the engine through vit.h only.

    test_layers.py --doc docs/architecture.md --header engine/include/vit.h
                   --engine OBJ... [--app OBJ...]

Each object's source is the part of its path after the target's ".dir/" (the engine's
objects: engine/load/model.c.o; the app's: view/maps.c.o, under app/). A call is an
undefined symbol of one object (`nm -u`) that another defines (`nm --defined-only`).
Generated sources count as the folder that reads them (GENERATED).

The control: the same check on the graph with one invented edge added must fail, for each
of an upward call (engine/load -> engine/passes, the one issue 38 found), a sideways one
(engine/maps -> engine/eval), an app folder calling up (app/view -> app/window), an app/view
file calling up (mapkind.c -> maps.c), the app calling an engine function vit.h does not
declare, and a source no line of the block names. Exit 0 when the build passes and every
control fails, 1 otherwise."""
import argparse
import os
import re
import subprocess
import sys

# generated sources: the folder whose file reads them
GENERATED = {"layouts.c": "engine/load/layouts.c"}


def read_layers(doc):
    """[[{unit: rank}]]: the groups of the doc's block, a unit's rank 0 at the bottom."""
    text = open(doc, encoding="utf-8").read()
    m = re.search(r"^## Who calls whom\n(.*?)^```\n(.*?)^```", text, re.S | re.M)
    if not m:
        sys.exit(f"{doc}: no '## Who calls whom' section with a ``` block")
    groups, lines = [], []
    for line in m.group(2).split("\n") + [""]:
        units = []
        for tok in line.split():
            if not re.fullmatch(r"(app|engine)/[\w./]+", tok):
                break  # the comment starts
            units.append(tok)
        if units:
            lines.append(units)
        elif not line.strip() and lines:
            groups.append({u: len(lines) - 1 - i for i, us in enumerate(lines) for u in us})
            lines = []
    return groups


def source_of(obj, top):
    rel = obj.split(".dir/", 1)[1]
    rel = rel[:-2] if rel.endswith(".o") else rel
    if rel in GENERATED:
        return GENERATED[rel]
    return rel if top == "engine" else "app/" + rel


def symbols(objs, top):
    """{source: (defined set, undefined set)}"""
    out = {}
    for o in objs:
        run = lambda *a: subprocess.run(["nm", *a, o], check=True, capture_output=True,
                                        text=True).stdout.splitlines()
        defined = {l.split()[2] for l in run("--defined-only", "-g") if len(l.split()) == 3}
        undef = {l.split()[-1] for l in run("-u")}
        out[source_of(o, top)] = (defined, undef)
    return out


def call_graph(syms):
    """{(caller source, callee source, symbol)} between different sources."""
    owner = {s: src for src, (d, _) in syms.items() for s in d}
    return {(src, owner[s], s) for src, (_, u) in syms.items() for s in u
            if s in owner and owner[s] != src}


def unit_of(src, group):
    """The longest unit of group that src is (a file) or lies in (a folder), or None."""
    best = None
    for u in group:
        if src == u or src.startswith(u + "/") or (u == "app/main.c" and src == u):
            if best is None or len(u) > len(best):
                best = u
    return best


def expected_in(src, parents):
    """Should src be on a line of a group whose units lie in parents (a folder of these
    folders, or a file beside these files)?"""
    d = os.path.dirname(src)
    while d:
        if d in parents:
            return True
        d = os.path.dirname(d)
    return False


def check(edges, groups, vit_h_names):
    bad = []
    for caller, callee, sym in sorted(edges):
        if caller.startswith("app/") and callee.startswith("engine/"):
            if sym not in vit_h_names:
                bad.append(f"{caller} calls {sym} ({callee}), which vit.h does not declare")
            continue
        for g in groups:
            a, b = unit_of(caller, g), unit_of(callee, g)
            parents = {os.path.dirname(u) for u in g}
            missing = [s for s, u in ((caller, a), (callee, b)) if u is None]
            if any(expected_in(s, parents) for s in missing):
                who = next(s for s in missing if expected_in(s, parents))
                bad.append(f"{who} is on no line of its group in docs/architecture.md's "
                           f"'Who calls whom' (the call {caller} -> {sym}, {callee})")
            elif not missing and a != b and g[a] <= g[b]:
                how = "up" if g[a] < g[b] else "sideways"
                bad.append(f"{caller} calls {how}: {sym} ({callee}); {a} may call only "
                           f"what is below its line")
    return bad


def header_text(path):
    """The header's text with the text of the parts it includes ("vit/model.h"), found
    beside it, each once."""
    seen, out, todo = set(), [], [os.path.abspath(path)]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        text = open(p).read()
        out.append(text)
        root = os.path.dirname(os.path.abspath(path))
        todo += [os.path.join(root, m) for m in re.findall(r'#include "(vit/\w+\.h)"', text)]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--doc", required=True)
    ap.add_argument("--header", required=True)
    ap.add_argument("--engine", nargs="+", required=True)
    ap.add_argument("--app", nargs="*", default=[])
    a = ap.parse_args()
    groups = read_layers(a.doc)
    vit_h = set(re.findall(r"\b(vit_\w+|Vit\w+|VIT_\w+)\b", header_text(a.header)))
    syms = symbols(a.engine, "engine")
    syms.update(symbols(a.app, "app"))
    edges = call_graph(syms)
    n_engine = len({e for e in edges if e[0].startswith("engine/")})
    print(f"{len(syms)} objects, {len(edges)} calls between sources "
          f"({n_engine} in the engine), {len(groups)} groups of layers")
    ok = True
    bad = check(edges, groups, vit_h)
    for b in bad:
        print("FAIL:", b)
    ok = not bad
    controls = {
        "load calls up into passes": ("engine/load/model.c", "engine/passes/forward.c",
                                      "vit_run_floats"),
        "maps calls sideways into eval": ("engine/maps/maps.c", "engine/eval/faithful.c",
                                          "vit_faithfulness"),
        "app/view calls up into app/window": ("app/view/view.c", "app/window/app.c",
                                              "app_init"),
        "mapkind.c calls up into maps.c": ("app/view/mapkind.c", "app/view/maps.c",
                                           "view_compute"),
        "app calls an engine internal": ("app/view/scene.c", "engine/load/model.c",
                                         "ld_map_file"),
        "a folder the doc leaves out": ("engine/newfolder/x.c", "engine/load/model.c",
                                        "vit_load"),
    }
    for name, edge in controls.items():
        got = check(edges | {edge}, groups, vit_h)
        if len(got) <= len(bad):
            print(f"FAIL: control '{name}' {edge} passed the check")
            ok = False
        else:
            why = [g for g in got if edge[2] in g and g not in bad]
            print(f"control '{name}' fails as it should: {why[0] if why else got[-1]}")
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
