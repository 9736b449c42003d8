#!/usr/bin/env bash
# The data path (issue 34): for --max-memory 1x and 4x below the shard and K = 1 and 128, one epoch of `train` on
# a generated set in the page cache — load rate, time to the first step, io wait, epoch time, peak RSS — as a table
# and data_path.json.
# usage, from the repository root:   BIN=build/bin DEVICE=cuda bench/data_path.sh
#   SEQUENCES (200000: ~2.7 GB at F=36, lengths 60..130), KS ("1 128"), FACTORS ("1 4": the shard is FACTOR x
#   --max-memory; 1 = the shard fits), OUT (runs/data_path), WORK (/tmp/ragtrain-data-path), NP (1 rank).
# "wait" is shard_wait_s: how long the trainer waited for the background read once the backend was set up. The
# generated file carries its feature statistics (/statistics); a file made by an older gen does not (WORK is reused:
# delete WORK/data.h5 to compare), and "statistics" then says computed.
# A factor > 1 streams (CPU backend); the CUDA backend does not stream yet, so with DEVICE=cuda such a run is refused
# (exit 2) and the row says so.
set -uo pipefail
BIN=${BIN:-build/bin}
DEVICE=${DEVICE:-cuda}
SEQUENCES=${SEQUENCES:-200000}
KS=${KS:-1 128}
FACTORS=${FACTORS:-1 4}
NP=${NP:-1}
OUT=${OUT:-runs/data_path}
WORK=${WORK:-/tmp/ragtrain-data-path}
PY=${PY:-python3}
mkdir -p "$OUT" "$WORK"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

data=$WORK/data.h5
if [ ! -f "$data" ]; then
  "$BIN/ragtrain" gen --out "$data" --sequences "$SEQUENCES" --features 36 --min-length 60 --max-length 130 \
    --classes 10 --seed 1 --quiet || exit 1
fi
cat "$data" > /dev/null   # into the page cache: the table measures the reader, not the disk
bytes=$(stat -c %s "$data")
shard_mib=$(( bytes / NP / 1048576 + 1 ))

launch() { if [ "$NP" -gt 1 ]; then mpirun -np "$NP" --oversubscribe "$@"; else "$@"; fi; }

rows=()
for factor in $FACTORS; do
  for k in $KS; do
    run=$WORK/run_f${factor}_k${k}
    rm -rf "$run"
    # factor 1: a budget generous enough for the shard and the step; factor F: the shard is F times the budget.
    budget=$(( factor == 1 ? 4 * shard_mib + 1024 : shard_mib / factor ))M
    launch "$BIN/ragtrain" train --data "$data" --out "$run" --device "$DEVICE" --epochs 1 --batch-per-rank "$k" \
      --max-memory "$budget" --log-every 100000 --quiet > "$run.log" 2>&1
    rc=$?
    rows+=("$factor $k $budget $rc $run")
  done
done

"$PY" - "$OUT" "$bytes" "${rows[@]}" <<'EOF'
import json, os, sys
out, file_bytes, rows = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
results = []
print("# data path: one epoch of train, file %.2f GB in the page cache" % (file_bytes / 1e9))
print("# %6s %4s %9s %10s %10s %9s %9s %9s %10s  %s" % ("shard", "K", "budget", "load", "1st_step", "wait", "io_wait",
                                                         "epoch", "max_rss", "status"))
print("# %6s %4s %9s %10s %10s %9s %9s %9s %10s" % ("/budg", "", "", "(GB/s)", "(s)", "(s)", "(s)", "(s)", "(GB)"))
for row in rows:
    factor, k, budget, rc, run = row.split(" ")
    r = {"factor": int(factor), "K": int(k), "max_memory": budget, "exit_code": int(rc)}
    summary = os.path.join(run, "summary.json")
    if rc == "0" and os.path.exists(summary):
        s = json.load(open(summary))
        epoch_s = None
        for line in open(os.path.join(run, "metrics.jsonl")):
            rec = json.loads(line)
            if rec.get("event") == "epoch":
                epoch_s = rec["seconds"]
        r.update({k2: s.get(k2) for k2 in ("read_bytes", "read_s", "read_bytes_per_second", "read_path",
                                           "reader_threads", "time_to_first_step_s", "shard_wait_s", "feature_statistics",
                                           "io_wait_s", "max_rss_bytes", "wall_seconds")})
        r["epoch_s"] = epoch_s
        print("  %6s %4s %9s %10.2f %10.2f %9.3f %9.3f %9.2f %10.2f  ok (%s, %s threads, statistics %s)" % (
            factor, k, budget, s["read_bytes_per_second"] / 1e9, s["time_to_first_step_s"], s.get("shard_wait_s", 0),
            s["io_wait_s"], epoch_s or float("nan"), s["max_rss_bytes"] / 1e9, s["read_path"], s["reader_threads"],
            s.get("feature_statistics", "?")))
    else:
        log = open(run + ".log").read().strip().splitlines()
        r["message"] = log[0] if log else ""
        print("  %6s %4s %9s %10s %10s %9s %9s %9s %10s  exit %s: %s" % (factor, k, budget, "-", "-", "-", "-", "-", "-",
                                                                         rc, r["message"][:100]))
    results.append(r)
json.dump({"file_bytes": file_bytes, "runs": results}, open(os.path.join(out, "data_path.json"), "w"), indent=1)
print("# wrote %s" % os.path.join(out, "data_path.json"))
EOF
