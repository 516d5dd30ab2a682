#!/usr/bin/env python3
"""vitlens --export and --top on videos the test encodes itself (gst-launch-1.0; no camera,
nothing downloaded), through app/media/media.c and app/headless/headless.c.

  --case export  a ball moving over a background (videotestsrc, VP8 in WebM): --export DIR
                 --every E writes DIR/frame_NNNNNN/ for frames 0, E, 2E, ... and frames.csv;
                 each kept frame's files equal, byte for byte (every .npy, every PNG, the
                 CSVs), those `vitlens --export` writes for the same frame decoded to a PNG by
                 gst-launch-1.0 (uridecodebin ! videoconvert ! RGB ! pngenc) and named as the
                 frame is (clip.webm#N, so that the overviews' titles agree), but the
                 feature PCA's after the first frame (its colours held: --case pca); frames.csv's
                 top-5 equal --top 5 of that PNG. Control: frame 0's reference against frame
                 E's export must differ (the comparison sees a change of frame).
  --case pca     stable colours over time (issue 37): a textured object (red, white and
                 blue quarters, a black dot) pasted at three places over a fixed noisy
                 background (PIL; VP8 in WebM). --export writes each frame's feature PCA on
                 the basis of the first frame, held: the mean colour over the object's patches
                 (the last layer's L{L}_pca.npy) stays within PCA_TOL of frame 0's in every
                 frame; frame 0's PCA files equal its photo's (one fit, the same way in both
                 modes). Control: the same frames decoded to PNGs and exported as photos (a
                 fit per frame, the old behaviour) drift beyond PCA_TOL (a component's sign
                 flips between frames), so the check would fail if the basis were not held.
  --case order   frames that draw their index (a square at x = 4 * index, PIL), encoded as
                 VP8 in WebM and as MPEG-4 with B-frames in AVI (decoded out of order, shown
                 in order): test_media reads the square at 4 * index + 3.5 in every frame,
                 indices 0, 1, ... and timestamps increasing (AVI: never decreasing, it has
                 no presentation times); vitlens --top prints the frames' "# frame N T s"
                 lines in the same order.
  --case thin    --every N, --fps F and --frames N on a 30-frame, 10 fps clip: the frames
                 --top prints are those the rules give (computed here with exact fractions
                 from the frame rate), their lines the unthinned run's; --every with --fps, or
                 --every or --frames on a photo, is refused (exit 2).
  --case bad     a text file named .webm, a WebM cut in its header, one cut in the middle, an
                 empty .mp4, a missing file, two videos at once, --camera on a missing device,
                 on /dev/null and on a folder, --camera with an IMAGE: each exits 1 or 2 within
                 the time allowed, the message names the file and the reason; no sanitizer
                 report (the ASan build runs this too).

Usage: test_video.py --app VITLENS --media TEST_MEDIA --work DIR --case CASE [--model M
       --labels L] (a --model missing on disk: exit 77, skipped)."""
import argparse
import filecmp
import os
import re
import shutil
import subprocess
import sys
from fractions import Fraction

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


def run(cmd, timeout=600, **kw):
    """cmd's exit status, stdout, stderr (text); a timeout is a failure, not a hang."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        check(False, f"{' '.join(cmd)} finished within {timeout} s")
        return -1, "", "timeout"
    return r.returncode, r.stdout, r.stderr


def gst(*pipeline):
    rc, out, err = run(["gst-launch-1.0", "-q", *pipeline])
    if rc != 0:
        sys.exit(f"gst-launch-1.0 {' '.join(pipeline)}: exit {rc}\n{out}\n{err}")


def sanitizer_clean(err):
    return not re.search(r"AddressSanitizer|LeakSanitizer|runtime error:", err)


def ball_clip(path, n, w, h, pattern="ball"):
    gst("videotestsrc", f"pattern={pattern}", f"num-buffers={n}", "!",
        f"video/x-raw,width={w},height={h},framerate=10/1", "!", "vp8enc", "!", "webmmux", "!",
        "filesink", f"location={path}")


def vitlens(a, *args):
    cmd = [a.app] + (["--model", a.model] if a.model else []) + \
        (["--labels", a.labels] if a.labels else []) + list(args)
    return run(cmd)


def frame_lines(out):
    """[(index, seconds)] of --top's "# frame N T s" lines."""
    return [(int(m.group(1)), float(m.group(2)))
            for m in re.finditer(r"^# frame (\d+) (-?[\d.]+) s$", out, re.M)]


def tops(out):
    """{frame index: [its K lines]} of a --top run on a video."""
    res, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"# frame (\d+) ", line)
        if m:
            cur = res.setdefault(int(m.group(1)), [])
        elif cur is not None and line.strip():
            cur.append(line)
    return res


def same_tree(x, y, but=None):
    """(ok, how many files, first difference) for two folders, every file byte for byte (but
    those whose name matches the regex `but`)."""
    fx, fy = sorted(os.listdir(x)), sorted(os.listdir(y))
    if fx != fy:
        return False, len(fx), f"file lists differ: {sorted(set(fx) ^ set(fy))[:5]}"
    for f in fx:
        if but and re.search(but, f):
            continue
        if not filecmp.cmp(os.path.join(x, f), os.path.join(y, f), shallow=False):
            return False, len(fx), f"{f} differs"
    return True, len(fx), ""


def case_export(a, work):
    n, every = (4, 3) if a.model else (6, 2)
    clip = os.path.join(work, "clip.webm")
    ball_clip(clip, n, 160, 120)
    pngs = os.path.join(work, "png")
    os.makedirs(pngs)
    gst("uridecodebin", f"uri=file://{os.path.abspath(clip)}", "!", "videoconvert", "!",
        "video/x-raw,format=RGB", "!", "pngenc", "!", "multifilesink",
        f"location={pngs}/f_%06d.png")
    check(len(os.listdir(pngs)) == n, f"gst-launch-1.0 decodes {n} frames to PNGs "
          f"({len(os.listdir(pngs))})")
    out_dir = os.path.join(work, "out")
    rc, out, err = vitlens(a, "--export", out_dir, "--every", str(every), clip)
    check(rc == 0 and sanitizer_clean(err), f"--export DIR --every {every} clip.webm: exit {rc}"
          + (f"\n{err[-2000:]}" if rc else ""))
    kept = list(range(0, n, every))
    want = [f"frame_{i:06d}" for i in kept]
    got = sorted(d for d in os.listdir(out_dir) if d.startswith("frame_")) \
        if os.path.isdir(out_dir) else []
    check(got == want, f"--every {every}: the folders of frames {kept} ({got})")
    csv = os.path.join(out_dir, "frames.csv")
    rows = open(csv).read().splitlines() if os.path.exists(csv) else []
    check(rows and rows[0].startswith("frame,time_s,class1,prob1,label1"),
          "frames.csv's header: frame,time_s,class1,prob1,label1,...")
    rows = [r for r in rows[1:]]
    check([int(r.split(",")[0]) for r in rows] == kept and
          all(abs(float(r.split(",")[1]) - i / 10) < 1e-6 for r, i in zip(rows, kept)),
          f"frames.csv: a row per kept frame, its time index / 10 s ({len(rows)} rows)")
    for r, i in zip(rows, kept):
        named = os.path.join(work, "named")
        os.makedirs(named, exist_ok=True)
        photo = os.path.join(named, f"clip.webm#{i}")  # the name the frame carries
        shutil.copy(os.path.join(pngs, f"f_{i:06d}.png"), photo)
        ref = os.path.join(work, f"ref_{i}")
        rc, _, err = vitlens(a, "--export", ref, photo)
        check(rc == 0, f"--export of frame {i}'s PNG: exit {rc}" + (f"\n{err}" if rc else ""))
        # the feature PCA's colours are on the basis of the first frame written (held: case
        # pca), so a later frame's are not its photo's own fit
        held = None if i == kept[0] else r"_pca\."
        ok, count, diff = same_tree(ref, os.path.join(out_dir, f"frame_{i:06d}"), held)
        check(ok and count > 10, f"frame {i}: its {count} files (.npy, PNG, CSV) equal the "
              f"photo's, byte for byte{' but the held PCA' if held else ''} {diff}")
        # the CSV's top-5 against --top 5 of the PNG: class and probability
        rc, top, _ = vitlens(a, "--top", "5", photo)
        want5 = [(int(l.split()[2]), float(l.split()[1])) for l in top.splitlines()]
        cells = re.findall(r',(\d+),([-\d.e]+),"(?:[^"]|"")*"', r)
        got5 = [(int(c), float(p)) for c, p in cells]
        check(len(got5) == len(want5) and all(
            c == wc and abs(p - wp) <= 5e-5 for (c, p), (wc, wp) in zip(got5, want5)),
            f"frame {i}: frames.csv's top-5 are --top 5's of its PNG ({got5[:2]}...)")
    if len(kept) > 1:  # the control: another frame's maps differ from this reference's
        x, y = os.path.join(work, "ref_0"), os.path.join(out_dir, f"frame_{kept[1]:06d}")
        both = sorted(f for f in set(os.listdir(x)) & set(os.listdir(y)) if f.endswith(".npy"))
        differ = [f for f in both if not filecmp.cmp(os.path.join(x, f), os.path.join(y, f),
                                                     shallow=False)]
        check(both and len(differ) > len(both) // 2,
              f"control: frame 0's reference against frame {kept[1]}'s export: {len(differ)} of "
              f"the {len(both)} .npy files both have differ")


PCA_TOL = 0.3  # the largest change of a channel's mean over the object's patches
PCA_PLACES = [(8, 16), (24, 32), (48, 32)]  # the object's top left, px: whole patches


def object_frames(d, model):
    """A 32 x 32 object at PCA_PLACES over a fixed background, as PNGs in d; its patches
    [(row0, col0, rows, cols)] in the model's grid (the frames are the model's input size)."""
    from PIL import Image, ImageDraw
    import numpy as np
    side, patch = model
    os.makedirs(d)
    rng = np.random.default_rng(37)
    bg = (rng.integers(0, 40, (side, side, 3)) + np.array([60, 90, 60])).astype(np.uint8)
    k = side // 96  # the object and its places scale with the input side
    obj = Image.new("RGB", (32, 32), (250, 250, 250))
    draw = ImageDraw.Draw(obj)
    draw.rectangle([0, 0, 15, 15], fill=(220, 30, 30))
    draw.rectangle([16, 16, 31, 31], fill=(30, 30, 220))
    draw.ellipse([4, 20, 12, 28], fill=(0, 0, 0))
    obj = obj.resize((32 * k, 32 * k), Image.NEAREST)
    cells = []
    for i, (x, y) in enumerate(PCA_PLACES):
        im = Image.fromarray(bg)
        im.paste(obj, (x * k, y * k))
        im.save(os.path.join(d, f"f_{i:03d}.png"))
        cells.append((y * k // patch, x * k // patch, 32 * k // patch, 32 * k // patch))
    return cells


def object_colours(folder, layer, cells):
    """[frames, 3]: the mean RGB over the object's patches of each frame's LAYER_pca.npy."""
    import numpy as np
    out = []
    for d, (r, c, h, w) in zip(folder, cells):
        a = np.load(os.path.join(d, f"{layer}_pca.npy"))
        out.append(a[r:r + h, c:c + w, :3].reshape(-1, 3).mean(0))
    return np.array(out)


def case_pca(a, work):
    import json
    import numpy as np
    cfg = os.path.join(os.path.dirname(a.model) if a.model else
                       os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../assets/default"),
                       "config.json")
    pre = json.load(open(cfg)).get("pretrained_cfg", {})
    side = pre.get("input_size", [3, 224, 224])[-1]
    arch = json.load(open(cfg)).get("architecture", "")
    patch = int(re.search(r"patch(\d+)", arch).group(1)) if "patch" in arch else 16
    cells = object_frames(os.path.join(work, "f"), (side, patch))
    clip = os.path.join(work, "object.webm")
    gst("imagesequencesrc", f"location={work}/f/f_%03d.png", "start-index=0", "framerate=10/1",
        "!", "pngdec", "!", "videoconvert", "!", "vp8enc", "target-bitrate=4000000", "!",
        "webmmux", "!", "filesink", f"location={clip}")
    n = len(PCA_PLACES)
    out_dir = os.path.join(work, "held")
    rc, out, err = vitlens(a, "--export", out_dir, clip)
    check(rc == 0 and sanitizer_clean(err), f"--export DIR object.webm: exit {rc}"
          + (f"\n{err[-2000:]}" if rc else ""))
    # the old behaviour, a fit per frame: the same frames decoded, exported as photos
    pngs = os.path.join(work, "png")
    os.makedirs(pngs)
    gst("uridecodebin", f"uri=file://{os.path.abspath(clip)}", "!", "videoconvert", "!",
        "video/x-raw,format=RGB", "!", "pngenc", "!", "multifilesink",
        f"location={pngs}/f_%06d.png")
    photos = sorted(os.path.join(pngs, f) for f in os.listdir(pngs))
    fresh_dir = os.path.join(work, "fresh")
    rc, _, err = vitlens(a, "--export", fresh_dir, *photos)
    check(rc == 0 and len(photos) == n, f"--export of the {len(photos)} frames as photos: exit {rc}"
          + (f"\n{err[-2000:]}" if rc else ""))
    held = [os.path.join(out_dir, f"frame_{i:06d}") for i in range(n)]
    fresh = [os.path.join(fresh_dir, f"f_{i:06d}") for i in range(n)]
    layers = sorted(f[:3] for f in os.listdir(held[0]) if re.fullmatch(r"L\d\d_pca\.npy", f))
    check(len(layers) > 0, f"the export has the feature PCA of {len(layers)} layers")
    if not layers:
        return
    pca0 = [f for f in os.listdir(held[0]) if "_pca." in f]
    same = all(filecmp.cmp(os.path.join(held[0], f), os.path.join(fresh[0], f), shallow=False)
               for f in pca0)
    check(same, f"frame 0: its {len(pca0)} PCA files (fitted on it) equal its photo's")
    for layer in layers:
        h = object_colours(held, layer, cells)
        f = object_colours(fresh, layer, cells)
        dh, df = float(np.abs(h - h[0]).max()), float(np.abs(f - f[0]).max())
        print(f"      {layer}: the object's mean colour drifts {dh:.3f} held, {df:.3f} fitted "
              f"per frame; held {np.round(h, 2).tolist()}, per frame {np.round(f, 2).tolist()}")
        if layer != layers[-1]:
            continue
        check(dh <= PCA_TOL, f"{layer}: the object's colours held within {PCA_TOL} of frame 0's "
              f"({dh:.3f})")
        check(df > PCA_TOL, f"control {layer}: a fit per frame drifts beyond {PCA_TOL} ({df:.3f})")


def square_frames(d, n):
    from PIL import Image
    os.makedirs(d)
    for i in range(n):
        im = Image.new("RGB", (96, 64), (0, 0, 40))
        im.paste((255, 255, 255), (4 * i, 28, 4 * i + 8, 36))
        im.save(os.path.join(d, f"f_{i:03d}.png"))


def case_order(a, work):
    n = 20
    sq = os.path.join(work, "sq")
    square_frames(sq, n)
    src = ["imagesequencesrc", f"location={sq}/f_%03d.png", "start-index=0", "framerate=10/1",
           "!", "pngdec", "!", "videoconvert", "!"]
    webm, avi = os.path.join(work, "sq.webm"), os.path.join(work, "sq.avi")
    gst(*src, "vp8enc", "!", "webmmux", "!", "filesink", f"location={webm}")
    # B-frames: decoded in another order than shown; AVI (avenc_mpeg4's own timestamps are
    # not usable in MP4 with this libav)
    gst(*src, "avenc_mpeg4", "max-bframes=2", "bitrate=2000000", "!", "avimux", "!", "filesink",
        f"location={avi}")
    for clip in (webm, avi):
        name = os.path.basename(clip)
        rc, out, err = run([a.media, os.path.join(work, "scratch"), "frames", clip])
        lines = out.splitlines()
        rows = [l.split() for l in lines if l[:1].isdigit()]
        check(rc == 0 and lines and lines[-1] == "end" and len(rows) == n,
              f"{name}: test_media reads {n} frames to the end ({len(rows)}: {lines[-1:]})")
        idx = [int(r[0]) for r in rows]
        pts = [int(r[1]) for r in rows]
        xs = [float(r[4]) for r in rows]
        check(idx == list(range(len(rows))), f"{name}: indices 0, 1, ... in order")
        # AVI keeps no presentation times: with B-frames GStreamer's are interpolated and two
        # neighbours may share one; they never go back
        strict = clip == webm
        check(all(p1 > p0 if strict else p1 >= p0 for p0, p1 in zip(pts, pts[1:])),
              f"{name}: timestamps {'increase' if strict else 'never decrease'}")
        check(all(abs(x - (4 * i + 3.5)) < 1.0 for i, x in enumerate(xs)),
              f"{name}: frame i shows the square at x = 4i + 3.5 (not reordered): "
              f"{[round(x, 1) for x in xs[:6]]}...")
        rc, out, err = vitlens(a, "--top", "1", clip)
        fl = frame_lines(out)
        check(rc == 0 and [i for i, _ in fl] == list(range(n)) and
              all(t1 > t0 if strict else t1 >= t0 for (_, t0), (_, t1) in zip(fl, fl[1:])),
              f"{name}: vitlens --top 1 prints frames 0..{n - 1}, times in order"
              + (f"\n{err}" if rc else ""))


def case_thin(a, work):
    n = 30
    clip = os.path.join(work, "thin.webm")
    ball_clip(clip, n, 64, 48)
    rc, out, err = vitlens(a, "--top", "1", clip)
    full = tops(out)
    check(rc == 0 and sorted(full) == list(range(n)), f"--top 1, unthinned: all {n} frames")

    def fps_rule(f):
        """The first frame at or after each 1/f s: t_i = i / 10 exactly (a 10 fps clip)."""
        f, keep, nxt = Fraction(f), [], Fraction(0)
        for i in range(n):
            t = Fraction(i, 10)
            if t >= nxt:
                keep.append(i)
                nxt = (int(t * f) + 1) / f  # the next slot's start
        return keep

    cases = [(["--every", "1"], list(range(n))), (["--every", "4"], list(range(0, n, 4))),
             (["--every", "7"], list(range(0, n, 7))), (["--every", "100"], [0]),
             (["--frames", "3"], [0, 1, 2]), (["--every", "4", "--frames", "3"], [0, 4, 8]),
             (["--frames", "100"], list(range(n)))]
    for f in ("4", "2.5", "3", "0.5", "10", "100"):
        cases.append((["--fps", f], fps_rule(f)))
    for args, want in cases:
        rc, out, err = vitlens(a, "--top", "1", *args, clip)
        got = tops(out)
        check(rc == 0 and sorted(got) == want and all(got[i] == full.get(i) for i in got),
              f"{' '.join(args)}: frames {want if len(want) < 12 else str(want[:6]) + '...'} "
              f"with the unthinned run's lines (got {sorted(got)[:12]})")
    rc, _, err = vitlens(a, "--top", "1", "--every", "2", "--fps", "3", clip)
    check(rc == 2 and "--every and --fps" in err, f"--every with --fps: refused, exit {rc}: "
          f"{err.strip()}")
    photo = os.path.join(work, "still.png")
    gst("videotestsrc", "num-buffers=1", "!", "video/x-raw,width=64,height=48", "!", "pngenc",
        "!", "filesink", f"location={photo}")
    rc, _, err = vitlens(a, "--top", "1", "--every", "2", photo)
    check(rc == 2 and "still.png is a photo" in err, f"--every on a photo: refused, exit {rc}: "
          f"{err.strip()}")
    rc, _, err = vitlens(a, "--top", "1", "--frames", "2", photo)
    check(rc == 2 and "--frames goes with a video" in err, f"--frames on a photo: refused, exit "
          f"{rc}: {err.strip()}")


def case_bad(a, work):
    clip = os.path.join(work, "good.webm")
    ball_clip(clip, 30, 64, 48)
    data = open(clip, "rb").read()
    files = {"notes.webm": b"not a video at all, only words\n" * 20, "header.webm": data[:300],
             "half.webm": data[:len(data) * 6 // 10], "empty.mp4": b""}
    for name, b in files.items():
        open(os.path.join(work, name), "wb").write(b)
    expect = [("notes.webm", ["notes.webm: GStreamer cannot decode it"], 1),
              ("header.webm", ["header.webm: GStreamer cannot decode it"], 1),
              ("half.webm", ["half.webm: the stream ends at frame", "cut short"], 1),
              ("empty.mp4", ["empty.mp4: GStreamer cannot"], 1),
              ("missing.webm", ["missing.webm: cannot open: No such file"], 1)]
    for name, words, code in expect:
        # --export writes one frame (--every 100), reading on to the cut all the same
        for mode in (["--top", "1"], ["--export", os.path.join(work, "out_" + name), "--every",
                                      "100"]):
            rc, out, err = vitlens(a, *mode, os.path.join(work, name))
            check(rc == code and all(w in err for w in words) and sanitizer_clean(err),
                  f"{mode[0]} {name}: exit {rc} (want {code}), {err.strip()[-300:]!r}")
    # the frames before the cut were written
    rc, out, err = vitlens(a, "--top", "1", os.path.join(work, "half.webm"))
    check(len(frame_lines(out)) >= 5, f"half.webm: the {len(frame_lines(out))} frames before the "
          "cut are printed")
    # --camera without a camera: a missing device, a file that is no V4L2 device, a folder
    for dev, words in (("/dev/video-vitlens-none", ["/dev/video-vitlens-none: no camera there"]),
                       ("/dev/null", ["/dev/null: the camera:", "v4l2"]),
                       (work, [f"{work}: the camera:"])):
        rc, out, err = vitlens(a, "--camera", dev, "--top", "5", "--frames", "3")
        check(rc == 1 and all(w in err for w in words) and sanitizer_clean(err),
              f"--camera {dev}: exit {rc}, {err.strip()[-200:]!r}")
    rc, _, err = vitlens(a, "--camera", "/dev/video0", "--top", "1", clip)
    check(rc == 2 and "takes no IMAGE" in err, f"--camera with an IMAGE: exit {rc}: {err.strip()}")
    rc, _, err = vitlens(a, "--export", os.path.join(work, "two"), clip,
                         os.path.join(work, "good.webm"))
    check(rc == 2 and "a video goes alone" in err, f"two files with a video: exit {rc}: "
          f"{err.strip()}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--app", required=True)
    p.add_argument("--media", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--case", required=True, choices=["export", "order", "thin", "bad", "pca"])
    p.add_argument("--model")
    p.add_argument("--labels")
    a = p.parse_args()
    if not shutil.which("gst-launch-1.0"):
        print("SKIP: no gst-launch-1.0 (Debian: gstreamer1.0-tools, scripts/install-deps.sh)")
        return 77
    if a.model and not os.path.exists(a.model):
        print(f"SKIP: {a.model} is not there (VITLENS_SHARED_DIR)")
        return 77
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    {"export": case_export, "order": case_order, "thin": case_thin, "bad": case_bad,
     "pca": case_pca}[a.case](a, a.work)
    print(f"{len(failures)} check(s) failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
