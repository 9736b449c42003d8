#!/usr/bin/env bash
# Session 18, call 3 (the machine still warm after call 2; 15 s): FusedBudget of w0 and d1 (d1-diag-cycles.patch: the
# head and the projection's body each run twice, the recurrence's prologue split into cp.async issue, wait and the
# rest), carrying .devcarry-next. Run as one command line:
C=.devcarry-next; for b in w0 d1; do xz -dkf $C/$b/gpu_tests.xz; chmod +x $C/$b/gpu_tests; echo "== $b" >> $OUT/d1.log; timeout 60 $C/$b/gpu_tests --gtest_filter='FusedBudget*' >> $OUT/d1.log 2>&1; done; grep -a "diag\|== \|H=50 K=1 T=96 last\|whole training" $OUT/d1.log | cut -c1-400
