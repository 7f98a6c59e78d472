#!/usr/bin/env bash
# Label readout against the letter readout on the three development sets (docs/quality.md, "Label readout").
#
#   bench/quality/readout.sh [SET...]     # SET: airline-sentiment cfpb-product issue-kind (default: all three)
#
# Each set is split 50/50 by id hash (the same split as run.sh), then evaluated with the first 150 dev rows
# and the first 150 training rows (TRIAGE_EVAL_LIMIT), a 512-token context, once with --readout label and once with
# --readout letter (every rotation). An option with fewer than 5 training labels keeps its calibration
# bias at 0 (--rare-options freeze: cfpb has 0-3 consumer loans). Results: bench/quality/results/readout-SET-READOUT.json.
# TRIAGE_EVAL_OUT puts the results elsewhere; TRIAGE_EVAL_N_CTX sets the context (default 512).
# Readouts are cached, so a re-run only reads the cache.
set -euo pipefail
cd "$(dirname "$0")/../.."
TRIAGE=".venv/bin/triage"
DATA="${TRIAGE_DATASETS:-../shared/datasets}"
SPLITS="${TRIAGE_SPLITS:-/tmp/triage-quality/splits}"
MODEL="${TRIAGE_EVAL_MODEL:-qwen2.5-coder-0.5b}"
THREADS="${TRIAGE_EVAL_THREADS:-1}"
LIMIT="${TRIAGE_EVAL_LIMIT:-150}"
N_CTX="${TRIAGE_EVAL_N_CTX:-512}"
READOUTS="${TRIAGE_EVAL_READOUTS:-label letter}"
OUT="${TRIAGE_EVAL_OUT:-bench/quality/results}"
mkdir -p "$OUT"
sets=("$@"); [ ${#sets[@]} -eq 0 ] && sets=(airline-sentiment issue-kind cfpb-product)
for d in "${sets[@]}"; do
  [ -f "$SPLITS/$d/dev.jsonl" ] || "$TRIAGE" eval "$DATA/$d/tickets.jsonl" --pack "$DATA/$d/criteria.toml" --split 0.5 --save-split "$SPLITS/$d"
done
for r in $READOUTS; do
  for d in "${sets[@]}"; do
    echo "== $d, readout $r" >&2
    "$TRIAGE" eval "$SPLITS/$d/dev.jsonl" --train "$SPLITS/$d/train.jsonl" --pack "$DATA/$d/criteria.toml" \
      --model "$MODEL" --threads "$THREADS" --n-ctx "$N_CTX" --limit "$LIMIT" --train-limit "$LIMIT" \
      --readout "$r" --rare-options freeze --confusion --json "$OUT/readout-$d-$r.json" > "$OUT/readout-$d-$r.txt"
    # the same cached readouts, calibrated with a class-balanced objective
    "$TRIAGE" eval "$SPLITS/$d/dev.jsonl" --train "$SPLITS/$d/train.jsonl" --pack "$DATA/$d/criteria.toml" \
      --model "$MODEL" --threads "$THREADS" --n-ctx "$N_CTX" --limit "$LIMIT" --train-limit "$LIMIT" \
      --readout "$r" --rare-options freeze --cal-weighting balanced --json "$OUT/readout-$d-$r-balanced.json" > "$OUT/readout-$d-$r-balanced.txt"
  done
done
