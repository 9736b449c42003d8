#!/usr/bin/env python3
"""PyTorch reference for `ragtrain bench`: ragtrain's model (nn.LSTM + nn.Linear, tools/torch_model.py), Adam, the
idiomatic eager loop with every sequence already on the GPU; timed after a warm-up. Batch one feeds each (1, T, F) sequence as it is; --batch K > 1 takes K
sequences of a shuffled order per step (as a DataLoader with shuffle=True would) through pad_sequence +
pack_padded_sequence(enforce_sorted=False), and the head reads h_n, each sequence's state at its own last step.
Reads the same v1 file `ragtrain gen` writes."""
import time

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence

from torch_setup import bench_arguments, load_on_device, model_and_adam, step_order, write_result


def main():
    a = bench_arguments(__doc__, steps=1000, warmup=100, warmup_help="untimed steps first", bidirectional=True)

    dev = torch.device("cuda")
    data = load_on_device(a.data, dev)
    n, nf, classes, xs, ys = data.n, data.features, data.classes, data.xs, data.ys
    lens = torch.from_numpy(data.lens)
    model, opt = model_and_adam(data, a.hidden, a.layers, a.lr, a.seed, dev, bidirectional=a.bidirectional)
    lstm, fc = model.lstm, model.fc   # the step below is the eager idiom itself, not the model's forward
    k = a.batch
    _, batch_at = step_order(n, a.seed, k)

    def step(idx):
        opt.zero_grad(set_to_none=True)
        if k == 1 and not a.bidirectional:
            out, _ = lstm(xs[idx[0]].unsqueeze(0))
            h_last = out[:, -1]
        elif k == 1:   # bidirectional: h_n, the forward's last step and the reverse's after reading the first
            _, (h_n, _) = lstm(xs[idx[0]].unsqueeze(0))
            h_last = torch.cat((h_n[-2], h_n[-1]), dim=1)
        else:
            padded = pad_sequence([xs[i] for i in idx], batch_first=True)
            packed = pack_padded_sequence(padded, lens[idx], batch_first=True, enforce_sorted=False)
            _, (h_n, _) = lstm(packed)
            # (K, D H): each sequence at its own last step (the reverse direction: after its first), in batch order
            h_last = torch.cat((h_n[-2], h_n[-1]), dim=1) if a.bidirectional else h_n[-1]
        y = ys[idx[0]:idx[0] + 1] if k == 1 else ys[torch.from_numpy(idx).to(dev)]
        loss = F.cross_entropy(fc(h_last), y)
        loss.backward()
        opt.step()
        return loss

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
        "benchmark": "torch_reference", "hidden": a.hidden, "layers": a.layers, "bidirectional": a.bidirectional,
        "features": nf, "classes": classes,
        "batch": k, "sequences_in_file": n, "steps": a.steps, "warmup": a.warmup, "seconds": secs,
        "sequences_per_second": a.steps * k / secs, "timesteps_per_second": timesteps / secs,
        "us_per_step": 1e6 * secs / a.steps, "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(), "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "device": torch.cuda.get_device_name(0),
    }
    print(f"# torch reference: H={a.hidden} K={k}{' bidirectional' if a.bidirectional else ''} {res['sequences_per_second']:.1f} seq/s, {res['us_per_step']:.1f} us/step "
          f"(torch {torch.__version__}, cuDNN {res['cudnn']}, allow_tf32={res['cudnn_allow_tf32']})", flush=True)
    write_result(res, a.out)


if __name__ == "__main__":
    main()
