#!/usr/bin/env python3
"""PyTorch <-> ragtrain checkpoints.

  torch_interop.py export STATE.pt CKPT.h5 [--pool last|mean|max] [--task classification|regression] [--force]
                                                     # state_dict -> ragtrain checkpoint
  torch_interop.py import CKPT.h5|RUN_DIR STATE.pt [--force]
                                                     # ragtrain checkpoint -> state_dict of RaggedLSTMClassifier

As ragtrain's own commands: an error exits 2 with a hint; RUN_DIR means its best.h5, else its checkpoint.h5; the
output is written whole or not at all (a temporary file renamed); an output that is the input or a ragtrain
checkpoint is refused, another existing file is replaced only with --force.

A ragtrain checkpoint keeps every tensor under its PyTorch name and shape in the group /params
(lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0, [the same with _reverse when
bidirectional,] ..., fc.weight, fc.bias), the model's options as attributes (pool, dropout, head_dropout, task,
class_names) and the input normalisation in /normalization (attribute mode; mean and std for `feature`).
`import` writes the state_dict of ragtrain's model as tools/torch_model.py defines it (RaggedLSTMClassifier): those
tensors, the normalisation (norm.mean, norm.std, norm._extra_state: the mode) and the options (_extra_state), so
that RaggedLSTMClassifier.from_state_dict(torch.load(STATE.pt)) applied to RAW features predicts what
`ragtrain predict` does.
`export` takes such a state_dict (options and normalisation go into the checkpoint; --pool, if given, must agree),
or a plain one of a module with attributes `lstm` (nn.LSTM, batch_first or not, bidirectional or not) and `fc`
(nn.Linear): then no normalisation, no dropout, and the pooling --pool says, by default ragtrain's (mean; a head
that reads h_n is --pool last). `ragtrain train --init-from CKPT.h5` starts from an exported file, `ragtrain
eval`/`predict --checkpoint CKPT.h5` use it as it is.
Needs numpy, h5py and torch.
"""
import argparse
import os
import sys
import zlib

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_model import POOLS, ModelStateError, RaggedLSTMClassifier, shape_of  # noqa: E402

DEFAULT_POOL = "mean"   # ragtrain train's --pool default


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
    try:
        s = shape_of(state)
    except ModelStateError as e:
        fail(e.what, e.hint)
    return s["input_size"], s["hidden"], s["layers"], s["outputs"], s["bidirectional"]


def param_names(layers, bidirectional=False):
    """The flat order of ragtrain's parameters: nn.LSTM's own (per layer: forward, then _reverse), then fc."""
    names = []
    for l in range(layers):
        for suffix in ("", "_reverse") if bidirectional else ("",):
            names += [f"lstm.weight_ih_l{l}{suffix}", f"lstm.weight_hh_l{l}{suffix}", f"lstm.bias_ih_l{l}{suffix}",
                      f"lstm.bias_hh_l{l}{suffix}"]
    return names + ["fc.weight", "fc.bias"]


def _write_floats(group, name, values):
    data = np.ascontiguousarray(np.asarray(values, dtype="<f4"))
    ds = group.create_dataset(name, data=data)
    ds.attrs["crc32"] = np.int64(zlib.crc32(data.tobytes()))


def write_checkpoint(state, path, task, class_names=None, pool=DEFAULT_POOL, dropout=0.0, head_dropout=0.0,
                     normalization="none", mean=None, std=None):
    """Writes a ragtrain checkpoint (format ragtrain-checkpoint v1) from a dict of name -> numpy array (the
    lstm.* and fc.* tensors), the model's options and its input normalisation (mean and std for `feature`)."""
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
        f.attrs["dropout"] = np.float64(dropout)
        f.attrs["head_dropout"] = np.float64(head_dropout)
        f.attrs["config"] = "# exported from PyTorch by tools/torch_interop.py\n"
        f.attrs["optimizer"] = ""
        if class_names:
            f.attrs["class_names"] = list(class_names)
        f.attrs["checksum"] = "crc32: every dataset's attribute crc32 = zlib.crc32 of its little-endian float32 bytes"
        g = f.create_group("params")
        for name in param_names(layers, bidirectional):
            _write_floats(g, name, state[name])
        if normalization != "none":   # as ragtrain writes it: the mode, and the statistics of `feature`
            n = f.create_group("normalization")
            n.attrs["mode"] = normalization
            if normalization == "feature":
                _write_floats(n, "mean", mean)
                _write_floats(n, "std", std)


def _text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def _checked_floats(path, ds, name):
    data = np.asarray(ds[...], dtype="<f4")
    if "crc32" in ds.attrs and int(ds.attrs["crc32"]) != zlib.crc32(data.tobytes()):
        fail(f"{path}: {name} fails its checksum", "the file is damaged; use another checkpoint of the run")
    return data


def read_checkpoint(path):
    """Returns (state dict of numpy arrays, attributes) of a ragtrain checkpoint, checksums verified. The attributes
    gain `normalization` (none | feature | series, as ragtrain reads it) and, for feature, `mean` and `std`."""
    with h5py.File(path, "r") as f:
        if f.attrs.get("format") not in ("ragtrain-checkpoint", b"ragtrain-checkpoint"):
            fail(f"{path} is not a ragtrain checkpoint", "name a checkpoint ragtrain wrote (a run folder's best.h5 or checkpoint.h5)")
        attrs = {k: f.attrs[k] for k in f.attrs}
        state = {}
        bidirectional = int(attrs.get("bidirectional", 0)) == 1   # absent in older files: unidirectional
        for name in param_names(int(attrs["layers"]), bidirectional):
            state[name] = _checked_floats(path, f["params"][name], f"params/{name}")
        # Files from before the modes hold /normalization (mean and std) without `mode`: feature.
        attrs["normalization"] = "none"
        if "normalization" in f:
            attrs["normalization"] = _text(f["normalization"].attrs.get("mode", "feature"))
        if attrs["normalization"] == "feature":
            for key in ("mean", "std"):
                if key not in f["normalization"]:
                    fail(f"{path}: normalization/{key} is missing (mode feature)", "the file is damaged; retrain")
                attrs[key] = _checked_floats(path, f["normalization"][key], f"normalization/{key}")
        return state, attrs


def model_of_checkpoint(state, attrs):
    """RaggedLSTMClassifier holding a checkpoint's weights, options and normalisation (read_checkpoint's output)."""
    import torch
    input_size, hidden, layers, outputs, bidirectional = lstm_shape(state)
    try:
        model = RaggedLSTMClassifier(input_size, hidden, layers, outputs, bidirectional,
                                     float(attrs.get("dropout", 0.0)), float(attrs.get("head_dropout", 0.0)),
                                     _text(attrs.get("pool", "last")),   # absent in older files: the last step
                                     attrs["normalization"], attrs.get("mean"), attrs.get("std"),
                                     _text(attrs.get("task", "classification")),
                                     [_text(c) for c in attrs.get("class_names", [])])
    except (ModelStateError, ValueError) as e:
        fail(f"the checkpoint's model options do not make ragtrain's model: {e}", "the file is damaged")
    with torch.no_grad():
        for name, value in state.items():
            model.get_parameter(name).copy_(torch.from_numpy(value))
    return model


def load_state(source):
    """The state_dict of a .pt file, without DistributedDataParallel's "module." key prefix."""
    import torch
    try:
        sd = torch.load(source, map_location="cpu", weights_only=True)   # tensors and plain values: runs no code
    except Exception as e:   # pickle, zip or torch errors: the file is not a saved state_dict
        fail(f"{source} is not a PyTorch state_dict file ({e})", "save one with torch.save(model.state_dict(), PATH)")
    if not isinstance(sd, dict):
        fail(f"{source} holds a {type(sd).__name__}, not a state_dict", "save model.state_dict(), not the model")
    if sd and all(k.startswith("module.") for k in sd):
        print("torch_interop.py: the keys' 'module.' prefix (DistributedDataParallel, DataParallel) is dropped",
              file=sys.stderr)
        sd = {k[len("module."):]: v for k, v in sd.items()}
    return sd


def export(args):
    source = input_file(args.state)
    check_output(args.checkpoint, source, args.force)
    sd = load_state(source)
    lstm_shape(sd)   # a state_dict of something else: said in ragtrain's terms first
    try:
        model = RaggedLSTMClassifier.from_state_dict(sd, pool=args.pool)
    except ModelStateError as e:
        fail(f"{source}: {e.what}", e.hint)
    opts = model.options()
    if args.task is not None and args.task != opts["task"] and "_extra_state" in sd:
        fail(f"{source} holds a {opts['task']} model, not {args.task}", "leave --task out: the state_dict says it")
    task = args.task or opts["task"]
    norm = model.norm
    state = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items() if k.startswith(("lstm.", "fc."))}
    write_atomically(args.checkpoint, lambda tmp: write_checkpoint(
        state, tmp, task, class_names=opts["class_names"], pool=opts["pool"], dropout=opts["dropout"],
        head_dropout=opts["head_dropout"], normalization=norm.mode, mean=norm.mean.cpu().numpy(), std=norm.std.cpu().numpy()))
    said = ("the state_dict's" if "_extra_state" in sd else "--pool's" if args.pool else
            "ragtrain's default; a head that reads h_n is --pool last")
    print(f"wrote {args.checkpoint}: pool {opts['pool']} ({said}), --normalize {norm.mode}, task {task}")


def import_(args):
    import torch
    source = input_file(args.checkpoint)
    check_output(args.state, source, args.force)
    try:
        state, attrs = read_checkpoint(source)
    except OSError as e:
        fail(f"{source} is not an HDF5 file ({e})", "name a checkpoint ragtrain wrote, or a run folder")
    model = model_of_checkpoint(state, attrs)
    write_atomically(args.state, lambda tmp: torch.save(model.state_dict(), tmp))
    norm = model.norm.mode
    print(f"wrote {args.state} from {source}: pool {model.pool}, --normalize {norm}"
          + (" (the training set's mean and std as norm.mean, norm.std)" if norm == "feature" else
             " (each sequence by its own mean and std)" if norm == "series" else "")
          + "; RaggedLSTMClassifier.from_state_dict (tools/torch_model.py) takes raw features")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export", help="PyTorch state_dict (.pt) -> ragtrain checkpoint (.h5)")
    ex.add_argument("state")
    ex.add_argument("checkpoint")
    ex.add_argument("--task", choices=["classification", "regression"],
                    help="the state_dict's, else classification")
    ex.add_argument("--pool", choices=POOLS,
                    help=f"what the head reads: the state_dict's, else ragtrain's default ({DEFAULT_POOL})")
    im = sub.add_parser("import", help="ragtrain checkpoint (.h5) -> PyTorch state_dict (.pt)")
    im.add_argument("checkpoint")
    im.add_argument("state")
    for p in (ex, im):
        p.add_argument("--force", action="store_true", help="replace an existing output file (never a checkpoint)")
    args = ap.parse_args(argv)
    if args.cmd == "export":
        export(args)
    else:
        import_(args)


if __name__ == "__main__":
    main()
