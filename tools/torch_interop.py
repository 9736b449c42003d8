#!/usr/bin/env python3
"""PyTorch <-> ragtrain checkpoints.

  torch_interop.py export STATE.pt CKPT.h5 --task classification [--pool last|mean|max] [--force]
                                                     # nn.LSTM + nn.Linear state_dict -> ragtrain
  torch_interop.py import CKPT.h5|RUN_DIR STATE.pt [--force]
                                                     # ragtrain checkpoint -> state_dict

As ragtrain's own commands: an error exits 2 with a hint; RUN_DIR means its best.h5, else its checkpoint.h5; the
output is written whole or not at all (a temporary file renamed); an output that is the input or a ragtrain
checkpoint is refused, another existing file is replaced only with --force.

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
import os
import sys
import zlib

import h5py
import numpy as np


POOLS = ("last", "mean", "max")


def fail(what, hint):
    """A user error as ragtrain reports one: what and where, how to fix it, exit code 2."""
    print(f"torch_interop.py: error: {what}\n  hint: {hint}", file=sys.stderr)
    sys.exit(2)


def input_file(path):
    """A checkpoint file, or a ragtrain run folder (its best.h5, else its checkpoint.h5, as `ragtrain eval`)."""
    if os.path.isdir(path):
        for name in ("best.h5", "checkpoint.h5"):
            if os.path.isfile(os.path.join(path, name)):
                return os.path.join(path, name)
        fail(f"{path} is a folder without best.h5 or checkpoint.h5", "name a checkpoint file or a ragtrain run folder")
    if not os.path.isfile(path):
        fail(f"{path}: no such file", "check the path")
    return path


def is_ragtrain_checkpoint(path):
    try:
        with h5py.File(path, "r") as f:
            return f.attrs.get("format") in ("ragtrain-checkpoint", b"ragtrain-checkpoint")
    except OSError:
        return False


def check_output(out, source, force):
    """No output destroys data: not the input, never a ragtrain checkpoint, another file only with --force."""
    if not os.path.exists(out):
        return
    if os.path.samefile(out, source):
        fail(f"the output {out} is the input {source}", "write to another path")
    if os.path.isdir(out):
        fail(f"the output {out} is a folder", "name a file")
    if is_ragtrain_checkpoint(out):
        fail(f"{out} already holds a ragtrain checkpoint; a checkpoint is never replaced, not even with --force",
             "write to another path (move the checkpoint yourself if you mean to drop it)")
    if not force:
        fail(f"{out} already exists", "add --force to replace it, or write to another path")


def write_atomically(out, write):
    """write(tmp) into a temporary name beside `out`, then rename: a failure leaves the old file or none."""
    tmp = os.path.join(os.path.dirname(os.path.abspath(out)), f".{os.path.basename(out)}.tmp{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def lstm_shape(state):
    """(input_size, hidden, layers, outputs, bidirectional) from the tensor shapes of a state_dict."""
    layers = 0
    while f"lstm.weight_ih_l{layers}" in state:
        layers += 1
    if layers == 0 or "fc.weight" not in state:
        fail(f"the state_dict has no lstm.weight_ih_l0 ... and fc.weight (its first keys: {', '.join(list(state)[:4])})",
             "save the state_dict of a module with attributes .lstm (nn.LSTM) and .fc (nn.Linear)")
    bidirectional = "lstm.weight_ih_l0_reverse" in state
    four_h, input_size = state["lstm.weight_ih_l0"].shape
    hidden = state["lstm.weight_hh_l0"].shape[1]
    outputs, head_in = state["fc.weight"].shape
    dirs = 2 if bidirectional else 1
    if four_h != 4 * hidden:
        fail(f"lstm.weight_ih_l0 has {four_h} rows, expected 4 x hidden = {4 * hidden}", "export an nn.LSTM's own state_dict")
    if head_in != dirs * hidden:
        fail(f"fc.weight reads {head_in} values, the LSTM gives {dirs} x {hidden}", "the head must read the LSTM's outputs (nn.Linear(dirs * hidden, classes))")
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
        fail(f"pool '{pool}' is not one of {', '.join(POOLS)}", "pass --pool last, mean or max")
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
            fail(f"{path} is not a ragtrain checkpoint", "name a checkpoint ragtrain wrote (a run folder's best.h5 or checkpoint.h5)")
        attrs = {k: f.attrs[k] for k in f.attrs}
        state = {}
        bidirectional = int(attrs.get("bidirectional", 0)) == 1   # absent in older files: unidirectional
        for name in param_names(int(attrs["layers"]), bidirectional):
            ds = f["params"][name]
            data = np.asarray(ds[...], dtype="<f4")
            if "crc32" in ds.attrs and int(ds.attrs["crc32"]) != zlib.crc32(data.tobytes()):
                fail(f"{path}: params/{name} fails its checksum", "the file is damaged; use another checkpoint of the run")
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
    for p in (ex, im):
        p.add_argument("--force", action="store_true", help="replace an existing output file (never a checkpoint)")
    args = ap.parse_args()

    import torch
    if args.cmd == "export":
        source = input_file(args.state)
        check_output(args.checkpoint, source, args.force)
        try:
            sd = torch.load(source, map_location="cpu")
        except Exception as e:   # pickle, zip or torch errors: the file is not a saved state_dict
            fail(f"{source} is not a PyTorch state_dict file ({e})", "save one with torch.save(model.state_dict(), PATH)")
        if isinstance(sd, dict) and sd and all(k.startswith("module.") for k in sd):
            print("torch_interop.py: the keys' 'module.' prefix (DistributedDataParallel, DataParallel) is dropped",
                  file=sys.stderr)
            sd = {k[len("module."):]: v for k, v in sd.items()}
        if not isinstance(sd, dict):
            fail(f"{source} holds a {type(sd).__name__}, not a state_dict", "save model.state_dict(), not the model")
        state = {k: v.detach().numpy() for k, v in sd.items()}
        write_atomically(args.checkpoint, lambda tmp: write_checkpoint(state, tmp, args.task, pool=args.pool))
        print(f"wrote {args.checkpoint}: pool {args.pool}, task {args.task}")
    else:
        source = input_file(args.checkpoint)
        check_output(args.state, source, args.force)
        try:
            state, attrs = read_checkpoint(source)
        except OSError as e:
            fail(f"{source} is not an HDF5 file ({e})", "name a checkpoint ragtrain wrote, or a run folder")
        write_atomically(args.state, lambda tmp: torch.save({k: torch.from_numpy(v) for k, v in state.items()}, tmp))
        def text(v):
            return v.decode() if isinstance(v, bytes) else str(v)
        pool = text(attrs.get("pool", "last"))
        with h5py.File(source, "r") as f:
            norm = text(f["normalization"].attrs.get("mode", "feature")) if "normalization" in f else "none"
        # What a state_dict does not carry, but the model needs to give ragtrain's predictions.
        print(f"wrote {args.state} from {source}: the head reads pool {pool}; inputs standardised by --normalize "
              f"{norm}" + (" (the training set's /normalization/mean and /std in the checkpoint)" if norm == "feature"
                           else " (each sequence by its own mean and std)" if norm == "series" else "")
              + "; RaggedLSTMClassifier in tools/torch_model.py is this model")


if __name__ == "__main__":
    main()
