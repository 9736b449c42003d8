#!/usr/bin/env python3
"""ragtrain -> PyTorch -> ragtrain, for every --normalize mode and every --pool (issue 37, item 2): a tiny model
trained by ragtrain (CPU, a few steps) on features far from standardised (offsets, scales, one constant feature, a
one-step sequence), turned into a state_dict by `tools/torch_interop.py import`, rebuilt by
RaggedLSTMClassifier.from_state_dict and applied to the RAW features of a test set, must give `ragtrain predict`'s
probabilities within 1e-5 (the ragged batch and the one-sequence path both). Then `export` of that state_dict,
with no option, must give back the checkpoint's pooling, options and normalisation, and `ragtrain predict` with it
the same probabilities. So that the comparison can tell a dropped normalisation, the same model without its
normalisation must predict differently (by more than 1e-3) where the mode is feature or series.

  tests/torch/test_interop.py --bin build/bin/ragtrain --out DIR

Prints one "[  PASSED  ]" / "[  FAILED  ]" line per check, then "N passed, N failed, 0 skipped"; exit 0 when all
pass. Needs numpy, h5py and torch (CPU).
"""
import argparse
import contextlib
import csv
import io
import os
import subprocess
import sys

import h5py
import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import torch_interop  # noqa: E402
from torch_model import RaggedLSTMClassifier  # noqa: E402

TOL = 1e-5
# (normalize, pool, more model options): each mode with each pooling; the other options spread over them so that
# their round trip is checked too (bidirectional `last` reads two ends of the sequence).
CASES = [
    ("none", "last", []), ("none", "mean", ["--bidirectional"]), ("none", "max", ["--layers", "2", "--dropout", "0.1"]),
    ("feature", "last", ["--bidirectional", "--layers", "2"]), ("feature", "mean", ["--head-dropout", "0.2"]),
    ("feature", "max", ["--bidirectional"]),
    ("series", "last", []), ("series", "mean", ["--layers", "2", "--bidirectional", "--dropout", "0.2"]),
    ("series", "max", ["--head-dropout", "0.1"]),
]


def run(cmd):
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}: {done.stdout[-2000:]}")


def raw_data(bin_, path, seed):
    """A `ragtrain gen` file whose features are moved far from mean 0 / std 1, feature 2 constant, whose first
    sequence has one step (series normalisation maps it to 0) and whose classes have names."""
    run([bin_, "gen", "--out", path, "--sequences", "30", "--features", "4", "--min-length", "2", "--max-length", "16",
         "--classes", "3", "--seed", str(seed), "--quiet"])
    with h5py.File(path, "r+") as f:
        x = f["features"][...]                                   # (total_timesteps, 4)
        x = x * np.array([30.0, 0.05, 1.0, 4.0], dtype=np.float32) + np.array([500.0, -2.0, 0.0, 40.0], np.float32)
        x[:, 2] = 7.25
        offsets = f["offsets"][...]
        keep = np.ones(len(x), dtype=bool)
        keep[offsets[0] + 1:offsets[1]] = False                  # sequence 0 keeps its first step only
        del f["features"], f["offsets"]
        f["features"] = x[keep].astype(np.float32)
        f["offsets"] = np.concatenate([[0], offsets[1:] - (offsets[1] - offsets[0] - 1)]).astype(np.int64)
        f.attrs["class_names"] = ["walk", "run", "sit"]
        del f["statistics"]   # gen's stored statistics describe the data before this edit (train would refuse them)
    with h5py.File(path, "r") as f:
        feats, offs = f["features"][...], f["offsets"][...]
    return [torch.from_numpy(feats[a:b]) for a, b in zip(offs[:-1], offs[1:])]


def probabilities(path):
    """(N, C) probabilities of a `ragtrain predict` CSV, from its p_ columns (whatever other columns it has)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    cols = [c for c in rows[0] if c.startswith("p_")]
    return np.array([[float(r[c]) for c in cols] for r in rows])


@torch.no_grad()
def torch_probabilities(model, seqs):
    """(N, C) softmax of the model on raw sequences: the ragged batch, and each sequence alone."""
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.int64)
    batch = torch.softmax(model(seqs, lengths), dim=1).numpy()
    alone = np.stack([torch.softmax(model.one(s), dim=0).numpy() for s in seqs])
    return batch, alone


def interop(*argv):
    """tools/torch_interop.py in this process (its output kept quiet); its exit code."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            torch_interop.main(list(argv))
        except SystemExit as e:
            return int(e.code or 0)
    return 0


def checkpoint_facts(path):
    """What ragtrain reads of a checkpoint beyond the weights: options and normalisation."""
    state, attrs = torch_interop.read_checkpoint(path)
    facts = {k: torch_interop._text(attrs.get(k)) for k in ("pool", "task", "normalization")}
    facts["class_names"] = [torch_interop._text(c) for c in attrs.get("class_names", [])]
    facts.update({k: float(attrs.get(k, 0.0)) for k in ("dropout", "head_dropout")})
    for k in ("mean", "std"):
        facts[k] = attrs[k].tobytes() if k in attrs else None
    return state, facts


def check_case(a, train, test, seqs, norm, pool, extra, results):
    name = f"--normalize {norm} --pool {pool}" + (" " + " ".join(extra) if extra else "")
    d = os.path.join(a.out, f"{norm}_{pool}")
    os.makedirs(d, exist_ok=True)
    run_dir, pt, back = os.path.join(d, "run"), os.path.join(d, "model.pt"), os.path.join(d, "back.h5")
    run([a.bin, "train", "--data", train, "--out", run_dir, "--hidden", "6", "--epochs", "2", "--batch-per-rank", "6",
         "--lr", "0.05", "--normalize", norm, "--pool", pool, "--seed", "3", "--quiet"] + extra)
    run([a.bin, "predict", "--checkpoint", run_dir, "--data", test, "--out", os.path.join(d, "pred.csv"), "--quiet"])
    ours = probabilities(os.path.join(d, "pred.csv"))

    rc = interop("import", run_dir, pt)
    model = RaggedLSTMClassifier.from_state_dict(torch.load(pt, map_location="cpu")).eval()
    batch, alone = torch_probabilities(model, seqs)
    worst = float(max(np.abs(batch - ours).max(), np.abs(alone - ours).max()))
    results.append((f"import, {name}: PyTorch on raw features == ragtrain predict (max |dp| {worst:.1e}, "
                    f"{len(seqs)} sequences)", rc == 0 and worst < TOL and model.norm.mode == norm
                    and model.pool == pool and model.class_names == ["walk", "run", "sit"]))
    if norm != "none":
        model.norm.mode = "none"
        without = torch_probabilities(model, seqs)[0]
        model.norm.mode = norm
        gap = float(np.abs(without - ours).max())
        results.append((f"{name}: the same model without its normalisation predicts otherwise (max |dp| {gap:.1e})",
                        gap > 1e-3))

    rc = interop("export", pt, back)
    run([a.bin, "predict", "--checkpoint", back, "--data", test, "--out", os.path.join(d, "back.csv"), "--quiet"])
    again = probabilities(os.path.join(d, "back.csv"))
    (s0, f0), (s1, f1) = checkpoint_facts(os.path.join(run_dir, "checkpoint.h5")), checkpoint_facts(back)
    same_weights = sorted(s0) == sorted(s1) and all(np.array_equal(s0[k], s1[k]) for k in s0)
    differ = [k for k in f0 if f0[k] != f1[k]]
    results.append((f"export, {name}: options, normalisation and weights back as they were"
                    + (f" (differ: {', '.join(differ)})" if differ else "") + ", ragtrain predict the same",
                    rc == 0 and same_weights and not differ and np.array_equal(again, ours)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build/bin/ragtrain")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(1)
    train, test = os.path.join(a.out, "train.h5"), os.path.join(a.out, "test.h5")
    raw_data(a.bin, train, 1)
    seqs = raw_data(a.bin, test, 2)
    results = []
    for norm, pool, extra in CASES:
        try:
            check_case(a, train, test, seqs, norm, pool, extra, results)
        except Exception as e:   # one case's failure is reported, the others still run
            results.append((f"--normalize {norm} --pool {pool}: {type(e).__name__}: {e}", False))
    for text, ok in results:
        print(f"[  {'PASSED' if ok else 'FAILED'}  ] interop round trip: {text}")
    passed = sum(ok for _, ok in results)
    print(f"{passed} passed, {len(results) - passed} failed, 0 skipped")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
