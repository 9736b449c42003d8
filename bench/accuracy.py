#!/usr/bin/env python3
"""Accuracy table on real data: ragtrain (CPU backend, both schedules) and the same model in PyTorch
(tools/torch_model.py) trained with the same recipe, for several seeds, on the data sets embedded in inputs/.

  bench/accuracy.py [--sets plaid,japanese-vowels] [--seeds 1,2,3] [--np 2] [--variants ...] [--set key=value]
                    [--tag NAME] [--out DIR] [--table-only]

For every data set: `ragtrain convert` its _TRAIN.ts / _TEST.ts to format v1 (once, under WORK/data/), then for
every seed and variant trains on the training split and evaluates the final model (no model selection) on the
test split:
  ragtrain-balanced / ragtrain-random  mpirun -np NP ragtrain train --config RECIPE (schedule set to each), then
                                       ragtrain eval on the run's checkpoint.h5
  torch                                tools/torch_model.py with the same options and global batch (NP x
                                       batch-per-rank), a fresh random permutation per epoch
--set key=value overrides a recipe option for every run (both programs), and --tag names such a sweep.
Every finished run is appended to OUT/accuracy.json at once (an interrupted table keeps what it ran; a rerun skips
the runs already there); the table is printed at the end (or alone with --table-only).
Needs numpy, h5py and torch (CPU) on /usr/bin/python3, and a built build/bin/ragtrain.
"""
import argparse
import concurrent.futures
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import torch_model  # noqa: E402

# name, folder under inputs/, file stem, best published test accuracy we can cite, its source.
UCR_2018 = ("1-NN DTW, learned window; UCR archive 2018 DataSummary.csv (Dau et al., \"The UCR Time Series "
            "Archive\", IEEE/CAA J. Autom. Sinica 6(6), 2019)")
DATASETS = [
    ("japanese-vowels", "JapaneseVowels", 0.949,
     "1-NN DTW_D; UEA archive paper (Bagnall et al. 2018, arXiv:1811.00075)"),
    ("pickup-gesture-wiimote-z", "PickupGestureWiimoteZ", 1 - 0.34, UCR_2018),
    ("shake-gesture-wiimote-z", "ShakeGestureWiimoteZ", 1 - 0.16, UCR_2018),
    ("gesture-pebble-z1", "GesturePebbleZ1", 1 - 0.1744, UCR_2018),
    ("gesture-midair-d1", "GestureMidAirD1", 1 - 0.3615, UCR_2018),
    ("all-gesture-wiimote-x", "AllGestureWiimoteX", 1 - 0.2829, UCR_2018),
    ("plaid", "PLAID", 1 - 0.1657, UCR_2018),
]
VARIANTS = ("ragtrain-balanced", "ragtrain-random", "torch", "torch-columns")


def sh(cmd, log):
    log.write("+ " + " ".join(cmd) + "\n")
    log.flush()
    r = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise SystemExit(f"failed (exit {r.returncode}): {' '.join(cmd)}; see {log.name}")


def convert(bin_path, folder, stem, work, log):
    """format v1 files of the set's train and test split (converted once)."""
    os.makedirs(work, exist_ok=True)
    out = {}
    for split in ("TRAIN", "TEST"):
        src = os.path.join(ROOT, "inputs", folder, f"{stem}_{split}.ts")
        dst = os.path.join(work, f"{split.lower()}.h5")
        if not os.path.exists(dst) or os.path.getmtime(dst) < os.path.getmtime(src):
            sh([bin_path, "convert", src, dst, "--quiet"], log)
        out[split.lower()] = dst
    return out


def write_recipe(recipe_path, overrides, path):
    """The recipe with `overrides` replacing (or adding) keys: the exact configuration a run used."""
    lines, seen = [], set()
    with open(recipe_path, encoding="utf-8") as f:
        for line in f:
            key = line.split("=", 1)[0].strip() if "=" in line and not line.lstrip().startswith("#") else None
            if key in overrides:
                line = f"{key} = {overrides[key]}\n"
                seen.add(key)
            lines.append(line)
    lines += [f"{k} = {v}\n" for k, v in overrides.items() if k not in seen]
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            if f.read() == "".join(lines):
                return   # unchanged: keep its time, which tells a finished run's results from stale ones
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)


def run_ragtrain(a, files, recipe, run_dir, log):
    ranks = 1 if a.device == "cuda" else a.np
    cmd = ["mpirun", "--oversubscribe", "-np", str(ranks), a.bin] if ranks > 1 else [a.bin]
    # No --val: the test split is looked at once, by the final model, never to choose one.
    sh(cmd + ["train", "--config", recipe, "--data", files["train"], "--out", run_dir, "--quiet"], log)
    sh([a.bin, "eval", "--checkpoint", os.path.join(run_dir, "checkpoint.h5"), "--data", files["test"],
        "--out", os.path.join(run_dir, "eval.json"), "--quiet"], log)


def load_results(path):
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {"runs": []}


def save_results(path, results):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(results, f, indent=1)
    os.replace(tmp, path)


def stats(values):
    m = statistics.mean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return m, sd, min(values), max(values)


def agree(a, b, n_test):
    """(PyTorch is compared with ragtrain's random schedule: tools/torch_model.py deals its batches the same way.)
    Means agree when they differ by no more than twice the standard error of the difference, or by no more
    than one test example (accuracies are multiples of 1/n_test)."""
    if len(a) < 2 or len(b) < 2:
        return None
    ma, sa, _, _ = stats(a)
    mb, sb, _, _ = stats(b)
    se = math.sqrt(sa * sa / len(a) + sb * sb / len(b))
    return abs(ma - mb) <= max(2 * se, 1.0 / n_test + 1e-12)


def fmt(values):
    if not values:
        return "-"
    m, sd, lo, hi = stats(values)
    return f"{m:.3f} ± {sd:.3f} [{lo:.3f}–{hi:.3f}] n={len(values)}"


def table(results, tag):
    rows = [r for r in results["runs"] if r.get("tag", "") == tag]
    out = [f"# accuracy on the test split, final model, mean ± sd [min–max] over seeds (tag '{tag or 'recipe'}')",
           "| data set | ragtrain recipe | ragtrain random | PyTorch same options | ragtrain random = PyTorch | "
           "ragtrain balanced | balanced = random | best published |",
           "|---|---|---|---|---|---|---|---|"]
    for folder, stem, pub, ref in DATASETS:
        mine = [r for r in rows if r["set"] == folder]
        if not mine:
            continue
        acc = {v: [r["test_accuracy"] for r in mine if r["variant"] == v] for v in VARIANTS}
        n_test = mine[0]["n_test"]
        yes = {True: "yes", False: "**no**", None: "-"}
        out.append(f"| {stem} | inputs/{folder}.ini | {fmt(acc['ragtrain-random'])} | {fmt(acc['torch'])} | "
                   f"{yes[agree(acc['ragtrain-random'], acc['torch'], n_test)]} | "
                   f"{fmt(acc['ragtrain-balanced'])} | "
                   f"{yes[agree(acc['ragtrain-balanced'], acc['ragtrain-random'], n_test)]} | "
                   f"{pub:.3f} ({ref.split(';')[0]}) |")
    return "\n".join(out)


def sweep_table(results):
    """One row per tag: every set's mean test accuracy over the ragtrain runs of that tag (both schedules and all
    seeds pooled), and the median over the sets the tag covers: the evidence for choosing defaults."""
    tags = sorted({r.get("tag", "") for r in results["runs"]})
    sets = [d[0] for d in DATASETS if any(r["set"] == d[0] for r in results["runs"])]
    out = ["| tag | overrides | " + " | ".join(sets) + " | median |", "|---" * (len(sets) + 3) + "|"]
    for tag in tags:
        rows = [r for r in results["runs"] if r.get("tag", "") == tag and r["variant"].startswith("ragtrain")]
        if not rows:
            continue
        cells, means = [], []
        for folder in sets:
            acc = [r["test_accuracy"] for r in rows if r["set"] == folder]
            if acc:
                means.append(statistics.mean(acc))
                cells.append(f"{means[-1]:.3f} (n={len(acc)})")
            else:
                cells.append("-")
        base = rows[0].get("base", "recipe")   # "defaults": --no-recipe, what a user who changes nothing gets
        ov = " ".join([base] + [f"{k}={v}" for k, v in rows[0]["overrides"].items()])
        out.append(f"| {tag or 'recipe'} | {ov} | " + " | ".join(cells) + f" | {statistics.median(means):.3f} |")
    return "\n".join(out)


def n_sequences(path):
    import h5py
    with h5py.File(path, "r") as f:
        return int(f["offsets"].shape[0] - 1)


def plan_runs(a, overrides, results):
    """(folder, variant, seed, run_dir, recipe path, files, n_test) of every run not yet in the results."""
    known = {d[0]: d for d in DATASETS}
    todo = []
    for folder in a.sets.split(","):
        _, stem, _, _ = known[folder]
        files = convert(a.bin, folder, stem, os.path.join(a.work, "data", folder), a.log)
        n_test = n_sequences(files["test"])
        # --no-recipe: what a user who changes nothing gets (ragtrain's defaults, then only the --set options).
        base_recipe = os.devnull if a.no_recipe else os.path.join(ROOT, "inputs", f"{folder}.ini")
        for seed in [int(s) for s in a.seeds.split(",")]:
            for variant in a.variants.split(","):
                key = (folder, variant, seed, a.tag)
                if any((r["set"], r["variant"], r["seed"], r.get("tag", "")) == key for r in results["runs"]):
                    continue
                run_dir = os.path.join(a.work, "runs", a.tag or "recipe", folder, f"{variant}-seed{seed}")
                os.makedirs(run_dir, exist_ok=True)
                ov = dict(overrides, seed=str(seed))
                if variant.startswith("ragtrain-"):
                    ov["schedule"] = variant.split("-", 1)[1]
                    if a.device == "cuda":
                        # One GPU rank with NP x batch-per-rank sequences: the schedule's global batches depend on
                        # the global batch only, not on how it splits over ranks, so the run trains as NP ranks would.
                        base = torch_model.read_recipe(base_recipe) if not a.no_recipe else {}
                        k = int(overrides.get("batch-per-rank", base.get("batch-per-rank", 1)))
                        ov["batch-per-rank"] = str(k * a.np)
                        ov["device"] = "cuda"
                recipe = os.path.join(run_dir, "recipe.ini")
                write_recipe(base_recipe, ov, recipe)
                todo.append((folder, variant, seed, run_dir, recipe, files, n_test, base_recipe))
    return todo


def run_one(a, job):
    folder, variant, seed, run_dir, recipe, files, n_test, base_recipe = job
    t0 = time.time()
    out = os.path.join(run_dir, "torch.json" if variant.startswith("torch") else "eval.json")
    if os.path.exists(out) and os.path.getmtime(out) > os.path.getmtime(recipe):
        # A run that finished after its runner was stopped: take its result instead of training again.
        return finished_row(a, job, read_finished(run_dir, variant), None)
    with open(os.path.join(run_dir, "run.log"), "w") as log:
        if variant.startswith("torch"):
            env = dict(os.environ)
            if a.blas_dir:   # an optimised libblas.so.3 for torch and numpy (the generic one is ~20x slower)
                env["LD_LIBRARY_PATH"] = a.blas_dir + ":" + env.get("LD_LIBRARY_PATH", "")
            cmd = [sys.executable, os.path.join(ROOT, "tools", "torch_model.py"), "--train", files["train"],
                   "--test", files["test"], "--config", recipe, "--ranks", str(a.np), "--threads", str(a.threads),
                   "--out", out, "--deal", "columns" if variant == "torch-columns" else "shuffle",
                   "--device", a.device]
            log.write("+ " + " ".join(cmd) + "\n")
            log.flush()
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
            if rc != 0:
                raise SystemExit(f"failed (exit {rc}): {' '.join(cmd)}; see {log.name}")
            r = read_finished(run_dir, variant)
        else:
            run_ragtrain(a, files, recipe, run_dir, log)
            r = read_finished(run_dir, variant)
    return finished_row(a, job, r, time.time() - t0)


def read_finished(run_dir, variant):
    """The result files a finished run left: torch.json, or ragtrain's eval.json and summary.json."""
    if variant.startswith("torch"):
        with open(os.path.join(run_dir, "torch.json")) as f:
            r = json.load(f)
        r.pop("options", None)
        return r
    with open(os.path.join(run_dir, "eval.json")) as f:
        e = json.load(f)
    with open(os.path.join(run_dir, "summary.json")) as f:
        s = json.load(f)
    return {"test_accuracy": e["accuracy"], "test_loss": e["loss"], "train_seconds": s["wall_seconds"],
            "steps": s["steps"]}


def finished_row(a, job, r, wall_seconds):
    folder, variant, seed, run_dir, recipe, files, n_test, base_recipe = job
    opt = torch_model.resolve_options(torch_model.read_recipe(recipe), {})
    return {"set": folder, "variant": variant, "seed": seed, "tag": a.tag, "overrides": a.overrides,
            "base": "defaults" if a.no_recipe else "recipe", "device": a.device,
            "options": opt, "np": a.np, "n_test": n_test, "wall_seconds": wall_seconds,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), **r}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default=",".join(d[0] for d in DATASETS), help="folders under inputs/, comma-separated")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--np", type=int, default=2, help="ragtrain ranks (the PyTorch batch follows: np x batch-per-rank)")
    ap.add_argument("--variants", default="ragtrain-balanced,ragtrain-random,torch",
                    help="of " + ", ".join(VARIANTS) + " (torch-columns: PyTorch dealing batches as ragtrain's "
                         "random schedule does)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a recipe option")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="cuda: ragtrain on one GPU rank with NP x batch-per-rank (the same global batches), PyTorch "
                         "on the GPU; for sets too long for a CPU")
    ap.add_argument("--no-recipe", action="store_true",
                    help="start from ragtrain's defaults instead of inputs/<set>.ini (with --tag; for choosing defaults)")
    ap.add_argument("--tag", default="", help="name of this sweep in accuracy.json (default: the recipes as shipped)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/bin/ragtrain"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/cpu-2026-12-03"),
                    help="accuracy.json and accuracy.log (default: the curated record the table of doc/accuracy.md is read from)")
    ap.add_argument("--work", default=os.path.join(ROOT, "runs/accuracy"),
                    help="converted files and run folders (git-ignored)")
    ap.add_argument("--jobs", type=int, default=1, help="runs at the same time")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads per run")
    ap.add_argument("--blas-dir", default="", help="folder with an optimised libblas.so.3 for the PyTorch runs")
    ap.add_argument("--table-only", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    res_path = os.path.join(a.out, "accuracy.json")
    results = load_results(res_path)
    if a.table_only:
        print(table(results, a.tag))
        print()
        print(sweep_table(results))
        return
    a.overrides = dict(kv.split("=", 1) for kv in a.set)
    results.setdefault("machine", {"host": platform.node(), "cpus": os.cpu_count(), "python": sys.version.split()[0],
                                   "torch": torch_model.torch.__version__})
    os.makedirs(a.work, exist_ok=True)
    a.log = open(os.path.join(a.work, "convert.log"), "a")
    # The PyTorch runs take longest (per-timestep overhead on the CPU): start them first.
    todo = sorted(plan_runs(a, a.overrides, results), key=lambda job: not job[1].startswith("torch"))
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        futures = {pool.submit(run_one, a, job): job for job in todo}
        for fut in concurrent.futures.as_completed(futures):
            row = fut.result()
            results["runs"].append(row)
            save_results(res_path, results)
            print(f"{row['set']:26s} {row['variant']:18s} seed {row['seed']}: test accuracy "
                  f"{row['test_accuracy']:.4f}" + (f" ({row['wall_seconds']:.0f} s)" if row["wall_seconds"] else " (finished earlier)"),
                  flush=True)
    print(table(results, a.tag))


if __name__ == "__main__":
    main()
