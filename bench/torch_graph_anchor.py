#!/usr/bin/env python3
"""The PyTorch CUDA-graph anchor of the headline table: ragtrain's model (nn.LSTM + nn.Linear, tools/torch_model.py),
cross-entropy, Adam(capturable=True), the WHOLE training step (forward, loss, backward, optimizer) captured in one
CUDA graph per sequence length (batch one) or per padded length (--batch K > 1: the K sequences zero-padded at the
end to the batch's longest, the head reading each sequence's own last step, which is exact because the LSTM is
causal), every sequence already on the GPU (padded once to the file's longest). A step writes its K positions into
the graphs' static index tensor and replays the graph of its (padded) length, which gathers its input, runs the step
and updates the weights: what a PyTorch user who knows the CUDA-graph recipe gets, beside the eager loop of
bench/torch_reference.py. Reads the v1 file `ragtrain gen` writes. --dtype bfloat16 runs the whole model, its inputs
and Adam in bfloat16 (cuDNN's bf16 LSTM on the tensor cores): PyTorch's fastest form of the step."""
import time

import numpy as np
import torch
import torch.nn.functional as F

from torch_setup import bench_arguments, load_on_device, model_and_adam, step_order, write_result


def main():
    ap = bench_arguments(__doc__, steps=3000, warmup=200, warmup_help="untimed steps after the captures",
                         layers=False, parse=False)
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                    help="the model's, its inputs' and Adam's dtype")
    a = ap.parse_args()
    dtype = getattr(torch, a.dtype)

    dev = torch.device("cuda")
    data = load_on_device(a.data, dev)
    n, nf, classes, lens, xs, ys = data.n, data.features, data.classes, data.lens, data.xs, data.ys
    k = a.batch
    model, opt = model_and_adam(data, a.hidden, 1, a.lr, a.seed, dev, capturable=True, dtype=dtype)
    lstm, fc = model.lstm, model.fc   # the captured step reads the padded batch itself (below)
    order, batch_at = step_order(n, a.seed, k)

    # Every sequence zero-padded to the file's longest, on the GPU; a step only writes its K positions into one
    # static index tensor, and the graph of its padded length T gathers x, the last-step indices and the labels.
    tmax = int(lens.max())
    padded = torch.zeros(n, tmax, nf, device=dev, dtype=dtype)
    for i in range(n):
        padded[i, :lens[i]] = xs[i]
    lens_dev = torch.from_numpy(lens).to(dev)
    order_dev = torch.from_numpy(np.concatenate([order, order])).to(dev)   # wrap-around slices stay views
    idx = torch.zeros(k, dtype=torch.long, device=dev)
    rows = torch.arange(k, device=dev)

    def body(T):
        opt.zero_grad(set_to_none=False)   # the .grad tensors stay where every graph captured them
        x = padded[:, :T].index_select(0, idx)
        last = lens_dev.index_select(0, idx) - 1
        y = ys.index_select(0, idx)
        out, _ = lstm(x)
        loss = F.cross_entropy(fc(out[rows, last]), y)
        loss.backward()
        opt.step()
        return loss

    def load(s):
        start = (s * k) % n
        idx.copy_(order_dev[start:start + k])
        return int(lens[batch_at(s)].max())

    # Eager warm-up on a side stream (allocates the grads and Adam's state, initialises cuDNN), as the recipe asks.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for s in range(3):
            body(load(s))
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    graphs = {}
    t_cap = time.perf_counter()

    def replay(s):
        T = load(s)
        if T not in graphs:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):   # a private pool each: replays come in any order
                body(T)
            graphs[T] = g
        graphs[T].replay()

    # Capture every length the timed run will meet first (outside the timing), then warm up by replaying.
    for s in range(a.warmup + a.steps):
        T = int(lens[batch_at(s)].max())
        if T not in graphs:
            replay(s)
    capture_s = time.perf_counter() - t_cap
    for s in range(a.warmup):
        replay(s)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for s in range(a.steps):
        replay(a.warmup + s)
    torch.cuda.synchronize()
    secs = time.perf_counter() - t0

    res = {
        "benchmark": "torch_graph_anchor", "hidden": a.hidden, "features": nf, "classes": classes, "batch": k,
        "sequences_in_file": n, "steps": a.steps, "warmup": a.warmup, "graphs": len(graphs),
        "capture_seconds": capture_s, "seconds": secs, "sequences_per_second": a.steps * k / secs,
        "us_per_step": 1e6 * secs / a.steps, "dtype": a.dtype, "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(), "device": torch.cuda.get_device_name(0),
    }
    print(f"# torch CUDA-graph anchor ({a.dtype}): H={a.hidden} K={k} {res['sequences_per_second']:.1f} seq/s, "
          f"{res['us_per_step']:.1f} us/step ({len(graphs)} graphs, captured in {capture_s:.1f} s; torch "
          f"{torch.__version__}, cuDNN {res['cudnn']})", flush=True)
    write_result(res, a.out)


if __name__ == "__main__":
    main()
