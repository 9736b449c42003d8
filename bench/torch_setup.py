"""The set-up bench/torch_reference.py and bench/torch_graph_anchor.py share: their command line, a format v1 file's
sequences on the GPU, ragtrain's model as tools/torch_model.py defines it (the one PyTorch definition) with Adam,
the shuffled order the steps walk, and the JSON result. Needs numpy, h5py and torch."""
import argparse
import json
import os
import sys
from types import SimpleNamespace

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import torch_model  # noqa: E402


def bench_arguments(doc, steps, warmup, warmup_help, layers=True, bidirectional=False, parse=True):
    """The options of both scripts, parsed (parse=False: the parser, for a script's own options): the data file, the
    model (--layers and --bidirectional where the script has them), K, Adam's rate, the timed and the untimed steps
    (their defaults are the script's), the seed and the JSON file to write."""
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("--data", required=True, help="format v1 file (ragtrain gen)")
    ap.add_argument("--hidden", type=int, default=50)
    if layers:
        ap.add_argument("--layers", type=int, default=1)
    if bidirectional:
        ap.add_argument("--bidirectional", action="store_true", help="nn.LSTM(bidirectional=True); the head reads h_n "
                        "of both directions (ragtrain's --pool last)")
    ap.add_argument("--batch", type=int, default=1, help="sequences per step (K)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--steps", type=int, default=steps, help="timed steps")
    ap.add_argument("--warmup", type=int, default=warmup, help=warmup_help)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", help="JSON file to write")
    return ap.parse_args() if parse else ap


def write_result(res, path):
    """The result as JSON where --out asked for it."""
    if path:
        with open(path, "w") as f:
            json.dump(res, f, indent=1)


def load_on_device(path, dev):
    """Every sequence of a v1 classification file as its own (T, F) tensor on `dev`, the labels as one (N,) tensor
    there, the lengths as a host array (pack_padded_sequence and the graphs' keys want them on the host)."""
    seqs, labels, classes = torch_model.load_v1(path)
    return SimpleNamespace(xs=[torch.from_numpy(s).to(dev) for s in seqs], ys=torch.from_numpy(labels).to(dev),
                           lens=np.array([len(s) for s in seqs], dtype=np.int64), n=len(seqs),
                           features=seqs[0].shape[1], classes=classes)


def model_and_adam(data, hidden, layers, lr, seed, dev, capturable=False, bidirectional=False, dtype=torch.float32):
    """ragtrain's model (last-step pooling, no dropout) for `data` on `dev` in `dtype`, seeded, and Adam over its
    parameters."""
    torch.manual_seed(seed)
    model = torch_model.RaggedLSTMClassifier(data.features, hidden, layers, data.classes, bidirectional=bidirectional,
                                             pool="last").to(dev, dtype)
    model.lstm.flatten_parameters()   # after the cast: cuDNN wants its weights in one block, else it copies them
    return model, torch.optim.Adam(model.parameters(), lr=lr, capturable=capturable)


def step_order(n, seed, k):
    """The shuffled order of the sequences, and the function that gives step s its K positions (wrapping around)."""
    order = np.random.default_rng(seed).permutation(n)
    return order, lambda s: order[np.arange(s * k, s * k + k) % n]
