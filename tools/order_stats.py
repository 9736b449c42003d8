#!/usr/bin/env python3
"""Statistics of the order a run trained in (train --write-order), from order.csv and the training file.

    tools/order_stats.py RUN/order.csv TRAIN.h5 --ranks P --batch-per-rank K

Prints, per run: steps, the batch repeat fraction (the share of epoch e's global batches of >= 2 sequences that
were, as sets, also a global batch of epoch e-1; mean over e >= 2), the share of steps whose sequences all have
one class (steps of >= 2 sequences; classification files), the mean length imbalance (1 - mean/max of the
per-rank timesteps) and the padding of the K sequences of a rank (padded to the rank's longest). The same
definitions as `ragtrain simulate` and metrics.jsonl, computed independently from what the run wrote.
"""
import argparse
import collections
import csv
import json

import h5py
import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("order")
    ap.add_argument("data")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--batch-per-rank", type=int, required=True)
    a = ap.parse_args()
    with h5py.File(a.data, "r") as f:
        offsets = f["offsets"][:]
        labels = f["labels"][:] if f["labels"].ndim == 1 and f["labels"].dtype.kind == "i" else None
    lengths = np.diff(offsets)
    steps = collections.defaultdict(dict)   # (epoch, step) -> {slot: sequence}
    with open(a.order) as fh:
        for row in csv.DictReader(fh):
            steps[(int(row["epoch"]), int(row["step"]))][int(row["slot"])] = int(row["sequence"])
    P, K = a.ranks, a.batch_per_rank
    batches = collections.defaultdict(list)
    imbalance, single, multi, pad_num, pad_den = [], 0, 0, 0, 0
    for (epoch, _), slots in sorted(steps.items()):
        seqs = sorted(slots.values())
        if len(seqs) >= 2:
            batches[epoch].append(frozenset(seqs))
            multi += 1
            if labels is not None and len(set(labels[seqs].tolist())) == 1:
                single += 1
        work = np.zeros(P)
        for r in range(P):
            mine = [lengths[slots[j]] for j in range(r * K, r * K + K) if j in slots]
            if mine:
                work[r] = sum(mine)
                pad_num += len(mine) * max(mine) - sum(mine)
                pad_den += len(mine) * max(mine)
        imbalance.append(1 - work.mean() / work.max())
    repeats = [sum(b in set(batches[e - 1]) for b in batches[e]) / len(batches[e])
               for e in sorted(batches) if e - 1 in batches and batches[e]]
    out = {"steps": len(steps), "epochs": len(batches),
           "batch_repeat_fraction": float(np.mean(repeats)) if repeats else None,
           "single_class_step_fraction": single / multi if labels is not None and multi else None,
           "length_imbalance": float(np.mean(imbalance)),
           "padding": pad_num / pad_den if pad_den else 0.0}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
