#!/usr/bin/env python3
"""PyTorch DDP reference for the multi-GPU comparison (issue 8): ragtrain's model (nn.LSTM + nn.Linear,
tools/torch_model.py, reading the last step), Adam, batch one per GPU per step, DistributedDataParallel over NCCL,
the idiomatic eager loop with every sequence of the rank already on its GPU; timed after a warm-up. Launch with
    python3 -m torch.distributed.run --standalone --nproc_per_node P bench/ddp_reference.py --data FILE.h5 --out R.json
(torchrun is the same launcher). Reads the same v1 file `ragtrain gen` writes (/features, /offsets, /labels).

Sharding is what DistributedSampler(shuffle=True) does, kept fixed for the run: a seeded permutation of the file dealt
round-robin to the ranks (rank r owns positions r, r+P, ...), each rank reshuffling its own sequences every epoch. That
is ragtrain's `--schedule random` (sequences dealt to fixed columns, every column shuffled on its own), so the length
imbalance between the ranks of a step is the same in kind.

Per-rank wait: a DDP communication hook wraps the default all-reduce hook and records one CUDA event when DDP hands
the gradient bucket to NCCL (on the stream the backward ran on: this rank's gradients are complete) and one when the
all-reduce has completed (in the future's callback, on a stream synchronised with NCCL's kernel). The time between
them is what this rank spends in the all-reduce: waiting for the slowest rank's gradients plus the transfer itself,
the same quantity as ragtrain's "allreduce" phase. wait_fraction = that time / the rank's timed seconds.
--device cpu runs the same loop on the CPU over gloo (host clocks instead of events), for testing the script on a
machine without GPUs."""
import argparse
import json
import os
import sys
import time

import h5py
import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from torch_model import RaggedLSTMClassifier  # noqa: E402


class AllreduceTimer:
    """Times every all-reduce DDP launches through its communication hook. On the GPU with events pairs (resolved
    after the timed loop, so the loop never synchronises for them); on the CPU with the host clock."""

    def __init__(self, device):
        self.device = device
        self.cuda = device.type == "cuda"
        self.on = False
        self.pairs = []   # (start, end) events or host times, timed steps only
        self.calls = 0    # hook calls while timing (buckets x steps)

    def hook(self, state, bucket):
        if not self.on:
            return default_hooks.allreduce_hook(state, bucket)
        self.calls += 1
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)
            # On the stream the backward ran on (NCCL's stream waits on it too): the bucket's gradients are complete.
            start.record(torch.cuda.current_stream(self.device))
        else:
            start = time.perf_counter()
        fut = default_hooks.allreduce_hook(state, bucket)
        pair = [start, None]
        self.pairs.append(pair)

        def done(f):
            if self.cuda:
                end = torch.cuda.Event(enable_timing=True)
                # On the stream the callback runs on, which waits for NCCL's kernel: the all-reduce has completed.
                end.record(torch.cuda.current_stream(self.device))
                pair[1] = end
            else:
                pair[1] = time.perf_counter()
            return f.value()

        return fut.then(done)

    def seconds(self):
        """Total seconds in the all-reduce; NaN if the events cannot be read (the timing is then left out, not the
        benchmark)."""
        total = 0.0
        try:
            for start, end in self.pairs:
                if end is None:
                    return float("nan")
                total += start.elapsed_time(end) / 1e3 if self.cuda else end - start
        except RuntimeError as e:
            print(f"# all-reduce timing unavailable: {e}", flush=True)
            return float("nan")
        return total


def spread(values):
    v = sorted(values)
    return {"min": v[0], "median": v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2]),
            "max": v[-1]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="format v1 file (ragtrain gen)")
    ap.add_argument("--hidden", type=int, default=50)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--steps", type=int, default=300, help="timed steps")
    ap.add_argument("--warmup", type=int, default=30, help="untimed steps first (DDP builds its buckets here)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: gloo, for testing the script")
    ap.add_argument("--out", help="JSON file to write (rank 0)")
    a = ap.parse_args()

    cuda = a.device == "cuda"
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local_rank)
        dev = torch.device("cuda", local_rank)
    else:
        dev = torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    with h5py.File(a.data, "r") as f:
        offsets = np.asarray(f["offsets"], dtype=np.int64)    # (N + 1)
        labels = np.asarray(f["labels"], dtype=np.int64)      # (N)
        n = len(offsets) - 1
        nf = f["features"].shape[1]
        classes = int(labels.max()) + 1
        # This rank's shard: the DistributedSampler split of one seeded permutation, read sequence by sequence.
        mine = np.random.default_rng(a.seed).permutation(n)[rank::world]
        feats = f["features"]
        xs = [torch.from_numpy(np.asarray(feats[offsets[i]:offsets[i + 1]], dtype=np.float32)).to(dev) for i in mine]
    if not xs:
        raise SystemExit(f"rank {rank}: no sequences ({n} in {a.data} for {world} ranks)")
    ys = torch.from_numpy(labels[mine]).to(dev)
    lens = np.diff(offsets)[mine]

    torch.manual_seed(a.seed)   # the same initial weights everywhere (DDP broadcasts rank 0's anyway)
    # ragtrain's model (tools/torch_model.py), the head reading the last step; a (1, T, F) tensor takes its
    # unpadded path. Its buffers (the normalisation's statistics, unused here) never change: broadcasting them
    # every step, DDP's default, would add a collective the comparison is not about.
    model = RaggedLSTMClassifier(nf, a.hidden, a.layers, classes, pool="last").to(dev)
    ddp = DDP(model, device_ids=[local_rank] if cuda else None, broadcast_buffers=False)
    timer = AllreduceTimer(dev)
    ddp.register_comm_hook(None, timer.hook)
    opt = torch.optim.Adam(ddp.parameters(), lr=a.lr)

    # Every rank walks its own shard, reshuffled each epoch; all ranks take the same number of steps (DDP needs it).
    rng = np.random.default_rng([a.seed, rank])
    order, pos = rng.permutation(len(xs)), 0

    def next_index():
        nonlocal order, pos
        if pos == len(order):
            order, pos = rng.permutation(len(xs)), 0
        pos += 1
        return order[pos - 1]

    losses = []   # device tensors: no host sync inside the loop

    def step():
        i = next_index()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ddp(xs[i].unsqueeze(0)), ys[i:i + 1])
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        return int(lens[i])

    def sync():
        if cuda:
            torch.cuda.synchronize()

    for _ in range(a.warmup):
        step()
    sync()
    dist.barrier()   # every rank starts the clock together
    sync()
    timer.on = True
    t0 = time.perf_counter()
    timesteps = 0
    for _ in range(a.steps):
        timesteps += step()
    sync()
    secs = time.perf_counter() - t0
    timer.on = False
    ar_s = timer.seconds()

    # Validity as ragtrain bench judges it: the mean loss of the last tenth of the steps below that of the first.
    lv = torch.stack(losses).double().cpu().numpy()
    w = max(1, len(lv) // 10)
    mine_stats = torch.tensor([secs, ar_s, timer.calls, timesteps, lv[:w].mean(), lv[-w:].mean(), len(xs)],
                              dtype=torch.float64, device=dev)
    every = [torch.zeros_like(mine_stats) for _ in range(world)]
    dist.all_gather(every, mine_stats)
    rows = [t.cpu().tolist() for t in every]
    if rank == 0:
        slowest = max(r[0] for r in rows)
        seqs = world * a.steps
        per_rank = [{"rank": k, "seconds": r[0], "allreduce_s": r[1], "allreduce_us_per_step": 1e6 * r[1] / a.steps,
                     "compute_us_per_step": 1e6 * (r[0] - r[1]) / a.steps, "wait_fraction": r[1] / r[0],
                     "hook_calls_per_step": r[2] / a.steps, "timesteps": r[3], "shard_sequences": int(r[6])}
                    for k, r in enumerate(rows)]
        first = float(np.mean([r[4] for r in rows]))
        last = float(np.mean([r[5] for r in rows]))
        res = {
            "benchmark": "torch_ddp_reference", "world_size": world, "batch_per_rank": 1, "hidden": a.hidden,
            "layers": a.layers, "features": int(nf), "classes": classes, "sequences_in_file": int(n),
            "steps": a.steps, "warmup": a.warmup, "seconds": slowest, "sequences_per_second": seqs / slowest,
            "timesteps_per_second": sum(r[3] for r in rows) / slowest, "us_per_step": 1e6 * slowest / a.steps,
            "wait_fraction": spread([p["wait_fraction"] for p in per_rank]),
            "allreduce_us_per_step": spread([p["allreduce_us_per_step"] for p in per_rank]),
            "compute_us_per_step": spread([p["compute_us_per_step"] for p in per_rank]),
            "per_rank": per_rank, "loss_first_tenth": first, "loss_last_tenth": last,
            "valid": bool(np.isfinite(lv).all() and last < first),
            "torch": torch.__version__, "backend": dist.get_backend(),
            "cudnn": torch.backends.cudnn.version() if cuda else None,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
            "device": torch.cuda.get_device_name(local_rank) if cuda else "cpu",
        }
        print(f"# torch DDP reference: P={world} H={a.hidden} batch one per rank: {res['sequences_per_second']:.1f} seq/s, "
              f"{res['us_per_step']:.1f} us/step, all-reduce {res['allreduce_us_per_step']['median']:.1f} us/step "
              f"(median rank), wait fraction {res['wait_fraction']['min']:.3f}..{res['wait_fraction']['max']:.3f}, "
              f"loss {first:.4f} -> {last:.4f} (torch {torch.__version__}, {res['backend']})", flush=True)
        if a.out:
            tmp = a.out + ".tmp"
            with open(tmp, "w") as f:
                json.dump(res, f, indent=1)
            os.replace(tmp, a.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
