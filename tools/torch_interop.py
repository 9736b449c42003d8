#!/usr/bin/env python3
"""PyTorch <-> ragtrain checkpoints.

  torch_interop.py export STATE.pt CKPT.h5 --task classification [--pool last|mean|max]
                                                     # nn.LSTM + nn.Linear state_dict -> ragtrain
  torch_interop.py import CKPT.h5 STATE.pt           # ragtrain checkpoint -> state_dict

A ragtrain checkpoint keeps every tensor under its PyTorch name and shape in the group /params
(lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0, [the same with _reverse when
bidirectional,] ..., fc.weight, fc.bias), so the conversion is a copy; the state_dict keys are those of a module with
attributes `lstm` (nn.LSTM, batch_first or not, bidirectional or not) and `fc` (nn.Linear). The pooling (what the
head reads of the LSTM's outputs) is not in a state_dict: say it with --pool. ragtrain's model as a PyTorch module
is RaggedLSTMClassifier in tools/torch_model.py (its state_dict has these keys). `ragtrain train --init-from
CKPT.h5` starts from an exported file.
Needs numpy, h5py and torch.
"""
import argparse
import zlib

import h5py
import numpy as np


POOLS = ("last", "mean", "max")


def lstm_shape(state):
    """(input_size, hidden, layers, outputs, bidirectional) from the tensor shapes of a state_dict."""
    layers = 0
    while f"lstm.weight_ih_l{layers}" in state:
        layers += 1
    if layers == 0 or "fc.weight" not in state:
        raise SystemExit("state_dict needs lstm.weight_ih_l0 ... and fc.weight (a module with .lstm and .fc)")
    bidirectional = "lstm.weight_ih_l0_reverse" in state
    four_h, input_size = state["lstm.weight_ih_l0"].shape
    hidden = state["lstm.weight_hh_l0"].shape[1]
    outputs, head_in = state["fc.weight"].shape
    dirs = 2 if bidirectional else 1
    if four_h != 4 * hidden:
        raise SystemExit(f"lstm.weight_ih_l0 has {four_h} rows, expected 4 x hidden = {4 * hidden}")
    if head_in != dirs * hidden:
        raise SystemExit(f"fc.weight reads {head_in} values, the LSTM gives {dirs} x {hidden}")
    return int(input_size), int(hidden), layers, int(outputs), bidirectional


def param_names(layers, bidirectional=False):
    """The flat order of ragtrain's parameters: nn.LSTM's own (per layer: forward, then _reverse), then fc."""
    names = []
    for l in range(layers):
        for suffix in ("", "_reverse") if bidirectional else ("",):
            names += [f"lstm.weight_ih_l{l}{suffix}", f"lstm.weight_hh_l{l}{suffix}", f"lstm.bias_ih_l{l}{suffix}",
                      f"lstm.bias_hh_l{l}{suffix}"]
    return names + ["fc.weight", "fc.bias"]


def write_checkpoint(state, path, task, class_names=None, pool="last"):
    """Writes a ragtrain checkpoint (format ragtrain-checkpoint v1) from a dict of name -> numpy array."""
    if pool not in POOLS:
        raise SystemExit(f"pool '{pool}': use one of {', '.join(POOLS)}")
    input_size, hidden, layers, outputs, bidirectional = lstm_shape(state)
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "ragtrain-checkpoint"
        f.attrs["version"] = np.int64(1)
        f.attrs["task"] = task
        for key, value in (("input_size", input_size), ("hidden", hidden), ("layers", layers), ("outputs", outputs),
                           ("epoch", 0), ("step", 0), ("optimizer_steps", 0)):
            f.attrs[key] = np.int64(value)
        f.attrs["bidirectional"] = np.int64(1 if bidirectional else 0)
        f.attrs["pool"] = pool
        f.attrs["config"] = "# exported from PyTorch by tools/torch_interop.py\n"
        f.attrs["optimizer"] = ""
        if class_names:
            f.attrs["class_names"] = list(class_names)
        f.attrs["checksum"] = "crc32: every dataset's attribute crc32 = zlib.crc32 of its little-endian float32 bytes"
        g = f.create_group("params")
        for name in param_names(layers, bidirectional):
            data = np.ascontiguousarray(np.asarray(state[name], dtype="<f4"))
            ds = g.create_dataset(name, data=data)
            ds.attrs["crc32"] = np.int64(zlib.crc32(data.tobytes()))


def read_checkpoint(path):
    """Returns (state dict of numpy arrays, attributes) of a ragtrain checkpoint, checksums verified."""
    with h5py.File(path, "r") as f:
        if f.attrs.get("format") not in ("ragtrain-checkpoint", b"ragtrain-checkpoint"):
            raise SystemExit(f"{path} is not a ragtrain checkpoint")
        attrs = {k: f.attrs[k] for k in f.attrs}
        state = {}
        bidirectional = int(attrs.get("bidirectional", 0)) == 1   # absent in older files: unidirectional
        for name in param_names(int(attrs["layers"]), bidirectional):
            ds = f["params"][name]
            data = np.asarray(ds[...], dtype="<f4")
            if "crc32" in ds.attrs and int(ds.attrs["crc32"]) != zlib.crc32(data.tobytes()):
                raise SystemExit(f"{path}: params/{name} fails its checksum")
            state[name] = data
        return state, attrs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export", help="PyTorch state_dict (.pt) -> ragtrain checkpoint (.h5)")
    ex.add_argument("state")
    ex.add_argument("checkpoint")
    ex.add_argument("--task", choices=["classification", "regression"], default="classification")
    ex.add_argument("--pool", choices=POOLS, default="last", help="what the head reads (not in a state_dict)")
    im = sub.add_parser("import", help="ragtrain checkpoint (.h5) -> PyTorch state_dict (.pt)")
    im.add_argument("checkpoint")
    im.add_argument("state")
    args = ap.parse_args()

    import torch
    if args.cmd == "export":
        sd = torch.load(args.state, map_location="cpu")
        write_checkpoint({k: v.detach().numpy() for k, v in sd.items()}, args.checkpoint, args.task, pool=args.pool)
    else:
        state, _ = read_checkpoint(args.checkpoint)
        torch.save({k: torch.from_numpy(v) for k, v in state.items()}, args.state)


if __name__ == "__main__":
    main()
