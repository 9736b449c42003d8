#!/usr/bin/env python3
"""Side-by-side table of bench/run_h200.sh's results (ragtrain at K = 1, 32, 128 sequences per step, PyTorch, the
cuDNN floor of the same batches, per-phase timings) against the targets of issue 4.
usage: summarize.py WORK_DIR [SUMMARY.json]"""
import json
import os
import re
import sys

KS = (1, 32, 128)
TARGET_SEQ_S = {32: 100000.0, 128: 300000.0}   # H=50, whole training step, one H200
FLOOR_MARGIN = 1.10                            # K=1: within 10% of the cuDNN floor
NAN = float("nan")


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def chosen_algorithm(log_path):
    """The algorithm the backend used last (it may measure again at batch K and switch)."""
    try:
        with open(log_path) as f:
            found = re.findall(r"LSTM algorithm (\w+)", f.read())
        return found[-1] if found else "?"
    except OSError:
        return "?"


def floor_row(fl):
    """(best us/step, algorithm/layout, {algo/layout: graph us/step}) of a cudnn_floor JSON."""
    if not fl:
        return NAN, "?", {}
    per = {}
    for algo, r in fl["algorithms"].items():
        for lay in ("padded", "ragged"):
            t = r.get(lay) if r else None
            if t is None:
                continue
            per[f"{algo}/{lay}"] = (t["plain_us"], t["graph_us"]) if t.get("usable") else None
    return fl["floor_us"], f"{fl['best_algorithm']}/{fl.get('best_layout', 'padded')}", per


def main():
    work = sys.argv[1]
    out = {}
    print("# H=50, F=36, 10 classes, lengths 60..130, Adam, one H200; whole training step (ragtrain bench, balanced "
          "schedule) vs PyTorch eager (K>1: pack_padded_sequence) vs cuDNN fwd+bwd floor of the same batches")
    print(f"# {'K':>4} | {'ragtrain seq/s':>14} {'us/step':>8}  {'algorithm':22s} | {'PyTorch seq/s':>13} {'speed-up':>8} |"
          f" {'floor us/step':>13} {'floor seq/s':>11} {'ragtrain/floor':>14} | targets")
    for k in KS:
        r = load(os.path.join(work, f"ragtrain_h50_k{k}.json"))
        t = load(os.path.join(work, f"torch_h50_k{k}.json"))
        fl = load(os.path.join(work, f"floor_h50_k{k}.json"))
        algo = chosen_algorithm(os.path.join(work, f"ragtrain_h50_k{k}.log"))
        rs = r["sequences_per_second"] if r else NAN
        rus = r["us_per_step"] if r else NAN
        ts = t["sequences_per_second"] if t else NAN
        floor_us, floor_what, per = floor_row(fl)
        floor_seq_s = 1e6 * fl["sequences"] / (floor_us * len_batches(fl)) if fl else NAN
        ratio = rus / floor_us if (r and fl) else NAN
        verdict, met = [], {}
        if k == 1:
            met["floor"] = ratio <= FLOOR_MARGIN
            verdict.append(f"within 10% of floor: {'MET' if met['floor'] else 'MISSED'} ({100 * (ratio - 1):+.1f}%)")
        if k in TARGET_SEQ_S:
            met["seq_s"] = rs >= TARGET_SEQ_S[k]
            verdict.append(f">= {TARGET_SEQ_S[k]:,.0f} seq/s: " + (
                "MET" if met["seq_s"] else f"MISSED ({100 * (1 - rs / TARGET_SEQ_S[k]):.1f}% short)"))
        print(f"  {k:>4} | {rs:14.1f} {rus:8.1f}  {algo:22s} | {ts:13.1f} {rs / ts:7.1f}x | {floor_us:13.1f}"
              f" {floor_seq_s:11.1f} {ratio:14.3f} | {'; '.join(verdict)}")
        if r and r.get("phase_us_per_step_rank0"):
            print("         phases (us/step): " + ", ".join(f"{n} {v:.1f}" for n, v in r["phase_us_per_step_rank0"].items()))
        if k == 1:
            ng = load(os.path.join(work, "ragtrain_nographs_h50_k1.json"))
            if ng:
                print(f"         without CUDA graphs: {ng['sequences_per_second']:.1f} seq/s, {ng['us_per_step']:.1f} us/step")
        if per:
            print(f"         floor ({floor_what} best; padding {100 * fl.get('padding_fraction', 0):.2f}%), us/step plain/graph: "
                  + ", ".join(f"{n} {v[0]:.1f}/{v[1]:.1f}" if v else f"{n} refused" for n, v in per.items()))
        out[f"h50_k{k}"] = {"ragtrain": r, "torch": t, "floor": fl, "algorithm": algo, "ratio_to_floor": ratio,
                            "target_seq_s": TARGET_SEQ_S.get(k), "met": met}
    extra = sorted({int(m.group(1)) for f in os.listdir(work) if (m := re.match(r"ragtrain_h(\d+)_k\d+\.json$", f))} - {50})
    for h in extra:
        for k in KS:
            r = load(os.path.join(work, f"ragtrain_h{h}_k{k}.json"))
            if not r:
                continue
            algo = chosen_algorithm(os.path.join(work, f"ragtrain_h{h}_k{k}.log"))
            ph = ", ".join(f"{n} {v:.1f}" for n, v in (r.get("phase_us_per_step_rank0") or {}).items())
            print(f"  H={h} K={k}: ragtrain {r['sequences_per_second']:.1f} seq/s, {r['us_per_step']:.1f} us/step, {algo}; "
                  f"phases (us/step): {ph}")
            out[f"h{h}_k{k}"] = {"ragtrain": r, "algorithm": algo}
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            json.dump(out, f, indent=1)


def len_batches(fl):
    """Batches the floor timed over the whole set: ceil(sequences / K)."""
    k = fl.get("batch", 1)
    return (fl["sequences"] + k - 1) // k


if __name__ == "__main__":
    main()
