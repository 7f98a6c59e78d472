#!/usr/bin/env bash
# Learned read-out against calibration and TF-IDF on the three development sets (docs/quality.md, "Learned read-out").
#
#   bench/quality/learn.sh [SET...]     # SET: airline-sentiment cfpb-product issue-kind (default: all three)
#
# The same splits as readout.sh (50/50 by id hash), the first 150 dev rows and at most 150 training rows, the label
# readout, eval's default 1024-token context. Each eval fits the learned head on the training rows' answer-position
# features and option log-probs (what `triage learn` fits), calibration and the TF-IDF baseline on the same rows, and a
# learning curve at 25, 50, 100 and 150 training rows. An option with fewer than 5 training labels is left to the
# zero-shot readout by the head and keeps its calibration bias at 0 (--rare-options freeze: cfpb has no consumer loan
# in its training rows). A second pass reads the same cache with class-balanced calibration.
# Results: bench/quality/results/learn-SET.json and learn-SET-balanced.json (TRIAGE_EVAL_OUT to put them elsewhere).
set -euo pipefail
cd "$(dirname "$0")/../.."
TRIAGE=".venv/bin/triage"
DATA="${TRIAGE_DATASETS:-../shared/datasets}"
SPLITS="${TRIAGE_SPLITS:-/tmp/triage-quality/splits}"
MODEL="${TRIAGE_EVAL_MODEL:-qwen2.5-coder-0.5b}"
THREADS="${TRIAGE_EVAL_THREADS:-2}"
LIMIT="${TRIAGE_EVAL_LIMIT:-150}"
N_CTX="${TRIAGE_EVAL_N_CTX:-1024}"
OUT="${TRIAGE_EVAL_OUT:-bench/quality/results}"
mkdir -p "$OUT"
sets=("$@"); [ ${#sets[@]} -eq 0 ] && sets=(airline-sentiment issue-kind cfpb-product)
for d in "${sets[@]}"; do
  [ -f "$SPLITS/$d/dev.jsonl" ] || "$TRIAGE" eval "$DATA/$d/tickets.jsonl" --pack "$DATA/$d/criteria.toml" --split 0.5 --save-split "$SPLITS/$d"
done
for d in "${sets[@]}"; do
  echo "== $d" >&2
  for w in none balanced; do
    suffix=$([ "$w" = balanced ] && echo "-balanced" || echo "")
    "$TRIAGE" eval "$SPLITS/$d/dev.jsonl" --train "$SPLITS/$d/train.jsonl" --pack "$DATA/$d/criteria.toml" \
      --model "$MODEL" --threads "$THREADS" --n-ctx "$N_CTX" --limit "$LIMIT" --train-limit "$LIMIT" \
      --readout label --rare-options freeze --cal-weighting "$w" --json "$OUT/learn-$d$suffix.json" > "$OUT/learn-$d$suffix.txt"
  done
done
