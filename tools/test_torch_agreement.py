#!/usr/bin/env python3
"""PyTorch agreement test (issues 7, 13): ragtrain and nn.LSTM + nn.Linear, trained from the same weights on the
same sequence order at batch one, must follow the same loss trajectory (100 steps: 1e-4 relative with SGD, 1e-3 with
Adam), on ragtrain's CPU and GPU backends; PyTorch's predictions with ragtrain's final weights must equal
`ragtrain predict`. Two models: 2 layers reading the last step, and 2 bidirectional layers mean-pooled (dropout 0;
tools/torch_model.py's RaggedLSTMClassifier, the one PyTorch definition of the model, pools the same way). Runs where torch, h5py and numpy are installed:

  tools/test_torch_agreement.py --bin build/bin/ragtrain --out RESULTS_DIR [--devices cpu,cuda] [--models uni,bidi_mean]

Exit 0 when every check passes; prints one line per check and writes RESULTS_DIR/torch_agreement.json.
"""
import argparse
import csv
import json
import os
import subprocess
import sys

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_interop import model_of_checkpoint, read_checkpoint, write_checkpoint  # noqa: E402
from torch_model import RaggedLSTMClassifier  # noqa: E402

# name -> (ragtrain options, bidirectional, pool)
MODELS = {"uni": (["--pool", "last"], False, "last"), "bidi_mean": (["--bidirectional", "--pool", "mean"], True, "mean")}


def sh(cmd):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def load(path):
    with h5py.File(path, "r") as f:
        return f["features"][...], f["offsets"][...], f["labels"][...]


def torch_run(init_state, pool, data, order, opt_name, lr, device):
    feats, offs, labels = data
    model = RaggedLSTMClassifier.from_state_dict({k: torch.from_numpy(v) for k, v in init_state.items()},
                                                 pool=pool).to(device)
    opt = (torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9) if opt_name == "sgd"
           else torch.optim.Adam(model.parameters(), lr=lr))
    losses = []
    for i in order:
        x = torch.from_numpy(feats[offs[i]:offs[i + 1]]).to(device)
        y = torch.tensor([int(labels[i])], device=device)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model.one(x).unsqueeze(0), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses), model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bin/ragtrain")
    ap.add_argument("--out", required=True)
    ap.add_argument("--devices", default="cpu,cuda")
    ap.add_argument("--models", default="uni,bidi_mean", help="comma-separated: " + ",".join(MODELS))
    args = ap.parse_args()
    torch.backends.cudnn.allow_tf32 = False          # FP32 everywhere, like ragtrain
    torch.backends.cuda.matmul.allow_tf32 = False
    os.makedirs(args.out, exist_ok=True)
    work = os.path.join(args.out, "work")
    os.makedirs(work, exist_ok=True)
    train, val = os.path.join(work, "train.h5"), os.path.join(work, "val.h5")
    common = ["--features", "8", "--min-length", "5", "--max-length", "40", "--classes", "4", "--quiet"]
    sh([args.bin, "gen", "--out", train, "--sequences", "100", "--seed", "1"] + common)
    sh([args.bin, "gen", "--out", val, "--sequences", "50", "--seed", "2"] + common)
    data, vdata = load(train), load(val)

    results, ok = [], True
    for model_name in args.models.split(","):
        model_opts, bidirectional, pool = MODELS[model_name]
        torch.manual_seed(0)
        init = RaggedLSTMClassifier(8, 16, 2, 4, bidirectional, pool=pool)
        init_state = {k: v.detach().numpy().copy() for k, v in init.state_dict().items()
                      if k.startswith(("lstm.", "fc."))}   # the weights: this model normalises nothing
        init_ckpt = os.path.join(work, f"init_{model_name}.h5")
        write_checkpoint(init_state, init_ckpt, "classification", pool=pool)
        for device in args.devices.split(","):
            ok &= check_device(args, work, train, val, data, vdata, init_state, init_ckpt, model_name, model_opts, pool,
                               device, results)
    json.dump(results, open(os.path.join(args.out, "torch_agreement.json"), "w"), indent=2)
    print(("PASSED" if ok else "FAILED") + f": {sum(r['passed'] for r in results)}/{len(results)} checks")
    sys.exit(0 if ok else 1)


def check_device(args, work, train, val, data, vdata, init_state, init_ckpt, model_name, model_opts, pool, device,
                 results):
    """Both optimizers on one device for one model: the loss trajectory, then the predictions."""
    ok = True
    for opt_name, lr, tol in (("sgd", 0.05, 1e-4), ("adam", 0.003, 1e-3)):
        run = os.path.join(work, f"{model_name}_{device}_{opt_name}")
        sh(["mpirun", "-np", "1", args.bin, "train", "--data", train, "--init-from", init_ckpt, "--out", run,
            "--device", device, "--hidden", "16", "--layers", "2", "--optimizer", opt_name, "--lr", str(lr), "--momentum", "0.9", "--epochs", "1",
            "--batch-per-rank", "1", "--log-every", "1", "--write-order", "--schedule", "random",
            "--normalize", "none", "--lr-decay", "none", "--clip", "0", "--quiet"]
           + model_opts)
        order = [int(r["sequence"]) for r in csv.DictReader(open(os.path.join(run, "order.csv")))]
        steps = [r for r in map(json.loads, open(os.path.join(run, "metrics.jsonl"))) if r["event"] == "step"]
        ours = np.array([r["loss"] for r in steps])
        theirs, model = torch_run(init_state, pool, data, order, opt_name, lr, "cuda" if device == "cuda" else "cpu")
        rel = float(np.max(np.abs(ours - theirs) / np.abs(theirs)))
        passed = len(ours) == len(theirs) == 100 and rel <= tol
        ok &= passed
        line = dict(check=f"loss trajectory {model_name} {device} {opt_name}", steps=len(ours), max_rel_diff=rel, tol=tol,
                    first=[float(ours[0]), float(theirs[0])], last=[float(ours[-1]), float(theirs[-1])],
                    passed=passed)
        results.append(line)
        print(json.dumps(line), flush=True)

        # Predictions: ragtrain's final weights in PyTorch vs `ragtrain predict`.
        pred_csv = os.path.join(run, "pred.csv")
        sh(["mpirun", "-np", "1", args.bin, "predict", "--checkpoint", os.path.join(run, "checkpoint.h5"),
            "--data", val, "--out", pred_csv, "--device", device, "--quiet"])
        model = model_of_checkpoint(*read_checkpoint(os.path.join(run, "checkpoint.h5"))).to(model.fc.weight.device)
        model.eval()
        feats, offs, _ = vdata
        rows = list(csv.DictReader(open(pred_csv)))
        worst, same = 0.0, 0
        with torch.no_grad():
            for r in rows:
                i = int(r["index"])
                dev = "cuda" if device == "cuda" else "cpu"
                p = torch.softmax(model.one(torch.from_numpy(feats[offs[i]:offs[i + 1]]).to(dev)), 0).cpu().numpy()
                ours_p = np.array([float(r[f"p_{j}"]) for j in range(len(p))])
                worst = max(worst, float(np.max(np.abs(ours_p - p))))
                same += int(r["predicted"]) == int(np.argmax(p))
        passed = same == len(rows) and worst < 1e-5
        ok &= passed
        line = dict(check=f"predict {model_name} {device} {opt_name}", sequences=len(rows), same_class=same,
                    max_abs_prob_diff=worst, passed=passed)
        results.append(line)
        print(json.dumps(line), flush=True)
    return ok


if __name__ == "__main__":
    main()
