#!/usr/bin/env python3
"""The model ragtrain trains, written once in PyTorch (RaggedLSTMClassifier), with the same options and the same
training recipe; the one definition that bench/ (accuracy table, the PyTorch timing references) and tools/ (interop,
agreement) use.

Model (attributes `lstm` and `fc`, so its state_dict uses ragtrain's checkpoint names, see torch_interop.py):
  nn.LSTM(F, hidden, layers, bidirectional, dropout between layers) -> pooling over each sequence's own valid
  steps (last | mean | max) -> head dropout -> nn.Linear(directions x hidden, classes).
  `last` reads h_n: the forward direction after the sequence's last step and, when bidirectional, the reverse
  direction after it has read the sequence's first step.
Data (format v1, as `ragtrain convert` writes it): normalisation none | feature (every feature standardised with
  the training set's mean and population std over all timesteps) | series (every sequence's features standardised
  by that sequence's own mean and std); a (near-)constant feature keeps std 1, as in ragtrain.
Training (ragtrain's recipe): initial weights uniform(+-1/sqrt(hidden)), the head's uniform(+-1/sqrt(its inputs)); a global
  batch of G sequences per step (ragtrain: ranks x batch-per-rank) drawn from a fresh random permutation every
  epoch (ragtrain's --schedule random), the last step of an epoch shorter; the loss is the mean cross-entropy over
  the step's sequences; sgd (momentum) | adam | adamw with ragtrain's learning-rate schedule (linear warm-up, then
  none | linear | cosine decay to lr x final fraction at the last step) and global-norm clipping.

  torch_model.py --train TRAIN.h5 --test TEST.h5 [--config RECIPE.ini] [--seed S] [options]  # prints test accuracy

Needs numpy, h5py and torch (CPU is enough).
"""
import argparse
import configparser
import json
import math
import time

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

# ragtrain option name -> (python type, default); the subset of `ragtrain train` options that shape the model and
# its training. Defaults are ragtrain's.
OPTIONS = {
    "hidden": (int, 50), "layers": (int, 1), "epochs": (int, 30), "batch-per-rank": (int, 1),
    "optimizer": (str, "adam"), "lr": (float, 1e-2), "momentum": (float, 0.9), "beta1": (float, 0.9),
    "beta2": (float, 0.999), "eps": (float, 1e-8), "weight-decay": (float, 0.0), "clip": (float, 1.0),
    "warmup-steps": (int, 0), "lr-decay": (str, "cosine"), "lr-final-fraction": (float, 0.0),
    "normalize": (str, "feature"), "bidirectional": (bool, False), "dropout": (float, 0.0),
    "head-dropout": (float, 0.0), "pool": (str, "mean"), "seed": (int, 1), "schedule": (str, "balanced"),
}


def parse_bool(text):
    t = str(text).strip().lower()
    if t in ("1", "true", "yes", "on", ""):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def read_recipe(path):
    """A ragtrain INI recipe (`key = value`, '#' comments, no sections) -> dict of the options above."""
    parser = configparser.ConfigParser(inline_comment_prefixes=("#",), interpolation=None)
    with open(path, encoding="utf-8") as f:
        parser.read_string("[recipe]\n" + f.read())
    return {k: v for k, v in parser["recipe"].items()}


def resolve_options(recipe, overrides):
    """Typed options: ragtrain's defaults, then the recipe, then the overrides (as ragtrain's command line wins)."""
    merged = dict(recipe)
    merged.update({k: v for k, v in overrides.items() if v is not None})
    out = {}
    for name, (kind, default) in OPTIONS.items():
        raw = merged.get(name, default)
        if kind is bool:
            out[name] = parse_bool(raw)
        else:
            out[name] = kind(raw)
    # ragtrain: `--normalize` alone (or `normalize = true`) means feature standardisation.
    norm = str(out["normalize"]).strip().lower()
    out["normalize"] = {"true": "feature", "1": "feature", "yes": "feature", "": "feature",
                        "false": "none", "0": "none", "no": "none"}.get(norm, norm)
    if out["normalize"] not in ("none", "feature", "series"):
        raise SystemExit(f"normalize must be none|feature|series, got {out['normalize']!r}")
    if out["pool"] not in ("last", "mean", "max"):
        raise SystemExit(f"pool must be last|mean|max, got {out['pool']!r}")
    return out


def load_v1(path):
    """(list of (T, F) float32 arrays, int64 labels) of a format v1 classification file."""
    with h5py.File(path, "r") as f:
        feats = np.asarray(f["features"], dtype=np.float32)    # (total_timesteps, F)
        offsets = np.asarray(f["offsets"], dtype=np.int64)     # (N + 1)
        labels = np.asarray(f["labels"], dtype=np.int64)       # (N)
        classes = int(f.attrs["num_classes"]) if "num_classes" in f.attrs else int(labels.max()) + 1
    seqs = [feats[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]
    return seqs, labels, classes


def _safe_std(std, mean):
    # Same rule as ragtrain: a (near-)constant feature carries no information; keep std 1.
    return np.where(std > 1e-8 * (1.0 + np.abs(mean)), std, 1.0)


def feature_scaling(train_seqs):
    """Per-feature mean and population std over all training timesteps, in float64 (two passes)."""
    allrows = np.concatenate(train_seqs, axis=0).astype(np.float64)
    mean = allrows.mean(axis=0)
    std = np.sqrt(((allrows - mean) ** 2).mean(axis=0))
    return mean, _safe_std(std, mean)


def normalize(seqs, mode, scaling=None):
    if mode == "none":
        return [s.astype(np.float32) for s in seqs]
    if mode == "feature":
        mean, std = scaling
        return [((s - mean) / std).astype(np.float32) for s in seqs]
    out = []
    for s in seqs:
        x = s.astype(np.float64)
        mean = x.mean(axis=0)
        std = np.sqrt(((x - mean) ** 2).mean(axis=0))
        out.append(((x - mean) / _safe_std(std, mean)).astype(np.float32))
    return out


class RaggedLSTMClassifier(nn.Module):
    """ragtrain's model: nn.LSTM (batch_first) -> pooling -> head dropout -> nn.Linear, on a list of sequences."""

    def __init__(self, input_size, hidden, layers, classes, bidirectional=False, dropout=0.0, head_dropout=0.0,
                 pool="last"):
        super().__init__()
        self.pool = pool
        self.bidirectional = bidirectional
        self.lstm = nn.LSTM(input_size, hidden, num_layers=layers, batch_first=True, dropout=dropout,
                            bidirectional=bidirectional)
        self.head_dropout = nn.Dropout(head_dropout)
        self.fc = nn.Linear(hidden * (2 if bidirectional else 1), classes)
        # ragtrain's initialisation: the LSTM's tensors uniform(+-1/sqrt(hidden)), as nn.LSTM; the head's
        # uniform(+-1/sqrt(its input size)), as nn.Linear's bound.
        with torch.no_grad():
            for p in self.lstm.parameters():
                p.uniform_(-1.0 / math.sqrt(hidden), 1.0 / math.sqrt(hidden))
            for p in self.fc.parameters():
                p.uniform_(-1.0 / math.sqrt(self.fc.in_features), 1.0 / math.sqrt(self.fc.in_features))

    def forward(self, seqs, lengths):
        """seqs: list of (T_i, F) tensors on the model's device; lengths: (B,) int64 on the CPU -> (B, classes)
        logits."""
        padded = pad_sequence(seqs, batch_first=True)                     # (B, T_max, F)
        steps = lengths.to(padded.device)                                  # the masks live beside the outputs
        if not self.bidirectional:
            # A forward LSTM's outputs at a sequence's valid steps never depend on the zero padding after them,
            # and the pooling below reads valid steps only, so the padded batch gives the packed batch's result
            # (value and gradient) at a third of the CPU time: packing re-slices the state at every step.
            y, _ = self.lstm(padded)                                       # (B, T_max, H)
            valid = (torch.arange(y.shape[1], device=y.device)[None, :] < steps[:, None]).unsqueeze(2)   # (B, T_max, 1)
            if self.pool == "last":
                z = y[torch.arange(y.shape[0], device=y.device), steps - 1]
            elif self.pool == "mean":
                z = y.masked_fill(~valid, 0.0).sum(dim=1) / steps[:, None].to(y.dtype)
            else:
                z = y.masked_fill(~valid, float("-inf")).max(dim=1).values
            return self.fc(self.head_dropout(z))
        packed = pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False)
        out, (h_n, _) = self.lstm(packed)
        if self.pool == "last":
            # h_n: (layers x directions, B, H); the top layer's forward state is h_n[-2] when bidirectional.
            z = torch.cat([h_n[-2], h_n[-1]], dim=1) if self.bidirectional else h_n[-1]
        else:
            y, _ = pad_packed_sequence(out, batch_first=True)              # (B, T_max, D x H), zeros past the end
            valid = (torch.arange(y.shape[1], device=y.device)[None, :] < steps[:, None]).unsqueeze(2)   # (B, T_max, 1)
            if self.pool == "mean":
                z = y.sum(dim=1) / steps[:, None].to(y.dtype)
            else:
                z = y.masked_fill(~valid, float("-inf")).max(dim=1).values
        return self.fc(self.head_dropout(z))

    def one(self, x):
        """(classes,) logits of one (T, F) sequence."""
        return self([x], torch.tensor([x.shape[0]], dtype=torch.int64))[0]


def lr_at(step, opt):
    """ragtrain's LrSchedule::at."""
    lr, warmup, total = opt["lr"], opt["warmup-steps"], opt["total-steps"]
    if warmup > 0 and step < warmup:
        return lr * (step + 1) / warmup
    span = total - warmup
    if opt["lr-decay"] == "none" or span <= 1:
        return lr
    progress = min(1.0, (step - warmup) / (span - 1))
    lo = lr * opt["lr-final-fraction"]
    if opt["lr-decay"] == "linear":
        return lr - (lr - lo) * progress
    return lo + 0.5 * (lr - lo) * (1.0 + math.cos(math.pi * progress))


def make_optimizer(params, opt):
    kind = opt["optimizer"]
    if kind == "sgd":
        return torch.optim.SGD(params, lr=opt["lr"], momentum=opt["momentum"], weight_decay=opt["weight-decay"])
    cls = torch.optim.AdamW if kind == "adamw" else torch.optim.Adam
    return cls(params, lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"],
               weight_decay=opt["weight-decay"])


@torch.no_grad()
def evaluate(model, xs, ys, chunk=64):
    # xs and ys on the model's device.
    """(mean cross-entropy, accuracy) over all sequences, in length-sorted chunks (padding is cheap then)."""
    model.eval()
    order = np.argsort([len(x) for x in xs], kind="stable")
    loss_sum, correct = 0.0, 0
    for i in range(0, len(order), chunk):
        idx = order[i:i + chunk]
        lengths = torch.tensor([len(xs[j]) for j in idx], dtype=torch.int64)
        logits = model([xs[j] for j in idx], lengths)
        y = ys[torch.from_numpy(idx).to(ys.device)]
        loss_sum += float(F.cross_entropy(logits, y, reduction="sum"))
        correct += int((logits.argmax(dim=1) == y).sum())
    model.train()
    return loss_sum / len(xs), correct / len(xs)


def epoch_batches(rng, n, global_batch, deal, columns):
    """The global batches of one epoch: `shuffle` cuts a fresh permutation into batches; `columns` takes one
    sequence from each of G fixed columns per step, each column reshuffled every epoch (the structure of ragtrain's
    random schedule: the columns are dealt once, from a seeded permutation, the first N mod G one longer)."""
    if deal == "shuffle":
        perm = rng.permutation(n)
        return [perm[s:s + global_batch] for s in range(0, n, global_batch)]
    cols = [rng.permutation(c) for c in columns]
    steps = max(len(c) for c in cols)
    return [np.array([c[s] for c in cols if s < len(c)]) for s in range(steps)]


def deal_columns(rng, n, g):
    perm = rng.permutation(n)
    sizes = [n // g + (1 if c < n % g else 0) for c in range(g)]
    starts = np.concatenate([[0], np.cumsum(sizes)])
    return [perm[starts[c]:starts[c + 1]] for c in range(g)]


def train_and_test(train_path, test_path, opt, global_batch, log=None, deal="shuffle", device="cpu"):
    """Trains on train_path with the options `opt` and a global batch of `global_batch` sequences per step (on
    `device`: cpu, or cuda where the data sets are too long for a CPU); returns a dict with the final model's test
    loss and accuracy (no model selection)."""
    torch.manual_seed(opt["seed"])
    rng = np.random.default_rng(opt["seed"])
    tr_seqs, tr_labels, classes = load_v1(train_path)
    te_seqs, te_labels, te_classes = load_v1(test_path)
    scaling = feature_scaling(tr_seqs) if opt["normalize"] == "feature" else None
    xs = [torch.from_numpy(s).to(device) for s in normalize(tr_seqs, opt["normalize"], scaling)]
    xt = [torch.from_numpy(s).to(device) for s in normalize(te_seqs, opt["normalize"], scaling)]
    ys, yt = torch.from_numpy(tr_labels).to(device), torch.from_numpy(te_labels).to(device)
    lengths = torch.tensor([len(x) for x in xs], dtype=torch.int64)

    model = RaggedLSTMClassifier(xs[0].shape[1], opt["hidden"], opt["layers"], max(classes, te_classes),
                                 opt["bidirectional"], opt["dropout"], opt["head-dropout"], opt["pool"]).to(device)
    optimizer = make_optimizer(model.parameters(), opt)
    n = len(xs)
    steps_per_epoch = -(-n // global_batch)
    opt = dict(opt, **{"total-steps": opt["epochs"] * steps_per_epoch})
    columns = deal_columns(rng, n, global_batch) if deal == "columns" else None
    t0, step = time.perf_counter(), 0
    for epoch in range(opt["epochs"]):
        epoch_loss = 0.0
        for idx in epoch_batches(rng, n, global_batch, deal, columns):
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step, opt)
            optimizer.zero_grad(set_to_none=True)
            logits = model([xs[i] for i in idx], lengths[torch.from_numpy(idx)])
            loss = F.cross_entropy(logits, ys[torch.from_numpy(idx).to(device)])   # mean over the step's sequences
            loss.backward()
            if opt["clip"] > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), opt["clip"])
            optimizer.step()
            epoch_loss += float(loss) * len(idx)
            step += 1
        if log:
            log(f"epoch {epoch + 1}/{opt['epochs']} train loss {epoch_loss / n:.4f}")
    seconds = time.perf_counter() - t0
    test_loss, test_acc = evaluate(model, xt, yt)
    return {"test_loss": test_loss, "test_accuracy": test_acc, "steps": step, "train_seconds": seconds,
            "global_batch": global_batch, "deal": deal, "torch": torch.__version__, "threads": torch.get_num_threads(),
            "device": device}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", required=True, help="format v1 training file")
    ap.add_argument("--test", required=True, help="format v1 test file (converted like the training file)")
    ap.add_argument("--config", help="ragtrain INI recipe (same names as `ragtrain train`)")
    ap.add_argument("--ranks", type=int, default=1, help="ragtrain's rank count: global batch = ranks x batch-per-rank")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--deal", choices=["shuffle", "columns"], default="shuffle",
                    help="batches from a fresh permutation per epoch, or ragtrain's random-schedule columns")
    ap.add_argument("--out", help="JSON file to write")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    for name, (kind, _) in OPTIONS.items():
        ap.add_argument("--" + name, type=str if kind is bool else kind, default=None)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    overrides = {name: getattr(a, name.replace("-", "_")) for name in OPTIONS}
    opt = resolve_options(read_recipe(a.config) if a.config else {}, overrides)
    res = train_and_test(a.train, a.test, opt, a.ranks * opt["batch-per-rank"], log=print, deal=a.deal,
                         device=a.device)
    res["options"] = opt
    print(f"test accuracy {res['test_accuracy']:.4f} loss {res['test_loss']:.4f} ({res['train_seconds']:.1f} s)")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
