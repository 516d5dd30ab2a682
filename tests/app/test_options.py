#!/usr/bin/env python3
"""vitlens' command line against its options' table (app/config/opttable.c, as
`vitlens --list-options` prints it), with no model and no window:

  modes      every option given in each mode of a run (the window, --top, --export, --eval,
             --eval-merge, --lesson-export) is refused in the modes its row does not go with
             (exit 2, the message naming it, before the model is read) and accepted in those
             it goes with (the run goes on to the model, which does not exist: exit 1)
  the rules  an unknown option refused by name, as the last argument too; an option without
             its value; "--" ending the options; -h and --version; the options that were
             ignored where they do nothing and are refused now (--eval-steps without --eval,
             --pos-seed with --eval-merge, an intervention with --lesson-export before the
             model loads)

The control: a row's modes swapped for the others must fail both halves of the modes check.

Usage: test_options.py --app build/vitlens --image assets/default/demo/X.png --work DIR
"""
import argparse
import os
import shutil
import subprocess
import sys

failures = []
NO_MODEL = "/no/such/model.safetensors"
# a value each argument name accepts (a new argument name needs its own here)
SAMPLE = {"PATH|NAME": NO_MODEL, "FILE": "/no/such/file", "DIR": None, "N": "3", "K": "1",
          "S|HxW": "224", "A": "0.5", "R": "0.5", "NAME": "viridis", "ID|NAME": "1",
          "NAMES": "cat, dog", "T": "a photo of a {}.", "PHRASE": "a cat", "PATH": "/no/such",
          "L:H[,L:H...]": "1:1", "R,C[;R,C...]": "1,1", "MODE": "shuffle", "L:TAU": "1:2",
          "L": "1", "H": "1", "ROW,COL": "1,1", "K/N": "1/2", "A,B": "0,1", "IMAGE2": "/no/such.png",
          "MODEL2": "/no/such/model2.safetensors", "F": "2.5", "DEVICE": "/dev/no-such-video"}
MODE_OPTIONS = {"--top", "--export", "--eval", "--eval-merge", "--lesson-export", "--agreement"}


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


class Cli:
    def __init__(self, app, image, work):
        self.app, self.image, self.work = app, image, work
        # no remembered settings, no display: nothing of the user's changes a run
        self.env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(work, "config"),
                        XDG_DATA_HOME=os.path.join(work, "data"))
        for k in ("DISPLAY", "WAYLAND_DISPLAY", "VITLENS_MODELS_DIR", "VITLENS_ATT"):
            self.env.pop(k, None)

    def run(self, *args):
        return subprocess.run([self.app, *args], capture_output=True, text=True, env=self.env,
                              timeout=60)

    def mode_args(self, mode):
        out = os.path.join(self.work, "out")
        return {"window": [self.image], "top": ["--top", "1", self.image],
                "export": ["--export", out, self.image], "eval": ["--eval", self.image],
                "eval-merge": ["--eval-merge", self.work],
                "lesson-export": ["--lesson-export", out, self.image],
                "agreement": ["--agreement", self.image]}[mode]


def rows(cli):
    r = cli.run("--list-options")
    check(r.returncode == 0, f"--list-options exits 0 (got {r.returncode})")
    return [dict(zip(("name", "alias", "arg", "group", "modes"), line.split("\t")))
            for line in r.stdout.splitlines()]


def modes_check(cli, table):
    """(refused wrongly or not refused, accepted wrongly or not accepted): the failures of
    each half, as strings."""
    all_modes = ["window", "top", "export", "eval", "eval-merge", "lesson-export", "agreement"]
    not_refused, not_accepted = [], []
    for row in table:
        if row["group"] == "info" or row["name"] in MODE_OPTIONS:
            continue  # --help, --, ...; a mode's own option: one mode at a time
        if row["arg"] != "-" and row["arg"] not in SAMPLE:
            not_accepted.append(f"{row['name']}: no sample value for {row['arg']} in the test")
            continue
        value = SAMPLE.get(row["arg"]) or os.path.join(cli.work, "dir")
        opt = [row["name"]] + ([value] if row["arg"] != "-" else [])
        goes = set(all_modes) if row["modes"] == "any" else set(row["modes"].split(","))
        for mode in all_modes:
            model = [] if row["name"] == "--model" else ["--model", NO_MODEL]
            args = cli.mode_args(mode)
            if row["name"] == "--camera" and mode in goes:  # the camera instead of an IMAGE
                args = [x for x in args if x != cli.image]
            r = cli.run(*model, *opt, *args)
            refused = r.returncode == 2 and f"{row['name']} goes with" in r.stderr
            if mode not in goes and not refused:
                not_refused.append(f"{' '.join(opt)} in {mode}: exit {r.returncode} "
                                   f"{r.stderr.strip()[:100]!r}")
            if mode in goes and (r.returncode != 1 or "goes with" in r.stderr):
                not_accepted.append(f"{' '.join(opt)} in {mode}: exit {r.returncode} "
                                    f"{r.stderr.strip()[:100]!r}")
    return not_refused, not_accepted


def rules(cli):
    img = cli.image
    for args, rc, want, what in (
            (["--model", NO_MODEL, "--top", "1", img, "--no-such-option"], 2,
             "unknown option --no-such-option ", "an unknown option, last"),
            (["--no-such-option", "3", "--top", "1", img], 2, "unknown option --no-such-option ",
             "an unknown option with a value after it"),
            (["-x", img], 2, "unknown option -x ", "an unknown short option"),
            (["--model", NO_MODEL, img, "--top"], 2, "--top needs a value", "a missing value"),
            (["--eval-steps", "5", img], 2, "--eval-steps goes with --eval",
             "--eval-steps without --eval (it was ignored)"),
            (["--eval-merge", "--pos-seed", "3", cli.work], 2, "--pos-seed goes with",
             "--pos-seed with --eval-merge (it was ignored)"),
            (["--model", NO_MODEL, "--ablate", "1:1", "--lesson-export", cli.work, img], 2,
             "--ablate goes with", "an intervention with --lesson-export: before the model"),
            (["--model", NO_MODEL, "--top", "1", "--", "-x.png"], 1, NO_MODEL,
             "after --, -x.png is an IMAGE"),
            (["-h"], 0, "usage: vitlens", "-h prints the usage"),
            (["--version"], 0, "vitlens ", "--version")):
        r = cli.run(*args)
        out = r.stdout if rc == 0 else r.stderr
        check(r.returncode == rc and want in out,
              f"{what}: {' '.join(args)}: exit {r.returncode} ({rc}), {out.strip()[:90]!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    cli = Cli(a.app, a.image, a.work)
    table = rows(cli)
    check(len(table) >= 30, f"--list-options lists {len(table)} options")

    # the control: --layer (lesson-export only) said to go with every other mode instead
    swapped = [dict(r, modes="window,top,export,eval,eval-merge") for r in table
               if r["name"] == "--layer"]
    bad = modes_check(cli, swapped)
    check(len(swapped) == 1 and bad[0] and bad[1],
          "the control (--layer's modes swapped for the others) fails both halves")

    not_refused, not_accepted = modes_check(cli, table)
    check(not not_refused, "every option is refused, by name, in the modes it does not go with"
          + (f"; not: {not_refused}" if not_refused else ""))
    check(not not_accepted, "every option is accepted in the modes it goes with"
          + (f"; not: {not_accepted}" if not_accepted else ""))
    rules(cli)
    shutil.rmtree(a.work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
