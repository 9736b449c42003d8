#!/usr/bin/env python3
"""The model ragtrain trains, written once in PyTorch (RaggedLSTMClassifier), with the same options and the same
training recipe; the one definition that bench/ (accuracy table, the PyTorch timing references) and tools/ (interop,
agreement) use.

Model (RaggedLSTMClassifier): the input normalisation (--normalize none | feature, the training set's mean and
  population std of every feature over all timesteps | series, every sequence by its own; a (near-)constant feature
  keeps std 1, as in ragtrain) -> nn.LSTM(F, hidden, layers, bidirectional, dropout between layers) -> pooling over
  each sequence's own valid steps (last | mean | max) -> head dropout -> nn.Linear(directions x hidden, classes).
  `last` reads h_n: the forward direction after the sequence's last step and, when bidirectional, the reverse
  direction after it has read the sequence's first step. The model takes raw features; its state_dict holds the
  normalisation's statistics and mode (norm.*), the weights under a ragtrain checkpoint's names (lstm.*, fc.*) and
  the options (_extra_state), so that RaggedLSTMClassifier.from_state_dict(torch.load(PATH)) on a file of
  `tools/torch_interop.py import` predicts what `ragtrain predict` does.
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


POOLS = ("last", "mean", "max")
NORMALIZATIONS = ("none", "feature", "series")
TASKS = ("classification", "regression")
# ragtrain's guard (kConstantStd, src/data/normalization.cpp): a std at most this x (1 + |mean|) is a constant
# feature up to rounding; dividing by it would only amplify the rounding, so such a feature is only centred.
CONSTANT_STD = 1e-8


class ModelStateError(ValueError):
    """A state_dict that does not describe ragtrain's model: `what` is wrong, `hint` says how to fix it."""

    def __init__(self, what, hint):
        super().__init__(f"{what}; hint: {hint}")
        self.what, self.hint = what, hint


def feature_scaling(train_seqs):
    """(mean, std), float32 (F,) each: every feature's mean and population std over all training timesteps, as
    ragtrain's `--normalize feature` computes them (two passes in float64, the constant-feature guard, then float32)."""
    allrows = np.concatenate(train_seqs, axis=0).astype(np.float64)   # (total_timesteps, F)
    mean = allrows.mean(axis=0)
    std = np.sqrt(((allrows - mean) ** 2).mean(axis=0))
    std = np.where(std > CONSTANT_STD * (1.0 + np.abs(mean)), std, 1.0)
    return mean.astype(np.float32), std.astype(np.float32)


class Standardize(nn.Module):
    """ragtrain's `--normalize`, applied to raw features: (T, F) or (B, T, F) of equal-length sequences.
      none     the features as stored;
      feature  (x - mean) / std in float32, with the training set's statistics: the buffers `mean` and `std` (F,),
               a checkpoint's /normalization/mean and /std (0 and 1, unused, in the other modes);
      series   every feature of a sequence by that sequence's own mean and population std, in float64 as ragtrain.
    The mode is the module's extra state: a state_dict carries it beside the buffers."""

    def __init__(self, features, mode="none", mean=None, std=None):
        super().__init__()
        self.mode = _check_normalization(mode)
        if (mode == "feature") != (mean is not None and std is not None):
            raise ValueError("--normalize feature takes the training set's mean and std (feature_scaling), "
                             "none and series take none")
        self.register_buffer("mean", torch.zeros(features) if mean is None else
                             torch.as_tensor(mean, dtype=torch.float32).clone())
        self.register_buffer("std", torch.ones(features) if std is None else
                             torch.as_tensor(std, dtype=torch.float32).clone())
        if not (torch.isfinite(self.std).all() and (self.std > 0).all() and torch.isfinite(self.mean).all()):
            raise ValueError("feature statistics must be finite, every std positive")

    def forward(self, x):
        if self.mode == "feature":
            return (x - self.mean) / self.std          # float32 throughout, as ragtrain's apply_scaling
        if self.mode == "series":
            xd = x.double()
            mean = xd.mean(dim=-2, keepdim=True)        # over the sequence's own timesteps
            std = ((xd - mean) ** 2).mean(dim=-2, keepdim=True).sqrt()
            std = torch.where(std > CONSTANT_STD * (1.0 + mean.abs()), std, torch.ones_like(std))
            return ((xd - mean) / std).to(x.dtype)
        return x

    def get_extra_state(self):
        return {"mode": self.mode}

    def set_extra_state(self, state):
        self.mode = _check_normalization(state["mode"])


def _check_normalization(mode):
    if mode not in NORMALIZATIONS:
        raise ModelStateError(f"normalize '{mode}' is not one of {', '.join(NORMALIZATIONS)}",
                              "ragtrain's --normalize modes are none, feature and series")
    return mode


def shape_of(state):
    """The sizes a state_dict's tensors give: dict(input_size, hidden, layers, outputs, bidirectional)."""
    layers = 0
    while f"lstm.weight_ih_l{layers}" in state:
        layers += 1
    if layers == 0 or "fc.weight" not in state:
        raise ModelStateError(f"the state_dict has no lstm.weight_ih_l0 ... and fc.weight (its first keys: "
                              f"{', '.join(list(state)[:4])})",
                              "save the state_dict of a module with attributes .lstm (nn.LSTM) and .fc (nn.Linear)")
    bidirectional = "lstm.weight_ih_l0_reverse" in state
    four_h, input_size = state["lstm.weight_ih_l0"].shape
    hidden = state["lstm.weight_hh_l0"].shape[1]
    outputs, head_in = state["fc.weight"].shape
    dirs = 2 if bidirectional else 1
    if four_h != 4 * hidden:
        raise ModelStateError(f"lstm.weight_ih_l0 has {four_h} rows, expected 4 x hidden = {4 * hidden}",
                              "export an nn.LSTM's own state_dict")
    if head_in != dirs * hidden:
        raise ModelStateError(f"fc.weight reads {head_in} values, the LSTM gives {dirs} x {hidden}",
                              "the head must read the LSTM's outputs (nn.Linear(dirs * hidden, classes))")
    return dict(input_size=int(input_size), hidden=int(hidden), layers=layers, outputs=int(outputs),
                bidirectional=bidirectional)


class RaggedLSTMClassifier(nn.Module):
    """ragtrain's model: Standardize -> nn.LSTM (batch_first) -> pooling -> head dropout -> nn.Linear.
    Its state_dict is everything ragtrain's prediction needs, from raw features: norm.mean, norm.std and
    norm._extra_state (the --normalize mode), lstm.* and fc.* (the names of a ragtrain checkpoint's /params) and
    _extra_state (pool, dropout rates, task, class names); from_state_dict() rebuilds the model from it alone."""

    def __init__(self, input_size, hidden, layers, classes, bidirectional=False, dropout=0.0, head_dropout=0.0,
                 pool="mean", normalize="none", mean=None, std=None, task="classification", class_names=None):
        super().__init__()
        self._set_options(pool, task)
        self.class_names = [str(c) for c in class_names] if class_names else []   # as the training data named them
        self.bidirectional = bidirectional
        self.norm = Standardize(input_size, normalize, mean, std)
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

    def _set_options(self, pool, task):
        if pool not in POOLS:
            raise ModelStateError(f"pool '{pool}' is not one of {', '.join(POOLS)}", "ragtrain pools last, mean or max")
        if task not in TASKS:
            raise ModelStateError(f"task '{task}' is not one of {', '.join(TASKS)}", "classification or regression")
        self.pool, self.task = pool, task

    def options(self):
        """The options a state_dict does not hold as tensors (ragtrain's checkpoint attributes of the same names)."""
        return {"pool": self.pool, "dropout": float(self.lstm.dropout), "head_dropout": float(self.head_dropout.p),
                "task": self.task, "class_names": list(self.class_names)}

    def get_extra_state(self):
        # The rates as text (repr: exact both ways): torch 1.13's torch.load(weights_only=True) reads no floats.
        return {k: repr(v) if isinstance(v, float) else v for k, v in self.options().items()}

    def set_extra_state(self, state):
        self._set_options(state["pool"], state["task"])
        for name in ("dropout", "head_dropout"):
            if not 0.0 <= float(state[name]) < 1.0:
                raise ModelStateError(f"{name} = {state[name]} is outside [0, 1)", "the state_dict is damaged")
        self.lstm.dropout = float(state["dropout"])
        self.head_dropout.p = float(state["head_dropout"])
        self.class_names = [str(c) for c in state.get("class_names", [])]

    @classmethod
    def from_state_dict(cls, state, pool=None):
        """The model a state_dict describes, its weights loaded. A state_dict of this class (what
        `torch_interop.py import` writes) carries every option; `pool`, if given, must agree with it. One of a
        plain module with attributes .lstm (nn.LSTM) and .fc (nn.Linear) gets no normalisation, no dropout and
        `pool` (default ragtrain's, mean)."""
        s = shape_of(state)
        carried = state.get("_extra_state")
        if carried is not None and not isinstance(carried, dict):
            raise ModelStateError(f"the state_dict's _extra_state is a {type(carried).__name__}, not ragtrain's "
                                  "model options", "save the state_dict of RaggedLSTMClassifier, or one without it")
        if carried is not None and pool is not None and pool != carried.get("pool"):
            raise ModelStateError(f"the state_dict's model pools '{carried.get('pool')}', not '{pool}'",
                                  "leave the pooling out: the state_dict says it")
        opts = dict(carried) if carried is not None else {"pool": pool or "mean"}
        norm = state.get("norm._extra_state")
        mode = _check_normalization(norm["mode"] if isinstance(norm, dict) else "none")
        stats = (state.get("norm.mean"), state.get("norm.std")) if mode == "feature" else (None, None)
        if mode == "feature" and (stats[0] is None or stats[1] is None):
            raise ModelStateError("the state_dict normalises by feature but holds no norm.mean and norm.std",
                                  "save the state_dict of the whole model (model.state_dict())")
        try:
            model = cls(s["input_size"], s["hidden"], s["layers"], s["outputs"], s["bidirectional"],
                        float(opts.get("dropout", 0.0)), float(opts.get("head_dropout", 0.0)), opts.get("pool", "mean"),
                        mode, stats[0], stats[1], opts.get("task", "classification"), opts.get("class_names"))
            full = model.state_dict()   # a plain module's state_dict: this model's own statistics and options
            full.update(state)
            model.load_state_dict(full)
        except (RuntimeError, ValueError, KeyError) as e:
            if isinstance(e, ModelStateError):
                raise
            raise ModelStateError(f"the state_dict does not load into ragtrain's model: {e}",
                                  "save the state_dict of RaggedLSTMClassifier, or of a module with attributes .lstm "
                                  "(nn.LSTM) and .fc (nn.Linear)") from None
        return model

    def forward(self, seqs, lengths=None):
        """Raw features in, (B, classes) logits out: `seqs` a list of (T_i, F) tensors on the model's device with
        `lengths` (B,) int64 on the CPU, or one (B, T, F) tensor of sequences that all have T steps (no padding)."""
        if torch.is_tensor(seqs):
            if seqs.dim() != 3:   # nn.LSTM would read a (T, F) tensor as one unbatched sequence, the pooling not
                raise ValueError(f"a tensor input is (B, T, F), got shape {tuple(seqs.shape)}; one sequence: "
                                 "model.one(x)")
            return self._forward_full(self.norm(seqs))
        if self.norm.mode != "none":
            seqs = [self.norm(s) for s in seqs]
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

    def _forward_full(self, x):
        """(B, T, F) standardised sequences of T steps each -> (B, classes) logits; no padding to mask."""
        y, _ = self.lstm(x)                                                # (B, T, D x H)
        if self.pool == "last":
            # The forward direction after the last step; the reverse one after it has read the first step.
            h = self.lstm.hidden_size
            z = torch.cat([y[:, -1, :h], y[:, 0, h:]], dim=1) if self.bidirectional else y[:, -1]
        elif self.pool == "mean":
            z = y.mean(dim=1)
        else:
            z = y.max(dim=1).values
        return self.fc(self.head_dropout(z))

    def one(self, x):
        """(classes,) logits of one (T, F) sequence of raw features."""
        return self(x.unsqueeze(0))[0]


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
    mean, std = feature_scaling(tr_seqs) if opt["normalize"] == "feature" else (None, None)
    xs = [torch.from_numpy(s).to(device) for s in tr_seqs]   # raw features: the model standardises them
    xt = [torch.from_numpy(s).to(device) for s in te_seqs]
    ys, yt = torch.from_numpy(tr_labels).to(device), torch.from_numpy(te_labels).to(device)
    lengths = torch.tensor([len(x) for x in xs], dtype=torch.int64)

    model = RaggedLSTMClassifier(xs[0].shape[1], opt["hidden"], opt["layers"], max(classes, te_classes),
                                 opt["bidirectional"], opt["dropout"], opt["head-dropout"], opt["pool"],
                                 opt["normalize"], mean, std).to(device)
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
