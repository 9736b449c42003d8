#!/usr/bin/env python3
"""PyTorch reference for `ragtrain bench`: nn.LSTM + nn.Linear, batch size one, Adam, the idiomatic eager loop
with every sequence already on the GPU; timed after a warm-up. Reads the same v1 file `ragtrain gen` writes."""
import argparse
import json
import time

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", required=True, help="format v1 file (ragtrain gen)")
    ap.add_argument("--hidden", type=int, default=50)
    ap.add_argument("--layers", type=int, default=1)
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
    # Data already on the GPU: one (1, T, F) tensor per sequence, labels as (1,) tensors.
    xs = [torch.from_numpy(feats[offsets[i]:offsets[i + 1]]).to(dev).unsqueeze(0) for i in range(n)]
    ys = [torch.tensor([labels[i]], device=dev) for i in range(n)]

    torch.manual_seed(a.seed)
    lstm = nn.LSTM(nf, a.hidden, num_layers=a.layers, batch_first=True).to(dev)
    fc = nn.Linear(a.hidden, classes).to(dev)
    opt = torch.optim.Adam(list(lstm.parameters()) + list(fc.parameters()), lr=a.lr)
    order = np.random.default_rng(a.seed).permutation(n)

    def step(i):
        x, y = xs[i], ys[i]
        opt.zero_grad(set_to_none=True)
        out, _ = lstm(x)
        loss = F.cross_entropy(fc(out[:, -1]), y)
        loss.backward()
        opt.step()
        return loss

    for s in range(a.warmup):
        step(order[s % n])
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    timesteps = 0
    for s in range(a.steps):
        i = order[(a.warmup + s) % n]
        step(i)
        timesteps += int(offsets[i + 1] - offsets[i])
    torch.cuda.synchronize()
    secs = time.perf_counter() - t0

    res = {
        "benchmark": "torch_reference", "hidden": a.hidden, "layers": a.layers, "features": nf, "classes": classes,
        "sequences_in_file": n, "steps": a.steps, "warmup": a.warmup, "seconds": secs,
        "sequences_per_second": a.steps / secs, "timesteps_per_second": timesteps / secs,
        "us_per_step": 1e6 * secs / a.steps, "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(), "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "device": torch.cuda.get_device_name(0),
    }
    print(f"# torch reference: H={a.hidden} {res['sequences_per_second']:.1f} seq/s, {res['us_per_step']:.1f} us/step "
          f"(torch {torch.__version__}, cuDNN {res['cudnn']}, allow_tf32={res['cudnn_allow_tf32']})", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
