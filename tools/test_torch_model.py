#!/usr/bin/env python3
"""Checks of tools/torch_model.py that need no data file: the padded fast path of the unidirectional model gives
the packed path's logits and gradients; mean/max pooling read only each sequence's valid steps; ragtrain's
learning-rate schedule; `series` and `feature` normalisation; the unpadded path; a state_dict that rebuilds the whole
model. Exit 0 when all pass.  Needs numpy, h5py and torch."""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_model as tm  # noqa: E402
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence  # noqa: E402


def packed_reference(model, seqs, lengths):
    """The same model evaluated through pack_padded_sequence, pooling written out per sequence."""
    out, (h_n, _) = model.lstm(pack_padded_sequence(pad_sequence(seqs, batch_first=True), lengths,
                                                    batch_first=True, enforce_sorted=False))
    y, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
    rows = []
    for b, n in enumerate(lengths.tolist()):
        v = y[b, :n]
        rows.append({"last": h_n[-1][b], "mean": v.mean(dim=0), "max": v.max(dim=0).values}[model.pool])
    return model.fc(torch.stack(rows))


def check(name, ok):
    print(("ok   " if ok else "FAIL ") + name)
    return ok


def main():
    torch.manual_seed(0)
    good = True
    seqs = [torch.randn(n, 3) for n in (7, 2, 11, 5)]
    lengths = torch.tensor([len(s) for s in seqs])
    for pool in ("last", "mean", "max"):
        model = tm.RaggedLSTMClassifier(3, 6, 2, 4, pool=pool)
        fast = model(seqs, lengths)
        g_fast = torch.autograd.grad(fast.square().sum(), list(model.parameters()))
        ref = packed_reference(model, seqs, lengths)
        g_ref = torch.autograd.grad(ref.square().sum(), list(model.parameters()))
        same = torch.allclose(fast, ref, atol=1e-6) and all(torch.allclose(a, b, atol=1e-5)
                                                          for a, b in zip(g_fast, g_ref))
        good &= check(f"padded path == packed path, 2 layers, pool {pool} (logits and every gradient)", same)
        longer = [torch.cat([s, 1e3 * torch.ones(4, 3)]) for s in seqs]   # garbage past each length
        good &= check(f"pool {pool} ignores steps past each length", torch.allclose(model(longer, lengths), fast))
    bi = tm.RaggedLSTMClassifier(3, 6, 1, 4, bidirectional=True, pool="mean")
    one = bi([seqs[0]], lengths[:1])
    batch = bi(seqs, lengths)
    good &= check("bidirectional: a sequence's logits do not depend on its batch", torch.allclose(one[0], batch[0],
                                                                                              atol=1e-6))
    opt = {"lr": 1.0, "warmup-steps": 2, "total-steps": 12, "lr-decay": "cosine", "lr-final-fraction": 0.1}
    lrs = [tm.lr_at(s, opt) for s in range(12)]
    good &= check("lr schedule: warm-up 0.5, 1.0, then cosine from 1.0 down to 0.1 at the last step",
                  abs(lrs[0] - 0.5) < 1e-12 and abs(lrs[2] - 1.0) < 1e-12 and abs(lrs[-1] - 0.1) < 1e-12)
    x = [np.array([[1.0, 5.0], [3.0, 5.0]], dtype=np.float32), np.array([[30000.0, 1.0], [30000.1, 3.0],
                                                                          [29999.9, 2.0]], dtype=np.float32)]
    series = tm.Standardize(2, "series")
    s = [series(torch.from_numpy(v)).numpy() for v in x]
    good &= check("series normalisation: each sequence's feature mean 0, std 1; a constant feature keeps std 1",
                  np.allclose(s[0][:, 0], [-1, 1]) and np.allclose(s[0][:, 1], 0) and
                  np.allclose(s[1].mean(axis=0), 0, atol=1e-3) and np.allclose(s[1].std(axis=0), 1, atol=1e-2))
    mean, std = tm.feature_scaling(x)
    feature = tm.Standardize(2, "feature", mean, std)
    f = np.concatenate([feature(torch.from_numpy(v)).numpy() for v in x])
    good &= check("feature normalisation: the training set's mean 0 and std 1 per feature, float32 statistics",
                  mean.dtype == np.float32 and np.allclose(f.mean(axis=0), 0, atol=1e-4) and
                  np.allclose(f.std(axis=0), 1, atol=1e-4))

    model = tm.RaggedLSTMClassifier(3, 5, 2, 4, bidirectional=True, pool="last", normalize="feature",
                                    mean=[1.0, -2.0, 3.0], std=[2.0, 0.5, 1.0], dropout=0.25, head_dropout=0.5).eval()
    seqs = [torch.randn(n, 3) * 4 + 2 for n in (6, 1, 9)]
    logits = model(seqs, torch.tensor([len(v) for v in seqs]))
    alone = torch.stack([model.one(v) for v in seqs])
    good &= check("a ragged batch and each sequence alone (the unpadded path) give the same logits, "
                  "bidirectional pool last", torch.allclose(logits, alone, atol=1e-6))
    state = model.state_dict()
    again = tm.RaggedLSTMClassifier.from_state_dict(state).eval()
    good &= check("from_state_dict: normalisation, pooling, dropout rates and weights from the state_dict alone",
                  again.norm.mode == "feature" and again.pool == "last" and again.options() == model.options()
                  and torch.equal(again(seqs, torch.tensor([len(v) for v in seqs])), logits))
    plain = {k: v for k, v in state.items() if k.startswith(("lstm.", "fc."))}
    bare = tm.RaggedLSTMClassifier.from_state_dict(plain)
    try:
        tm.RaggedLSTMClassifier.from_state_dict(state, pool="mean")
        refused = False
    except tm.ModelStateError:
        refused = True
    good &= check("from_state_dict of a plain nn.LSTM + nn.Linear state_dict: ragtrain's default pool, no "
                  "normalisation; a pool that contradicts a carried one is refused",
                  bare.pool == "mean" and bare.norm.mode == "none" and refused)
    print("all passed" if good else "FAILED")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
