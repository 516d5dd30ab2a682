#!/usr/bin/python3
"""The compare view's resident memory (issue 36: two ViT-B models in <= 1.1 GB): the window
opens MODEL on PHOTO with --compare MODEL2, waits for both panes' maps (the trace's "compare
maps"), then for both panes' Chefer et al. maps (key 1: each pane's backward pass, its
buffers kept), and prints /proc's VmRSS, VmHWM (peak), RssAnon and RssFile (the weights are
mmapped: file pages shared with the page cache) after each. "-" as MODEL2: the single view.

  xvfb-run -a -s "-screen 0 1280x1024x24" /usr/bin/python3 bench/compare_memory.py \\
      build/vitlens MODEL.safetensors MODEL2.safetensors PHOTO

Random ViT-B/16 weights: bench/make_weights.py DIR vit_base_patch16_224 (copy the file for a
second model: two files are mapped twice).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "gui"))
from test_gui import App  # noqa: E402


class Seen(App):
    """The app, every trace line kept."""

    def __init__(self, *a, **k):
        self.seen = []
        super().__init__(*a, **k)

    def take(self, line):
        self.seen.append(line)
        return super().take(line)


def memory(pid):
    d = dict(ln.split(":", 1) for ln in open(f"/proc/{pid}/status"))
    return " ".join(f"{k}={d[k].strip().replace(' ', '')}"
                    for k in ("VmRSS", "VmHWM", "RssAnon", "RssFile"))


def main():
    app_bin, model, model2, photo = sys.argv[1:5]
    compare = model2 != "-"
    argv = [app_bin, "--model", model] + (["--compare", model2] if compare else []) + [photo]
    app = Seen(argv, dict(os.environ, VITLENS_TRACE="1"))
    try:
        app.start(photo)
        if compare and not any(s.startswith("compare maps") for s in app.seen):
            app.wait_line(lambda s: s.startswith("compare maps"), "both panes", timeout=900)
        print(f"{'compare' if compare else 'single'}, opened: {memory(app.proc.pid)}", flush=True)
        app.key("1")
        if compare:
            app.wait_line(lambda s: s.startswith("compare maps") and s.count("kind:chefer") == 2
                          and "map:00000000" not in s, "both panes' Chefer et al.", timeout=900)
        else:
            app.wait_line(lambda s: s.startswith("maps by=") and "kind=chefer" in s,
                          "Chefer et al.", timeout=900)
        print(f"{'compare' if compare else 'single'}, class-specific maps: "
              f"{memory(app.proc.pid)}", flush=True)
    finally:
        app.proc.kill()
        app.proc.wait()


if __name__ == "__main__":
    main()
