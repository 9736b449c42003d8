#!/usr/bin/env python3
"""PyTorch reference for `ragtrain bench`: nn.LSTM + nn.Linear, Adam, the idiomatic eager loop with every sequence
already on the GPU; timed after a warm-up. Batch one feeds each (1, T, F) sequence as it is; --batch K > 1 takes K
sequences of a shuffled order per step (as a DataLoader with shuffle=True would) through pad_sequence +
pack_padded_sequence(enforce_sorted=False), and the head reads h_n, each sequence's state at its own last step.
Reads the same v1 file `ragtrain gen` writes."""
import argparse
import json
import time

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", required=True, help="format v1 file (ragtrain gen)")
    ap.add_argument("--hidden", type=int, default=50)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--batch", type=int, default=1, help="sequences per step (K)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--steps", type=int, default=1000, help="timed steps")
    ap.add_argument("--warmup", type=int, default=100, help="untimed steps first")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", help="JSON file to write")
    a = ap.parse_args()

    dev = torch.device("cuda")
    with h5py.File(a.data, "r") as f:
        feats = np.asarray(f["features"], dtype=np.float32)   # (total_timesteps, F)
        offsets = np.asarray(f["offsets"], dtype=np.int64)    # (N + 1)
        labels = np.asarray(f["labels"], dtype=np.int64)      # (N)
    n, nf = len(offsets) - 1, feats.shape[1]
    classes = int(labels.max()) + 1
    # Data already on the GPU: one (T, F) tensor per sequence, labels in one (N,) tensor; lengths stay on the host
    # (pack_padded_sequence wants them there).
    xs = [torch.from_numpy(feats[offsets[i]:offsets[i + 1]]).to(dev) for i in range(n)]
    ys = torch.from_numpy(labels).to(dev)
    lens = torch.from_numpy(np.diff(offsets))

    torch.manual_seed(a.seed)
    lstm = nn.LSTM(nf, a.hidden, num_layers=a.layers, batch_first=True).to(dev)
    fc = nn.Linear(a.hidden, classes).to(dev)
    opt = torch.optim.Adam(list(lstm.parameters()) + list(fc.parameters()), lr=a.lr)
    order = np.random.default_rng(a.seed).permutation(n)

    k = a.batch

    def step(idx):
        opt.zero_grad(set_to_none=True)
        if k == 1:
            out, _ = lstm(xs[idx[0]].unsqueeze(0))
            h_last = out[:, -1]
        else:
            padded = pad_sequence([xs[i] for i in idx], batch_first=True)
            packed = pack_padded_sequence(padded, lens[idx], batch_first=True, enforce_sorted=False)
            _, (h_n, _) = lstm(packed)
            h_last = h_n[-1]   # (K, H): each sequence at its own last step, in the batch's order
        y = ys[idx[0]:idx[0] + 1] if k == 1 else ys[torch.from_numpy(idx).to(dev)]
        loss = F.cross_entropy(fc(h_last), y)
        loss.backward()
        opt.step()
        return loss

    def batch_at(s):   # the s-th step's K positions of the shuffled order (wrapping around)
        return order[np.arange(s * k, s * k + k) % n]

    for s in range(a.warmup):
        step(batch_at(s))
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    timesteps = 0
    for s in range(a.steps):
        idx = batch_at(a.warmup + s)
        step(idx)
        timesteps += int(lens[idx].sum())
    torch.cuda.synchronize()
    secs = time.perf_counter() - t0

    res = {
        "benchmark": "torch_reference", "hidden": a.hidden, "layers": a.layers, "features": nf, "classes": classes,
        "batch": k, "sequences_in_file": n, "steps": a.steps, "warmup": a.warmup, "seconds": secs,
        "sequences_per_second": a.steps * k / secs, "timesteps_per_second": timesteps / secs,
        "us_per_step": 1e6 * secs / a.steps, "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(), "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "device": torch.cuda.get_device_name(0),
    }
    print(f"# torch reference: H={a.hidden} K={k} {res['sequences_per_second']:.1f} seq/s, {res['us_per_step']:.1f} us/step "
          f"(torch {torch.__version__}, cuDNN {res['cudnn']}, allow_tf32={res['cudnn_allow_tf32']})", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
