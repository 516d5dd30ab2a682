#!/usr/bin/env python3
"""The Debian package, end to end, on this machine: configure a fresh Release build with
prefix /usr in a temporary folder, build it, `cpack -G DEB`, check the package's Depends
and contents, `dpkg -i` it, run the installed /usr/bin/vitlens from a folder with nothing
but a photo in it (no VITLENS_* variables, no source-tree path compiled in): --top 5 on the
built-in model found where it is installed, and on DeiT-Tiny with chelsea.png when the
shared weights are there, --export, the window under Xvfb (its shaders and font found);
validate the installed .desktop file, metainfo and man page; then `dpkg -r vitlens` and
check that it is gone.

It installs a system package, so it runs only as root (CI) and skips (77) otherwise or
without dpkg. It refuses (fails) when a vitlens package it did not install is there, or
/usr/bin/vitlens belongs to no package; a package a crashed run of this test left behind
(its marker file says so) is removed first. Runs of it on one machine take turns (a lock).

Usage: test_package.py --source . --app build/vitlens --shared ../shared [--keep]
"""
import argparse
import fcntl
import glob
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vitlens_install import (APP_ID, Checks, check_desktop, check_icons, check_man,  # noqa: E402
                             check_metainfo, expected_files, parse_top, same_top)

check = Checks()
LOCK = "/var/lock/vitlens-test-package.lock"
MARKER = "/var/tmp/vitlens-test-package.installed"  # "this test installed the package"
# The Debian 12 package of each library the binary links (its NEEDED entries): the Depends
# line must name it (dpkg-shlibdeps finds them; an unknown one fails, add it here). And what
# it opens at run time, not linked: libGL through libepoxy, Mesa's drivers, the DejaVu font.
SONAME_PACKAGES = {
    "libc.so.6": "libc6", "libm.so.6": "libc6", "libmvec.so.1": "libc6",
    "libSDL2-2.0.so.0": "libsdl2-2.0-0", "libSDL2_ttf-2.0.so.0": "libsdl2-ttf-2.0-0",
    "libepoxy.so.0": "libepoxy0", "libfontconfig.so.1": "libfontconfig1",
    "libopenblas.so.0": "libopenblas0", "liblapacke.so.3": "liblapacke",
    "libcjson.so.1": "libcjson1", "libzip.so.4": "libzip4", "libjpeg.so.62": "libjpeg62-turbo", "libwebp.so.7": "libwebp7",
    "libwebpdemux.so.2": "libwebpdemux2", "libtiff.so.6": "libtiff6", "libheif.so.1": "libheif1",
    "libexif.so.12": "libexif12", "libX11.so.6": "libx11-6",
    "libz.so.1": "zlib1g", "libpcre2-8.so.0": "libpcre2-8-0", "libicuuc.so.72": "libicu72",
    "libicudata.so.72": "libicu72",
    # SigLIP's tokenizer (engine/text/spm.cc): libsentencepiece and the C++ runtime it needs
    "libsentencepiece.so.0": "libsentencepiece0", "libstdc++.so.6": "libstdc++6",
    "libgcc_s.so.1": "libgcc-s1",
    # video files and cameras (app/media/): GStreamer and the GLib it is built on
    "libgstreamer-1.0.so.0": "libgstreamer1.0-0", "libgstapp-1.0.so.0":
    "libgstreamer-plugins-base1.0-0", "libgstvideo-1.0.so.0": "libgstreamer-plugins-base1.0-0",
    "libgstbase-1.0.so.0": "libgstreamer1.0-0", "libgobject-2.0.so.0": "libglib2.0-0",
    "libglib-2.0.so.0": "libglib2.0-0"}
# and GStreamer's plugins, opened at run time: the demuxers and decoders, v4l2src
RUNTIME_PACKAGES = ["libgl1", "libgl1-mesa-dri", "fonts-dejavu-core", "gstreamer1.0-plugins-base",
                    "gstreamer1.0-plugins-good", "gstreamer1.0-libav"]

def run(cmd, **kw):
    """Run cmd, echoed; its output captured (text). Never raises on a non-zero exit."""
    print("$ " + " ".join(cmd), flush=True)
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run(cmd, **kw)


def pkg_status(name):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status} ${Version}", name],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def installed(name):
    return " installed " in pkg_status(name) + " "


def remove_package():
    r = run(["dpkg", "-r", "vitlens"])
    if r.returncode == 0 and os.path.exists(MARKER):
        os.remove(MARKER)
    return r


def clean_env():
    """The environment of a user who just installed the package: no VITLENS_* variable."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "LOGNAME")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PATH"] = "/usr/bin:/bin"
    return env


def build_package(source, tmp):
    """Configure, build and cpack in tmp/build; returns the .deb's path or None."""
    build = os.path.join(tmp, "build")
    r = run(["cmake", "-S", source, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
             "-DCMAKE_INSTALL_PREFIX=/usr", "-DVITLENS_USE_SOURCE_TREE=OFF",
             "-DVITLENS_BUILD_TESTS=OFF", "-DVITLENS_BUILD_BENCH=OFF", "-DVITLENS_WERROR=ON"])
    if not check(r.returncode == 0, "configure a Release build with prefix /usr"):
        print(r.stdout[-3000:] + r.stderr[-3000:])
        return None
    t0 = time.time()
    r = run(["cmake", "--build", build, "-j", str(os.cpu_count() or 2)])
    if not check(r.returncode == 0, f"build it ({time.time() - t0:.0f} s), no warning "
                 "(-Werror)"):
        print(r.stdout[-5000:] + r.stderr[-5000:])
        return None
    r = run(["cpack", "-G", "DEB"], cwd=build)
    debs = glob.glob(os.path.join(build, "vitlens_*.deb"))
    if not check(r.returncode == 0 and len(debs) == 1, f"cpack -G DEB: {debs}"):
        print(r.stdout[-3000:] + r.stderr[-3000:])
        return None
    return debs[0]


def check_deb(deb, source):
    info = run(["dpkg-deb", "-f", deb, "Package", "Version", "Section", "Maintainer",
                "Depends"]).stdout
    print(info)
    fields = dict(l.split(": ", 1) for l in info.splitlines() if ": " in l)
    check(fields.get("Package") == "vitlens", "Package: vitlens")
    check(fields.get("Section") == "science", "Section: science")
    depends = [d.strip().split()[0] for alt in fields.get("Depends", "").split(",")
               for d in alt.split("|")]
    # The binary's NEEDED libraries, from the package's own copy.
    unpacked = tempfile.mkdtemp(prefix="vitlens-deb-")
    run(["dpkg-deb", "-x", deb, unpacked])
    dyn = run(["objdump", "-p", os.path.join(unpacked, "usr/bin/vitlens")]).stdout
    shutil.rmtree(unpacked, ignore_errors=True)
    needed = [l.split()[1] for l in dyn.splitlines() if l.strip().startswith("NEEDED")]
    unknown = [n for n in needed if n not in SONAME_PACKAGES]
    check(needed and not unknown, f"the binary links {len(needed)} libraries, each of a known "
          "package" + (f"; unknown: {unknown} (SONAME_PACKAGES)" if unknown else ""))
    want = sorted({SONAME_PACKAGES[n] for n in needed if n in SONAME_PACKAGES}) + RUNTIME_PACKAGES
    missing = [p for p in want if p not in depends]
    check(not missing, f"Depends names the {len(want)} packages of those libraries, GL and the "
          "font" + (f"; missing: {missing}" if missing else ""))
    # dpkg-deb -c: "-rwxr-xr-x root/root 516312 2026-11-25 04:36 ./usr/bin/vitlens", one
    # line per entry, directories ending in "/"
    paths = [l.split(None, 5)[5] for l in run(["dpkg-deb", "-c", deb]).stdout.splitlines()
             if len(l.split(None, 5)) == 6]
    got = {p[len("./usr/"):] for p in paths if p.startswith("./usr/") and not p.endswith("/")}
    want = expected_files(source)
    check(got == want, f"the package holds the {len(want)} files of `cmake --install`" +
          (f"; missing {sorted(want - got)}" if want - got else "") +
          (f"; also {sorted(got - want)}" if got - want else ""))


def install(deb):
    r = run(["dpkg", "-i", deb])
    if r.returncode != 0:
        # Only when a runtime dependency is missing; on CI they are all there.
        print(r.stdout + r.stderr)
        r = run(["apt-get", "-f", "install", "-y", "--no-install-recommends"],
                env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        print(r.stdout[-3000:] + r.stderr[-3000:])
    return check(installed("vitlens"), f"dpkg -i {os.path.basename(deb)}: vitlens is "
                 f"installed ({pkg_status('vitlens')})")


def check_installed(a, tmp):
    share = "/usr/share"
    vitlens = "/usr/bin/vitlens"
    with open(vitlens, "rb") as f:
        blob = f.read()
    for path in (os.path.realpath(a.source), tmp):
        check(path.encode() not in blob, f"no path of {path} in {vitlens}")
    r = run(["ldd", vitlens])
    check(r.returncode == 0 and "not found" not in r.stdout, "ldd /usr/bin/vitlens: every "
          "library found" + (f"\n{r.stdout}" if "not found" in r.stdout else ""))
    r = run(["dpkg", "-S", vitlens])
    check(r.returncode == 0 and r.stdout.startswith("vitlens:"), f"dpkg -S {vitlens}: "
          f"{r.stdout.strip()}")

    # A user's folder: a copy of one photo, nothing else; no VITLENS_* in the environment.
    home = os.path.join(tmp, "user")
    os.makedirs(home)
    env = dict(clean_env(), HOME=home)
    chelsea = os.path.join(a.shared, "images/chelsea.png")
    photo = None
    if os.path.isfile(chelsea):
        photo = shutil.copy(chelsea, home)
    demo_dir = f"{share}/vitlens/assets/default/demo"
    demos = sorted(f for f in os.listdir(demo_dir) if f.endswith(".png"))
    scene = os.path.join(demo_dir, demos[0])

    r = run([vitlens, "--help"], cwd=home, env=env)
    check(r.returncode == 0 and f"(default: {share}/vitlens/assets)" in r.stdout,
          "vitlens --help: the built-in model's default folder is the installed one")

    # The built-in model, no --model: found in /usr/share/vitlens/assets.
    r = run([vitlens, "--top", "5", scene], cwd=home, env=env, timeout=120)
    top = parse_top(r.stdout)
    check(r.returncode == 0 and len(top) == 5, f"vitlens --top 5 {demos[0]} (built-in "
          f"model): {top[:1]}" + (f"\n{r.stderr}" if r.returncode else ""))
    ref = run([a.app, "--top", "5", os.path.join(a.source, "assets/default/demo", demos[0])],
              env=env, timeout=120)
    check(same_top(top, parse_top(ref.stdout)), "the same top 5 as the build tree's vitlens")
    if photo:
        r = run([vitlens, "--top", "5", os.path.basename(photo)], cwd=home, env=env,
                timeout=120)
        check(r.returncode == 0 and len(parse_top(r.stdout)) == 5,
              f"vitlens --top 5 chelsea.png (built-in model): {parse_top(r.stdout)[:1]}")

    # DeiT-Tiny on the shared photo.
    deit = os.path.join(a.shared, "models/deit-tiny")
    weights = os.path.join(deit, "deit_tiny_patch16_224.safetensors")
    labels = os.path.join(deit, "imagenet_synset_words.txt")
    if photo and os.path.isfile(weights):
        args = ["--model", weights, "--labels", labels]
        r = run([vitlens, *args, "--top", "5", "chelsea.png"], cwd=home, env=env, timeout=300)
        top = parse_top(r.stdout)
        check(r.returncode == 0 and len(top) == 5 and top[0][2] in (281, 282, 285),
              f"vitlens --top 5 chelsea.png on DeiT-Tiny: a cat first, {top[:1]}"
              + (f"\n{r.stderr}" if r.returncode else ""))
        ref = run([a.app, *args, "--top", "5", photo], env=env, timeout=300)
        check(same_top(top, parse_top(ref.stdout)), "the same top 5 as the build tree's vitlens")
        # a phone photo stored sideways (EXIF orientation 6), opened by the menu entry's
        # command (Exec=vitlens %F, %F the file): upright, the probabilities of the upright
        # pixels (Pillow's exif_transpose, lossless) as the build tree's vitlens gives them
        # (bit-exact against Pillow + timm: parity_preprocess, parity_deit)
        from PIL import Image, ImageOps
        exif = Image.Exif()
        exif[0x0112] = 6
        Image.open(photo).convert("RGB").transpose(Image.ROTATE_90).save(
            os.path.join(home, "phone.jpg"), quality=92, exif=exif)
        upright = os.path.join(tmp, "upright.png")
        ImageOps.exif_transpose(Image.open(os.path.join(home, "phone.jpg"))).save(upright)
        with open(f"/usr/share/applications/{APP_ID}.desktop") as f:
            exec_line = next(ln.split("=", 1)[1].split() for ln in f if ln.startswith("Exec="))
        argv = [w for x in exec_line for w in
                ([*args, "--top", "5", "phone.jpg"] if x == "%F" else [x])]
        r = run(argv, cwd=home, env=env, timeout=300)
        ref = run([a.app, *args, "--top", "5", upright], env=env, timeout=300)
        check(r.returncode == 0 and r.stdout == ref.stdout and parse_top(r.stdout),
              f"the menu entry's command ({' '.join(exec_line)}) on a sideways phone JPEG: "
              f"upright, the upright pixels' top 5 ({parse_top(r.stdout)[:1]})")
        r = run([vitlens, *args, "--export", "maps-deit", "chelsea.png"], cwd=home, env=env,
                timeout=600)
        check_export(r, os.path.join(home, "maps-deit"), "chelsea.png on DeiT-Tiny", 12, 3)
    else:
        print(f"skip  DeiT-Tiny: no {weights} or chelsea.png (VITLENS_SHARED_DIR)")

    r = run([vitlens, "--export", "maps", scene], cwd=home, env=env, timeout=300)
    check_export(r, os.path.join(home, "maps"), f"{demos[0]} on the built-in model", 4, 4)

    check_window(vitlens, scene, home, env)

    check_desktop(check, f"{share}/applications/{APP_ID}.desktop")
    check_metainfo(check, f"{share}/metainfo/{APP_ID}.metainfo.xml")
    check_icons(check, f"{share}/icons/hicolor")
    r = run(["man", "-w", "vitlens"], env=env)
    check(r.stdout.strip() == f"{share}/man/man1/vitlens.1.gz", f"man -w vitlens: "
          f"{r.stdout.strip()}")
    check_man(check, f"{share}/man/man1/vitlens.1.gz")
    # "Open with vitlens": desktop-file-utils' dpkg trigger ran update-desktop-database.
    cache = f"{share}/applications/mimeinfo.cache"
    if os.path.isfile(cache) and shutil.which("update-desktop-database"):
        with open(cache) as f:
            lines = [l for l in f if l.startswith("image/png=") or l.startswith("image/jpeg=")]
        check(len(lines) == 2 and all(f"{APP_ID}.desktop" in l for l in lines),
              "mimeinfo.cache offers vitlens for image/png and image/jpeg")


def check_export(r, out, what, n_layers, n_heads):
    """--export wrote the maps: every layer's and head's PNG and .npy, the rollout, the
    contact sheets, valid PNGs."""
    if not check(r.returncode == 0 and os.path.isdir(out), f"vitlens --export on {what}"
                 + (f"\n{r.stderr}" if r.returncode else "")):
        return
    names = set(os.listdir(out))
    want = {f"L{l:02d}_H{h:02d}.{ext}" for l in range(1, n_layers + 1)
            for h in range(1, n_heads + 1) for ext in ("png", "npy")}
    want |= {f"L{l:02d}_rollout.{ext}" for l in range(1, n_layers + 1) for ext in ("png", "npy")}
    want |= {"contact_sheet.png", "contact_sheet_rollout.png"}
    check(want <= names, f"  {len(names)} files, among them the {len(want)} maps and sheets"
          + (f"; missing {sorted(want - names)[:5]}" if want - names else ""))
    pngs = [n for n in names if n.endswith(".png")]
    bad = [n for n in pngs if open(os.path.join(out, n), "rb").read(8) != b"\x89PNG\r\n\x1a\n"]
    check(pngs and not bad, f"  {len(pngs)} PNGs, all valid" + (f"; not: {bad[:5]}" if bad else ""))


def check_window(vitlens, scene, home, env):
    """The window under Xvfb on a demo scene: "ready PATH" once its map is on screen, which
    needs the installed shaders (compiled) and a font."""
    if not shutil.which("xvfb-run"):
        print("skip  the window: no xvfb-run (Debian: xvfb)")
        return
    cmd = ["xvfb-run", "-a", "-s", "-screen 0 1280x1024x24", vitlens, scene]
    print("$ " + " ".join(cmd), flush=True)
    err_file = open(os.path.join(home, "..", "window.stderr"), "w+")
    p = subprocess.Popen(cmd, cwd=home, env=env, stdout=subprocess.PIPE, stderr=err_file,
                         text=True, start_new_session=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in p.stdout] + [lines.put(None)],
                     daemon=True).start()
    ready, deadline = None, time.time() + 120
    try:
        while ready is None and time.time() < deadline:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.time()))
            except queue.Empty:
                break
            if line is None:  # exited
                break
            if line.startswith("ready "):
                ready = line.strip()
    finally:
        os.killpg(p.pid, signal.SIGTERM)  # xvfb-run, its Xvfb and vitlens: this test's group
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        err_file.seek(0)
        err = err_file.read()
        err_file.close()
    check(ready == f"ready {scene}", f"the window: {ready} (installed shaders and font)"
          + ("" if ready else f"\n{err[-2000:]}"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--app", required=True, help="the build tree's vitlens, for reference")
    ap.add_argument("--shared", required=True, help="VITLENS_SHARED_DIR")
    ap.add_argument("--keep", action="store_true", help="keep the temporary build")
    a = ap.parse_args()
    a.source = os.path.abspath(a.source)

    if os.geteuid() != 0:
        print("skip: installs a system package, runs as root only (CI)")
        return 77
    for t in ("dpkg", "dpkg-deb", "dpkg-query", "dpkg-shlibdeps", "cpack"):
        if not shutil.which(t):
            print(f"skip: no {t} (Debian: dpkg, dpkg-dev, cmake)")
            return 77

    os.makedirs(os.path.dirname(LOCK), exist_ok=True)
    lock = open(LOCK, "w")
    fcntl.flock(lock, fcntl.LOCK_EX)  # another run of this test on the machine: wait

    if installed("vitlens") or pkg_status("vitlens").startswith("install ok"):
        if not os.path.exists(MARKER):
            print(f"FAIL  a vitlens package is installed ({pkg_status('vitlens')}) that this "
                  "test did not install: not touching it (dpkg -r vitlens, then run again)")
            return 1
        print("a crashed run of this test left its package: removing it")
        remove_package()
    if os.path.exists("/usr/bin/vitlens"):
        print("FAIL  /usr/bin/vitlens is there and belongs to no package (cmake --install "
              "--prefix /usr?): not overwriting it")
        return 1

    tmp = tempfile.mkdtemp(prefix="vitlens-pkg-")
    ours = False
    try:
        deb = build_package(a.source, tmp)
        if deb:
            check_deb(deb, a.source)
            with open(MARKER, "w") as f:
                f.write(deb + "\n")
            ours = True
            if install(deb):
                check_installed(a, tmp)
    finally:
        if ours:
            if pkg_status("vitlens") and "not-installed" not in pkg_status("vitlens"):
                r = remove_package()
                check(r.returncode == 0, "dpkg -r vitlens" +
                      (f"\n{r.stderr}" if r.returncode else ""))
            gone = [p for p in ("/usr/bin/vitlens", "/usr/share/vitlens",
                                f"/usr/share/applications/{APP_ID}.desktop",
                                "/usr/share/man/man1/vitlens.1.gz") if os.path.exists(p)]
            check(not gone and not installed("vitlens"), "vitlens is gone: no /usr/bin/vitlens, "
                  "no /usr/share/vitlens" + (f"; still there: {gone}" if gone else ""))
            if not gone and os.path.exists(MARKER):
                os.remove(MARKER)
        if a.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return check.done()


if __name__ == "__main__":
    sys.exit(main())
