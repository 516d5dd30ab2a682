#!/usr/bin/python3
"""What if? The interventions in the window (issue 25), end to end on the built-in model:
Delete ablates the head on screen, Ctrl+drag drops patches, 7 + Ctrl+click fills one, 8
shuffles the position embedding, 9 / Shift+9 the layer's temperature, Backspace resets (a Ctrl+click whose events arrive all at once included);
after each the window's top-1 (VITLENS_TRACE's top1=) equals `vitlens --top` with the
same interventions as options, the status line lists them, the top-5 panel shows the
change (plain=1), and bad input (Delete on a fusion, a temperature past 1024) shows an
error with the interventions unchanged. Screenshots go to --out.

  xvfb-run -a /usr/bin/python3 test_whatif.py --app build/vitlens --out DIR
"""
import argparse
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_gui import App, Fail, check, quit_app, run, run_checks, save  # noqa: E402

ASSETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "assets", "default")


def top1(app_path, model, photo, *opts):
    """(class, probability) of `vitlens --top 1` with these options."""
    r = subprocess.run([app_path, "--model", model, "--top", "1", *opts, photo], capture_output=True,
                       text=True, timeout=300)
    if r.returncode:
        raise Fail(f"vitlens --top {' '.join(opts)}: {r.stderr}")
    f = r.stdout.split()
    return int(f[2]), float(f[1])


def settle(app, what, loads, **want):
    """The frame after the photo's forward pass with the interventions: its job done (the
    trace's loads= past `loads`, the count before the action), not busy."""
    def done():
        return app.settled() and int(app.state.get("loads", 0)) > loads and \
            app.state.get("busy") == "0" and all(app.state.get(k) == str(v) for k, v in want.items())
    if not (app.state and done()):
        app.wait_line(lambda s: s.startswith("frame ") and done(), what)


def loads(app):
    return int(app.state.get("loads", 0))


def same_top1(app, a, model, photo, opts, what):
    cls, p = (app.state["top1"].split(":"))
    want = top1(a.app, model, photo, *opts)
    check(int(cls) == want[0] and abs(float(p) - want[1]) <= 6e-5,
          f"{what}: the window's top-1 {cls} {float(p):.4f} = vitlens --top {' '.join(opts)} "
          f"{want[0]} {want[1]:.4f}")


def patch_xy(app, r, c, gh, gw):
    """Window px of the centre of patch (r, c), 0-based."""
    x, y, s = app.image_rect()
    h = int(app.state.get("image_h", s))
    return x + (c + 0.5) * s / gw, y + (r + 0.5) * h / gh


def ctrl_drag(app, cells, gh, gw):
    xs = [patch_xy(app, r, c, gh, gw) for r, c in cells]
    run(["xdotool", "keydown", "ctrl"])
    run(["xdotool", "mousemove", "--window", app.wid, str(int(xs[0][0])), str(int(xs[0][1])),
         "mousedown", "1"])
    for x, y in xs[1:]:
        run(["xdotool", "mousemove", "--window", app.wid, str(int(x)), str(int(y))])
    run(["xdotool", "mouseup", "1", "keyup", "ctrl"])


def ctrl_click_queued(app, cell, gh, gw):
    """Ctrl+click on `cell` with the app stopped (SIGSTOP) until the whole press, click and
    release are queued, as on a busy machine: the click must be read with the keys held when it
    happened, not with SDL_GetModState(), which is already past the queued Ctrl release."""
    x, y = patch_xy(app, *cell, gh, gw)
    os.kill(app.proc.pid, signal.SIGSTOP)
    try:
        run(["xdotool", "keydown", "ctrl", "mousemove", "--window", app.wid, str(int(x)), str(int(y)),
             "click", "1", "keyup", "ctrl"])
    finally:
        os.kill(app.proc.pid, signal.SIGCONT)


def whatif(app, a, model, photo):
    app.start(photo)
    gh = gw = 12
    L, H = 4, 4
    plain = app.state["top1"]
    check(app.state.get("whatif") == "0,0,0,0,0:0" and app.state.get("plain") == "0",
          f"no intervention at start ({app.state.get('whatif')})")
    # Delete on the mean of the heads: an error, nothing changed
    app.key("Delete", error=1)
    check(app.state["whatif"] == "0,0,0,0,0:0" and app.state["top1"] == plain,
          "Delete on a fusion: an error on the status line, the model unchanged")
    for _ in range(4):  # from the mean fusion up to head 1
        run(["xdotool", "key", "Up"])
    app.wait_state("head 1", head=0)
    n = loads(app)
    app.key("Delete")
    settle(app, "head L4:H1 ablated", n, whatif="1,0,0,0,0:0", plain=1)
    same_top1(app, a, model, photo, ["--ablate", "4:1"], "Delete")
    # the head on screen is marked; the notice names the change, the left side the set
    status = app.wait_line(lambda s: s.startswith("status "), "the status line")
    left, right = status[7:].split(" | ", 1)
    check("head 1/4, ablated" in left and right.strip() == "what if: L4:H1 ablated" and
          "what if: ablated L4:H1" in left,
          f"Delete: 'head 1/4, ablated' and the set on the left, the change on the right: {status}")
    app.key("Down", head=1)  # head 2 is not ablated; the notice answered one key
    status = app.wait_line(lambda s: s.startswith("status "), "the status line")
    left, right = status[7:].split(" | ", 1)
    check("head 2/4" in left and "ablated L4:H1" in left and "head 2/4, ablated" not in left and
          "what if" not in right and "%" in right,
          f"head 2: not marked, the set still on the left, the top-1 on the right: {status}")
    app.key("Up", head=0)
    # Ctrl+drag over four patches of row 6: dropped
    cells = [(5, 3), (5, 4), (5, 5), (5, 6)]
    n = loads(app)
    ctrl_drag(app, cells, gh, gw)
    settle(app, "four patches dropped", n, whatif="1,4,0,0,0:0")
    drop = ";".join(f"{r + 1},{c + 1}" for r, c in cells)
    same_top1(app, a, model, photo, ["--ablate", "4:1", "--drop-patches", drop], "Ctrl+drag")
    save(app.shot(), os.path.join(a.out, "whatif_dropped.png"))
    # Shift+P has no value to rank a dropped patch by: it says so, nothing starts
    run(["xdotool", "key", "--clearmodifiers", "shift+p"])
    line = app.wait_line(lambda s: s.startswith("status ") and "perturbation test" in s,
                         "Shift+P's answer")
    check("not with patches dropped" in line and app.state.get("perturb") == "off",
          f"Shift+P with patches dropped: a notice, no test ({line.split(' | ')[-1]})")
    # 7, then Ctrl+click (all its events queued at once): one patch filled
    app.key("7", fill=1)
    n = loads(app)
    ctrl_click_queued(app, (9, 9), gh, gw)
    settle(app, "one patch filled", n, whatif="1,4,1,0,0:0")
    base = ["--ablate", "4:1", "--drop-patches", drop, "--fill-patches", "10,10"]
    same_top1(app, a, model, photo, base, "7 + Ctrl+click")
    # 8: the position embedding shuffled; 9: layer 4's temperature 2
    n = loads(app)
    app.key("8")
    settle(app, "pos-embed shuffled", n, whatif="1,4,1,1,0:0")
    same_top1(app, a, model, photo, base + ["--pos-embed", "shuffle"], "8")
    n = loads(app)
    app.key("9")
    settle(app, "temperature 2", n, whatif="1,4,1,1,4:2")
    same_top1(app, a, model, photo, base + ["--pos-embed", "shuffle", "--temperature", "4:2"], "9")
    status = app.wait_line(lambda s: s.startswith("status "), "the status line")
    left, right = status[7:].split(" | ", 1)
    check("what if: ablated L4:H1; 4 patches dropped; 1 patch filled; pos-embed shuffled; tau 2 "
          "on layer 4" in left and right.strip() == "what if: layer 4's attention as "
          "softmax(scores / 2)", f"the status line lists them, the change on the right: {status}")
    # three heads more: counted on the status line, which keeps room for the top-1
    for h in (1, 2, 3):
        n = loads(app)
        app.key("Down", head=h)
        app.key("Delete")
        settle(app, f"head L4:H{h + 1} ablated", n, whatif=f"{h + 1},4,1,1,4:2")
    app.key("Up", head=2)
    status = app.wait_line(lambda s: s.startswith("status "), "the status line")
    left, right = status[7:].split(" | ", 1)
    check("what if: 4 heads ablated; 4 patches dropped" in left and "L4:H2" not in left and
          "%" in right, f"four heads: counted, the top-1 on the right: {status}")
    save(app.shot(), os.path.join(a.out, "whatif_four_heads.png"))
    same_top1(app, a, model, photo, base + ["--pos-embed", "shuffle", "--temperature", "4:2",
                                            "--ablate", "4:1,4:2,4:3,4:4"], "four heads")
    # back to L4:H1 alone: H3 (on screen), H4, H2
    for h, moves in ((2, ()), (3, (("Down", 3),)), (1, (("Up", 2), ("Up", 1)))):
        for k, to in moves:
            app.key(k, head=to)
        n = loads(app)
        app.key("Delete")
        settle(app, f"head L4:H{h + 1} back", n)
    check(app.state["whatif"] == "1,4,1,1,4:2", f"L4:H1 alone again ({app.state['whatif']})")
    # a temperature past 1024: an error, the interventions as they were
    n = loads(app)
    for _ in range(9):
        run(["xdotool", "key", "9"])
    settle(app, "temperature 1024", n, whatif="1,4,1,1,4:1024")
    app.key("9", error=1)
    err = app.wait_line(lambda s: s.startswith("error "), "the error line")
    check(app.state["whatif"] == "1,4,1,1,4:1024" and "temperature" in err,
          f"past 1024: an error ({err}), the interventions unchanged")
    save(app.shot(), os.path.join(a.out, "whatif_error.png"))
    # Backspace: all off, the plain model again
    n = loads(app)
    app.key("BackSpace")
    settle(app, "all off", n, whatif="0,0,0,0,0:0", plain=0)
    check(app.state["top1"] == plain, f"Backspace: the plain model's top-1 again ({plain})")
    quit_app(app)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    model = os.path.join(ASSETS, "model.safetensors")
    photo = os.path.join(ASSETS, "demo", sorted(os.listdir(os.path.join(ASSETS, "demo")))[0])
    env = dict(os.environ, VITLENS_TRACE="1")
    ok = run_checks(App([a.app, "--model", model, photo], env), lambda app: whatif(app, a, model, photo))
    print("whatif: all checks passed" if ok else "whatif: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
