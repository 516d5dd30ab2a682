#!/usr/bin/env python3
"""`cmake --install` into a staging prefix (no root needed): exactly the expected files
(the app, its shaders, the built-in model and demo scenes, the .desktop file, AppStream
metainfo, the icons, the man page; no test or benchmark), each desktop file valid, the
committed icon PNGs the renders of the SVG, and the staged binary running on the staged
built-in model as the build tree's does on the source tree's.

Usage: test_install_tree.py --app build/vitlens --build build --source . --out DIR
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vitlens_install import (APP_ID, ICON_PX, Checks, check_desktop, check_icons,  # noqa: E402
                             check_man, check_metainfo, expected_files, list_tree, parse_top,
                             same_top)

check = Checks()


def check_icon_renders(source):
    """data/icons/APP_ID-N.png are tools/gen_icons.sh's renders of the SVG as it is now:
    rendered again, every channel within 2 levels on average (an edited SVG whose PNGs
    were not made again fails)."""
    rsvg = shutil.which("rsvg-convert")
    if not check(rsvg is not None, "rsvg-convert is installed (librsvg2-bin)"):
        return
    from PIL import Image, ImageChops, ImageStat
    icons = os.path.join(source, "data/icons")
    with tempfile.TemporaryDirectory() as tmp:
        for px in ICON_PX:
            out = os.path.join(tmp, f"{px}.png")
            subprocess.run([rsvg, "--width", str(px), "--height", str(px),
                            os.path.join(icons, f"{APP_ID}.svg"), "--output", out], check=True)
            a = Image.open(os.path.join(icons, f"{APP_ID}-{px}.png")).convert("RGBA")
            b = Image.open(out).convert("RGBA")
            diff = max(ImageStat.Stat(ImageChops.difference(a, b)).mean) if a.size == b.size \
                else 255
            check(diff <= 2.0, f"data/icons/{APP_ID}-{px}.png is the SVG's render "
                  f"(mean difference {diff:.2f} levels; else run tools/gen_icons.sh)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True, help="the build tree's vitlens")
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True, help="staging folder (emptied)")
    a = ap.parse_args()

    shutil.rmtree(a.out, ignore_errors=True)
    prefix = os.path.join(a.out, "prefix")
    r = subprocess.run(["cmake", "--install", a.build, "--prefix", prefix],
                       capture_output=True, text=True)
    if not check(r.returncode == 0, f"cmake --install {a.build} --prefix {prefix}"):
        print(r.stdout + r.stderr)
        return check.done()

    want, got = expected_files(a.source), list_tree(prefix)
    check(not want - got, f"the {len(want)} expected files are installed" +
          (f"; missing: {sorted(want - got)}" if want - got else ""))
    check(not got - want, "nothing else is (no test, benchmark or training log)" +
          (f"; also: {sorted(got - want)}" if got - want else ""))
    check(os.access(os.path.join(prefix, "bin/vitlens"), os.X_OK), "bin/vitlens is executable")

    share = os.path.join(prefix, "share")
    check_desktop(check, os.path.join(share, f"applications/{APP_ID}.desktop"))
    check_metainfo(check, os.path.join(share, f"metainfo/{APP_ID}.metainfo.xml"))
    check_man(check, os.path.join(share, "man/man1/vitlens.1.gz"))
    check_icons(check, os.path.join(share, "icons/hicolor"))
    check_icon_renders(a.source)

    # The staged binary on the staged model (VITLENS_ASSETS: the binary's compiled-in
    # install folder is the build's prefix, not this one) against the build tree's binary
    # on the source tree's model: the same predictions.
    assets = os.path.join(share, "vitlens/assets")
    demo_dir = os.path.join(assets, "default/demo")
    demos = sorted(f for f in os.listdir(demo_dir) if f.endswith(".png"))
    scene = os.path.join(demo_dir, demos[0])
    env = {k: v for k, v in os.environ.items() if not k.startswith("VITLENS_")}
    staged = subprocess.run([os.path.join(prefix, "bin/vitlens"), "--top", "3", scene],
                            capture_output=True, text=True, timeout=120,
                            env=dict(env, VITLENS_ASSETS=assets), cwd=a.out)
    built = subprocess.run([a.app, "--top", "3", os.path.join(a.source, "assets/default/demo",
                                                              demos[0])],
                           capture_output=True, text=True, timeout=120, env=env)
    top_s, top_b = parse_top(staged.stdout), parse_top(built.stdout)
    check(staged.returncode == 0 and len(top_s) == 3,
          f"the staged vitlens --top 3 on the staged model and {demos[0]}: {top_s[:1]}"
          + (f"\n{staged.stderr}" if staged.returncode else ""))
    check(same_top(top_s, top_b), "the same predictions as the build tree's binary")
    # the default lesson installed beside the built-in model: the staged binary exports it
    lesson = os.path.join(assets, "default/lesson.txt")
    r = subprocess.run([os.path.join(prefix, "bin/vitlens"), "--lesson", lesson, "--lesson-export",
                        os.path.join(a.out, "lesson"), scene], capture_output=True, text=True,
                       timeout=120, env=dict(env, VITLENS_ASSETS=assets), cwd=a.out)
    check(r.returncode == 0 and not r.stderr and " 17 steps " in r.stdout,
          f"the staged default lesson: 17 steps exported ({r.stdout.strip()}{r.stderr.strip()})")
    return check.done()


if __name__ == "__main__":
    sys.exit(main())
