"""What the install tests share: the file list `cmake --install` must produce, and the
checks of the desktop integration files (the .desktop file, AppStream metainfo, the man
page, the icons) wherever they are installed. Standard library only."""
import os
import re
import shutil
import struct
import subprocess

APP_ID = "io.github.vitlens.vitlens"
MIME_TYPES = {"image/jpeg", "image/png", "image/webp", "image/tiff", "image/heif", "image/avif",
              "image/bmp", "image/gif", "image/x-portable-anymap"}
ICON_PX = (48, 128, 256)


class Checks:
    def __init__(self):
        self.failures = []

    def __call__(self, ok, what):
        print(("ok    " if ok else "FAIL  ") + what, flush=True)
        if not ok:
            self.failures.append(what)
        return ok

    def done(self):
        if self.failures:
            print(f"{len(self.failures)} check(s) failed")
            return 1
        print("all checks passed")
        return 0


def expected_files(source):
    """Paths relative to the install prefix that `cmake --install` must write, and only
    them: the app, its shaders, built-in model and layouts, CLIP's ImageNet lists, the
    desktop integration."""
    files = {"bin/vitlens", f"share/applications/{APP_ID}.desktop",
             f"share/metainfo/{APP_ID}.metainfo.xml",
             f"share/icons/hicolor/scalable/apps/{APP_ID}.svg",
             "share/man/man1/vitlens.1.gz"}
    files |= {f"share/icons/hicolor/{px}x{px}/apps/{APP_ID}.png" for px in ICON_PX}
    files |= {f"share/vitlens/shaders/{f}" for f in os.listdir(os.path.join(source, "shaders"))
              if f.endswith(".glsl")}
    files |= {f"share/vitlens/assets/default/{f}"
              for f in ("model.safetensors", "config.json", "README.md", "lesson.txt")}
    files |= {f"share/vitlens/assets/default/demo/{f}"
              for f in os.listdir(os.path.join(source, "assets/default/demo"))}
    files |= {f"share/vitlens/layouts/{f}"
              for f in os.listdir(os.path.join(source, "assets/layouts")) if f.endswith(".json")}
    files |= {f"share/vitlens/assets/clip/{f}"  # CLIP's ImageNet names and templates
              for f in os.listdir(os.path.join(source, "assets/clip"))}
    return files


def list_tree(root):
    out = set()
    for d, _, names in os.walk(root):
        out |= {os.path.relpath(os.path.join(d, n), root) for n in names}
    return out


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


def tool(check, name, package):
    path = shutil.which(name)
    check(path is not None, f"{name} is installed (Debian: {package}; scripts/install-deps.sh)")
    return path


def check_desktop(check, path):
    """desktop-file-validate: no error or warning (hints are advice); Exec takes files,
    the image MIME types are declared, the icon is the app id."""
    if tool(check, "desktop-file-validate", "desktop-file-utils"):
        r = subprocess.run(["desktop-file-validate", path], capture_output=True, text=True)
        bad = [l for l in (r.stdout + r.stderr).splitlines() if ": hint:" not in l and l.strip()]
        check(r.returncode == 0 and not bad, f"desktop-file-validate {os.path.basename(path)}"
              + ("".join("\n      " + l for l in bad)))
    with open(path) as f:
        entry = dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l)
    check(entry.get("Exec") == "vitlens %F", f"Exec=vitlens %F (got {entry.get('Exec')})")
    mimes = set(filter(None, entry.get("MimeType", "").split(";")))
    check(MIME_TYPES <= mimes, "MimeType lists the image types vitlens opens"
          + (f"; missing {sorted(MIME_TYPES - mimes)}" if MIME_TYPES - mimes else ""))
    cats = set(filter(None, entry.get("Categories", "").split(";")))
    check({"Education", "Science", "Graphics"} <= cats, f"Categories: {sorted(cats)}")
    check(entry.get("Icon") == APP_ID, f"Icon={APP_ID}")


def check_metainfo(check, path):
    if tool(check, "appstreamcli", "appstream"):
        r = subprocess.run(["appstreamcli", "validate", "--no-net", path], capture_output=True,
                           text=True)
        check(r.returncode == 0, f"appstreamcli validate --no-net {os.path.basename(path)}"
              + (f"\n{r.stdout}{r.stderr}" if r.returncode else ""))
    with open(path) as f:
        text = f.read()
    check(f"<id>{APP_ID}</id>" in text, f"metainfo id {APP_ID}")
    check(f'<launchable type="desktop-id">{APP_ID}.desktop</launchable>' in text,
          "metainfo launches the desktop file")


def check_man(check, path):
    """man --warnings on the page (gzipped as installed): no warnings, renders."""
    if tool(check, "man", "man-db"):
        r = subprocess.run(["man", "--warnings", "-l", path], capture_output=True, text=True,
                           env=dict(os.environ, MANWIDTH="80"))
        check(r.returncode == 0 and not r.stderr.strip() and "--export" in
              re.sub("[\u2010\u2212]", "-", r.stdout),
              f"man --warnings -l {path}: renders, no warnings" +
              (f"\n{r.stderr}" if r.stderr.strip() else ""))


def check_icons(check, icons_dir):
    """hicolor/NxN/apps/APP_ID.png is N x N px; the scalable SVG is there."""
    for px in ICON_PX:
        p = os.path.join(icons_dir, f"{px}x{px}/apps/{APP_ID}.png")
        check(png_size(p) == (px, px), f"icon {px}x{px}: a {px} x {px} PNG")
    check(os.path.isfile(os.path.join(icons_dir, f"scalable/apps/{APP_ID}.svg")),
          "icon: scalable SVG")


def parse_top(text):
    """--top's lines, RANK PROB CLASS_ID LABEL, as (rank, prob, class_id, label)."""
    rows = []
    for line in text.splitlines():
        m = re.fullmatch(r"(\d+) (\d\.\d+) (\d+)(?: (.*))?", line)
        if m:
            rows.append((int(m[1]), float(m[2]), int(m[3]), m[4] or ""))
    return rows


def same_top(a, b, tol=2e-3):
    """Two --top outputs agree: the same classes in the same order, probabilities within
    tol (the package is a Release build, -O3; the test's build may be another type)."""
    return len(a) == len(b) and all(x[0] == y[0] and x[2] == y[2] and x[3] == y[3] and
                                    abs(x[1] - y[1]) <= tol for x, y in zip(a, b))
