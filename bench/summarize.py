#!/usr/bin/env python3
"""Side-by-side table of bench/run_h200.sh's results (ragtrain, PyTorch eager, cuDNN floor) against the targets.
usage: summarize.py WORK_DIR [SUMMARY.json]"""
import json
import os
import re
import sys

TARGET_SEQ_S = {50: 5500.0, 256: 2800.0}
FLOOR_MARGIN = 1.15   # H=50: ragtrain's step time within 15% of the cuDNN floor


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def chosen_algorithm(log_path):
    try:
        with open(log_path) as f:
            m = re.search(r"LSTM algorithm (\w+)", f.read())
        return m.group(1) if m else "?"
    except OSError:
        return "?"


def main():
    work = sys.argv[1]
    rows, out = [], {}
    print("# H  | ragtrain seq/s  us/step  algorithm              | PyTorch seq/s  speed-up | cuDNN floor us/seq (graph)"
          "  ragtrain/floor | targets")
    for h in (50, 256):
        r = load(os.path.join(work, f"ragtrain_h{h}.json"))
        ng = load(os.path.join(work, f"ragtrain_nographs_h{h}.json"))
        t = load(os.path.join(work, f"torch_h{h}.json"))
        fl = load(os.path.join(work, f"floor_h{h}.json"))
        algo = chosen_algorithm(os.path.join(work, f"ragtrain_h{h}.log"))
        rs = r["sequences_per_second"] if r else float("nan")
        rus = r["us_per_step"] if r else float("nan")
        ts = t["sequences_per_second"] if t else float("nan")
        floor_us = fl["floor_us"] if fl else float("nan")
        floor_algo = fl["best_algorithm"] if fl else "?"
        ratio = rus / floor_us if fl and r else float("nan")
        ok_seq = rs >= TARGET_SEQ_S[h]
        verdict = [f"seq/s >= {TARGET_SEQ_S[h]:.0f}: {'MET' if ok_seq else 'MISSED (%.1f%% short)' % (100 * (1 - rs / TARGET_SEQ_S[h]))}"]
        ok_floor = None
        if h == 50:
            ok_floor = ratio <= FLOOR_MARGIN
            verdict.append(f"within 15% of floor: {'MET' if ok_floor else 'MISSED'} ({100 * (ratio - 1):+.1f}%)")
        print(f"  {h:<4}| {rs:13.1f} {rus:8.1f}  {algo:22s} | {ts:13.1f} {rs / ts:8.1f}x | {floor_us:10.1f} ({floor_algo})"
              f" {ratio:8.3f}       | {'; '.join(verdict)}")
        if ng:
            print(f"      (ragtrain without CUDA graphs: {ng['sequences_per_second']:.1f} seq/s, {ng['us_per_step']:.1f} us/step)")
        if r and r.get("phase_us_per_step_rank0"):
            print("      phases (us/step): " + ", ".join(f"{k} {v:.1f}" for k, v in r["phase_us_per_step_rank0"].items()))
        if fl:
            print("      floor by algorithm (us/seq plain / graph): " + ", ".join(
                f"{k} {v['plain_us']:.1f}/{v['graph_us']:.1f}" if v else f"{k} unsupported"
                for k, v in fl["algorithms"].items()))
        out[str(h)] = {"ragtrain": r, "ragtrain_no_graphs": ng, "torch": t, "floor": fl, "algorithm": algo,
                       "ratio_to_floor": ratio, "target_seq_s": TARGET_SEQ_S[h], "met_seq_s": ok_seq,
                       "met_floor": ok_floor}
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
