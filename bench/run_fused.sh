#!/usr/bin/env bash
# The fused kernel against cuDNN and PyTorch in ONE device call (doc/performance.md's headline table, issue 36's
# summary): for each case, `ragtrain bench --device cuda` with --lstm cudnn and --lstm fused, the cuDNN floor of the
# same batches (cudnn_floor: forward + both backward passes only, replayed from CUDA graphs; one direction), the
# PyTorch eager loop (bench/torch_reference.py) and the PyTorch CUDA-graph anchor (bench/torch_graph_anchor.py: one
# graph per length capturing forward, loss, backward and capturable Adam; one layer, one direction), all on the same
# file (F=36, 10 classes, lengths uniform 60..130, 2000 sequences, Adam); then one table side by side with the
# targets, and summary.json.
# usage, from the repository root on the GPU machine:   BIN=build-gpu/bin OUT=$OUT bench/run_fused.sh
# (build first: make BUILD=build-gpu PORTABLE=1 bench-gpu). CASES="50:1 50:32 50:128 128:1" by default: each H:K,
# H:K:L (L stacked layers) or H:K:L:bi (bidirectional); issue 36's set is
#   CASES="256:1 256:32 256:128 512:32 128:1:2 50:1:1:bi 50:32:1:bi".
# The fused column is filled only where `ragtrain bench` ran the fused kernel (its JSON's backend_description says
# so); a model it does not cover runs cuDNN under --lstm fused, and the column says "-".
# TORCH=0 leaves out PyTorch, FLOOR=0 the floor (also left out when $BIN has no cudnn_floor). TORCH_BF16=1 adds a
# column of the PyTorch CUDA-graph anchor in bfloat16 (--dtype bfloat16: model, inputs and Adam; cuDNN's bf16 LSTM),
# PyTorch's fastest form of the step. (Its float32 anchors run cuDNN with its default math, which allows TF32:
# bench/torch_reference.py records allow_tf32.)
# Output: $OUT/bench.log, summary.txt, summary.json, results.tgz (the last three rewritten before every case).
set -uo pipefail
BIN=${BIN:-build-gpu/bin}
SCRIPTS=${SCRIPTS:-bench}   # where torch_reference.py and torch_graph_anchor.py are
OUT=${OUT:-runs/bench-fused}
WORK=${WORK:-/tmp/ragtrain-bench-fused}
CASES=${CASES:-50:1 50:32 50:128 128:1}
TORCH=${TORCH:-1}           # 0: ragtrain only (the PyTorch columns stay empty)
FLOOR=${FLOOR:-1}           # 0: no cuDNN floor column
TORCH_BF16=${TORCH_BF16:-0}   # 1: also the PyTorch CUDA-graph anchor in bfloat16
# Folders, environment, DATA, $LOG and $WORK/data.h5; a copy of this script carried elsewhere (e.g. to the GPU
# machine) without bench_common.sh beside it takes the repository's, run from the repository root.
common=$(dirname "$0")/bench_common.sh
[ -f "$common" ] || common=bench/bench_common.sh
. "$common"

# The table (summary.txt, summary.json) and results.tgz from the JSON files so far, rewritten before every case and
# at the end: a run stopped early (a device call's time limit) leaves the cases it finished, '-' for the rest.
read -r -d '' SUMMARY_PY <<'EOF'
import json, os, sys
work, out_path = sys.argv[1], sys.argv[2]
# (H, K, layers, bidirectional): seq/s lines (doc/performance.md; issue 36).
TARGET = {(50, 1, 1, False): 15000.0, (128, 1, 1, False): 6000.0, (50, 128, 1, False): 1000000.0,
          (256, 1, 1, False): 4500.0, (256, 32, 1, False): 60000.0, (256, 128, 1, False): 150000.0,
          (512, 32, 1, False): 20000.0, (128, 1, 2, False): 3500.0, (50, 1, 1, True): 10000.0,
          (50, 32, 1, True): 200000.0}
def load(name):
    try:
        with open(os.path.join(work, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
def seq(r):
    return r["sequences_per_second"] if r else float("nan")
def floor_entry(fl, k):
    """The floor as a bench result: us per batch of K and the sequences per second that makes (ceil(N/K) batches)."""
    if not fl or not fl.get("floor_us"):
        return None
    batches = -(-fl["sequences"] // k)
    return {"us_per_step": fl["floor_us"], "sequences_per_second": 1e6 * fl["sequences"] / (fl["floor_us"] * batches),
            "algorithm": fl.get("best_algorithm")}
print("# seq/s (us/step), one GPU, F=36, 10 classes, lengths 60..130, Adam; ragtrain: balanced schedule, whole step;"
      " cuDNN floor: its LSTM passes alone; '-': not run (fused: the model is not covered, it ran cuDNN)")
NAMES = ("cudnn", "fused", "torch", "graph", "graphbf16", "floor")
cols = " | ".join(f"{n:>18}" for n in ("cuDNN", "fused", "torch eager", "torch graphs", "torch graphs bf16",
                                       "cuDNN floor"))
print(f"# {'case':>28} | {cols} | fused/cuDNN  fused/graphs | target")
summary = {}
for c in os.environ["CASES"].split():
    parts = c.split(":") + ["1", ""]
    h, k, layers, bi = int(parts[0]), int(parts[1]), int(parts[2] or 1), parts[3] == "bi"
    tag = f"h{h}_k{k}_l{layers}" + ("_bi" if bi else "")
    rs = {n: load(f"{n}_{tag}.json") for n in ("cudnn", "fused", "torch", "graph", "graphbf16")}
    if rs["fused"] and "LSTM fused kernel" not in rs["fused"].get("backend_description", ""):
        rs["fused"] = None   # --lstm fused on a model the kernel does not cover: that was cuDNN
    rs["floor"] = floor_entry(load(f"floor_{tag}.json"), k)
    name = f"H={h} K={k}" + (f" layers={layers}" if layers > 1 else "") + (" bidirectional" if bi else "")
    cell = lambda r: f"{seq(r):10.0f} ({r['us_per_step']:5.1f})" if r else f"{'-':>18}"
    tgt = TARGET.get((h, k, layers, bi))
    met = None if tgt is None or not rs["fused"] else seq(rs["fused"]) >= tgt
    state = "fused not run" if met is None else "MET" if met else "MISSED"
    verdict = "" if tgt is None else f">= {tgt:,.0f}: {state}"
    cells = " | ".join(cell(rs[n]) for n in NAMES)
    ratio = lambda a, b: f"{seq(rs[a]) / seq(rs[b]):.2f}x" if rs[a] and rs[b] else "-"   # '-': one side not run
    ratios = f"{ratio('fused', 'cudnn'):>11} {ratio('fused', 'graph'):>13}"
    print(f"  {name:<28} | {cells} | {ratios} | {verdict}")
    for n in ("cudnn", "fused"):
        r = rs[n]
        if r and r.get("phase_us_per_step_rank0"):
            phases = r["phase_us_per_step_rank0"].items()
            print(f"      {n} phases (us/step): " + ", ".join(f"{p} {v:.1f}" for p, v in phases))
    summary[tag] = dict(rs, case=name, target_seq_s=tgt, met=met)
with open(out_path, "w") as f:
    json.dump(summary, f, indent=1)
EOF
summarize() {
  CASES="$CASES" python3 -c "$SUMMARY_PY" "$WORK" "$OUT/summary.json" > "$OUT/summary.txt" 2>&1
  tar -C "$WORK" -czf "$OUT/results.tgz" --exclude data.h5 .
}

steps_for() { case $1 in 1) echo 5000 ;; *) echo 3000 ;; esac; }
for c in $CASES; do
  summarize
  IFS=: read -r H K L BI <<< "$c"
  L=${L:-1} BI=${BI:-}
  tag=h${H}_k${K}_l${L}${BI:+_bi}
  model=(--hidden "$H" --layers "$L")
  [ "$BI" = bi ] && model+=(--bidirectional)
  echo "## $c" | tee -a "$LOG"
  for lstm in cudnn fused; do
    timeout 150 mpirun -np 1 "$BIN/ragtrain" bench --device cuda --lstm "$lstm" --pool last "${model[@]}" "${DATA[@]}" \
      --optimizer adam --lr 1e-3 --batch-per-rank "$K" --schedule balanced --steps "$(steps_for "$K")" \
      --warmup 300 --out "$WORK/${lstm}_$tag.json" 2>&1 | tee -a "$LOG"
  done
  if [ "$FLOOR" = 1 ] && [ -x "$BIN/cudnn_floor" ] && [ -z "$BI" ]; then
    timeout 150 "$BIN/cudnn_floor" --hidden "$H" --layers "$L" --features 36 --min-length 60 --max-length 130 \
      --seed 1 --sequences 2000 --passes 1 --batch "$K" --layouts padded --algo all --out "$WORK/floor_$tag.json" 2>&1 |
      tee -a "$LOG"
  fi
  [ "$TORCH" = 1 ] || continue
  eager_steps=600
  [ "$K" != 1 ] && eager_steps=150
  timeout 150 python3 "$SCRIPTS/torch_reference.py" --data "$WORK/data.h5" --hidden "$H" --layers "$L" \
    ${BI:+--bidirectional} --batch "$K" --steps "$eager_steps" --warmup 30 --out "$WORK/torch_$tag.json" 2>&1 |
    tee -a "$LOG"
  if [ "$L" = 1 ] && [ -z "$BI" ]; then
    timeout 240 python3 "$SCRIPTS/torch_graph_anchor.py" --data "$WORK/data.h5" --hidden "$H" --batch "$K" \
      --steps 3000 --warmup 200 --out "$WORK/graph_$tag.json" 2>&1 | tee -a "$LOG"
    if [ "$TORCH_BF16" = 1 ]; then
      timeout 240 python3 "$SCRIPTS/torch_graph_anchor.py" --data "$WORK/data.h5" --hidden "$H" --batch "$K" \
        --dtype bfloat16 --steps 3000 --warmup 200 --out "$WORK/graphbf16_$tag.json" 2>&1 | tee -a "$LOG"
    fi
  fi
done
summarize
tee -a "$LOG" < "$OUT/summary.txt"
