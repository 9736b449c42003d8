#!/usr/bin/env python3
"""doc/accuracy.md's "Tuned with `ragtrain tune`" table from a bench/tune_accuracy.sh folder.

  bench/tune_table.py OUT [--tag tuned-DATE] [--sets a,b] [--line] [--shipped bench/results/cpu-2026-12-03]

Per set: the tune's wall time (OUT/SET.tune-seconds), the chosen recipe (OUT/SET/summary.json), the tuned recipe's
test accuracy in ragtrain and in PyTorch (OUT/accuracy.json, tag TAG; mean ± sd [min–max] over seeds), and the
shipped recipe's in ragtrain (SHIPPED/accuracy.json: inputs/SET.ini as shipped, its own random schedule: the
"ragtrain random" column of the table above it in doc/accuracy.md). "tuned ≥ shipped" holds when the tuned mean is at least the shipped mean less
the noise of the difference (two standard errors, at least one test sequence); "= PyTorch" is bench/accuracy.py's
agreement test. --line prints one line per set (tune_accuracy.sh's progress) instead of the table.
"""
import argparse
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import accuracy  # noqa: E402


def load(path, default):
    if not os.path.exists(path):
        return default
    with open(path) as f:
        return json.load(f)


def at_least(tuned, shipped, n_test):
    """True when mean(tuned) >= mean(shipped) within the noise of the difference (None without two of each)."""
    if len(tuned) < 2 or len(shipped) < 2:
        return None
    mt, st, _, _ = accuracy.stats(tuned)
    ms, ss, _, _ = accuracy.stats(shipped)
    noise = max(2 * math.sqrt(st * st / len(tuned) + ss * ss / len(shipped)), 1.0 / n_test + 1e-12)
    return mt >= ms - noise


def recipe_text(summary, scored):
    # The options the scored runs trained with (best.ini's, as tune_accuracy.sh passed them) where there are any:
    # summary.json before 48b5351 gave the ranked run's epochs, fewer than best.ini's where a budget cut the search.
    o = dict(scored[0]["overrides"]) if scored and scored[0].get("overrides") else \
        dict(summary.get("best", {}).get("options", {})) if summary else {}
    o.pop("seed", None)
    return ", ".join(f"{k} {v}" for k, v in o.items()) or "-"


def minutes(seconds):
    s = int(round(seconds))
    return f"{s // 60} min {s % 60} s" if s >= 60 else f"{s} s"


def rows_of(out, tag, shipped_runs, sets):
    tuned = [r for r in load(os.path.join(out, "accuracy.json"), {"runs": []})["runs"] if r.get("tag") == tag]
    yes = {True: "yes", False: "**no**", None: "-"}
    for folder, stem, _, _ in accuracy.DATASETS:
        if sets and folder not in sets:
            continue
        summary = load(os.path.join(out, folder, "summary.json"), None)
        mine = [r for r in tuned if r["set"] == folder]
        if summary is None and not mine:
            continue
        rt = [r["test_accuracy"] for r in mine if r["variant"].startswith("ragtrain")]
        pt = [r["test_accuracy"] for r in mine if r["variant"] == "torch"]
        sh = [r["test_accuracy"] for r in shipped_runs if r["set"] == folder and r["variant"] == "ragtrain-random"]
        n_test = (mine or [r for r in shipped_runs if r["set"] == folder] or [{"n_test": 1}])[0]["n_test"]
        secs_path = os.path.join(out, f"{folder}.tune-seconds")
        secs = float(open(secs_path).read()) if os.path.exists(secs_path) else None
        sel = summary.get("selection", "-") if summary else "-"
        rungs = "/".join(str(r["runs"]) for r in summary.get("rungs", [])) if summary else "-"
        yield {"stem": stem, "wall": minutes(secs) if secs is not None else "-",
               "recipe": recipe_text(summary, mine), "tuned": accuracy.fmt(rt),
               "torch": accuracy.fmt(pt), "shipped": accuracy.fmt(sh), "ge": yes[at_least(rt, sh, n_test)],
               "agree": yes[accuracy.agree(rt, pt, n_test)], "selection": sel, "rungs": rungs}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--tag", default="", help="accuracy.json's tag of the tuned runs (default: the only tuned-* one)")
    ap.add_argument("--sets", default="", help="folders under inputs/, comma-separated (default: all found)")
    ap.add_argument("--line", action="store_true", help="one line per set instead of the table")
    ap.add_argument("--shipped", default=os.path.join(ROOT, "bench/results/cpu-2026-12-03"))
    a = ap.parse_args()
    tag = a.tag
    if not tag:
        tags = sorted({r.get("tag", "") for r in load(os.path.join(a.out, "accuracy.json"), {"runs": []})["runs"]})
        tags = [t for t in tags if t.startswith("tuned-")]
        tag = tags[-1] if tags else ""
    shipped = [r for r in load(os.path.join(a.shipped, "accuracy.json"), {"runs": []})["runs"] if r.get("tag", "") == ""]
    rows = list(rows_of(a.out, tag, shipped, [s for s in a.sets.split(",") if s]))
    if a.line:
        for r in rows:
            print(f"{r['stem']}: tune {r['wall']} (rungs {r['rungs']}; {r['selection']}); tuned ragtrain {r['tuned']}; "
                  f"PyTorch {r['torch']}; shipped {r['shipped']}; tuned >= shipped: {r['ge']}; = PyTorch: {r['agree']}; "
                  f"recipe: {r['recipe']}", flush=True)
        return
    print("| data set | tune wall time | chosen recipe | tuned, ragtrain | tuned, PyTorch same options | "
          "shipped recipe, ragtrain | tuned ≥ shipped | ragtrain = PyTorch |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['stem']} | {r['wall']} | {r['recipe']} | {r['tuned']} | {r['torch']} | {r['shipped']} | "
              f"{r['ge']} | {r['agree']} |")


if __name__ == "__main__":
    main()
