#!/usr/bin/env bash
# Reproduce the decision-quality measurements in docs/quality.md.
#
#   bench/quality/run.sh splits packs      # make the dev/train splits and the few-shot packs (no model needed)
#   bench/quality/run.sh NAME...           # run the named measurements (see the table below)
#   bench/quality/run.sh all
#
# Every run scores with qwen2.5-coder-0.5b (the Qwen3-0.6B stand-in), one thread (TRIAGE_EVAL_THREADS), at nice 10
# (the machine is shared: two llama.cpp processes on two cores starve each other). Results go to
# bench/quality/results/NAME.json; readouts are cached, so re-running a measurement is quick.
set -euo pipefail
cd "$(dirname "$0")/../.."
TRIAGE=".venv/bin/triage"
DATA="${TRIAGE_DATASETS:-../shared/datasets}"
SPLITS="${TRIAGE_SPLITS:-/tmp/triage-quality/splits}"
OUT="bench/quality/results"
PACKS="bench/quality/packs"
# Few-shot packs hold dataset rows as examples; they are generated next to the splits, not kept in the repo.
FEWSHOT="${TRIAGE_FEWSHOT_PACKS:-$(dirname "$SPLITS")/packs}"
MODEL="${TRIAGE_EVAL_MODEL:-qwen2.5-coder-0.5b}"
THREADS="${TRIAGE_EVAL_THREADS:-1}"  # 2 on a quiet 2-core machine
mkdir -p "$OUT"

splits() {
  for d in airline-sentiment cfpb-product issue-kind; do
    "$TRIAGE" eval "$DATA/$d/tickets.jsonl" --pack "$DATA/$d/criteria.toml" --split 0.5 --save-split "$SPLITS/$d"
  done
}

# The few-shot packs: examples from training rows past the ones eval trains on (see make_fewshot_pack.py).
packs() {
  local py=.venv/bin/python mk=bench/quality/make_fewshot_pack.py
  mkdir -p "$FEWSHOT"
  $py $mk "$PACKS/airline-sentiment.v2.toml" "$SPLITS/airline-sentiment/train.jsonl" "$FEWSHOT/airline-sentiment.v2-fewshot.toml" --skip 60 --per-option 2 --max-chars 160
  $py $mk "$PACKS/cfpb-product.v2.toml" "$SPLITS/cfpb-product/train.jsonl" "$FEWSHOT/cfpb-product.v2-fewshot.toml" --skip 30 --per-option 1 --max-chars 400
  $py $mk "$PACKS/issue-kind.v2.toml" "$SPLITS/issue-kind/train.jsonl" "$FEWSHOT/issue-kind.v2-fewshot.toml" --skip 30 --per-option 2 --max-chars 300
}

# ev NAME DATASET LIMIT PACK [extra triage eval options...]
ev() {
  local name=$1 d=$2 limit=$3 pack=$4
  shift 4
  echo "== $name"
  ( set -x; time nice -n 10 "$TRIAGE" eval "$SPLITS/$d/dev.jsonl" --pack "$pack" --train "$SPLITS/$d/train.jsonl" \
      --model "$MODEL" --threads "$THREADS" --limit "$limit" --json "$OUT/$name.json" "$@" ) 2>&1 | tee "$OUT/$name.log"
}

run() {
  case "$1" in
    splits) splits ;;
    packs) packs ;;
    # The shipped packs, chat prompt (auto for Qwen): the main table.
    air-default)   ev air-default   airline-sentiment 60 "$DATA/airline-sentiment/criteria.toml" ;;
    cfpb-default)  ev cfpb-default  cfpb-product      30 "$DATA/cfpb-product/criteria.toml" ;;
    issue-default) ev issue-default issue-kind        30 "$DATA/issue-kind/criteria.toml" ;;
        # cfpb's first 30 training rows hold 2 mortgage and 0 consumer-loan labels: the default refuses to
    # calibrate; --rare-options freeze fits T and the two common options' biases (same readouts, cached).
    cfpb-default-freeze) ev cfpb-default-freeze cfpb-product 30 "$DATA/cfpb-product/criteria.toml" --rare-options freeze ;;
    # Every row of each split (dev 145-158, train 142-155): run on a quiet machine with TRIAGE_EVAL_THREADS=2.
    air-all)   ev air-all   airline-sentiment 1000 "$DATA/airline-sentiment/criteria.toml" ;;
    cfpb-all)  ev cfpb-all  cfpb-product      1000 "$DATA/cfpb-product/criteria.toml" --rare-options freeze ;;
    issue-all) ev issue-all issue-kind        1000 "$DATA/issue-kind/criteria.toml" ;;
    # Levers on airline, first 40 rows of each split (the default run's first 40 come from the cache).
    # 40 training rows hold only 4 positives, so these runs allow 3 labels per option.
    air-default-40) ev air-default-40 airline-sentiment 40 "$DATA/airline-sentiment/criteria.toml" --min-per-option 3 ;;
    air-plain)     ev air-plain     airline-sentiment 40 "$DATA/airline-sentiment/criteria.toml" --min-per-option 3 --prompt plain ;;
    air-v2)        ev air-v2        airline-sentiment 40 "$PACKS/airline-sentiment.v2.toml" --min-per-option 3 ;;
    air-v2-fewshot) ev air-v2-fewshot airline-sentiment 40 "$FEWSHOT/airline-sentiment.v2-fewshot.toml" --min-per-option 3 ;;
    cfpb-v2-fewshot) ev cfpb-v2-fewshot cfpb-product 30 "$FEWSHOT/cfpb-product.v2-fewshot.toml" --rare-options freeze ;;
    issue-v2-fewshot) ev issue-v2-fewshot issue-kind 30 "$FEWSHOT/issue-kind.v2-fewshot.toml" ;;
    all) for n in splits packs air-default cfpb-default cfpb-default-freeze issue-default air-default-40 air-plain air-v2 air-v2-fewshot cfpb-v2-fewshot issue-v2-fewshot; do run "$n"; done ;;
    *) echo "unknown measurement $1" >&2; exit 2 ;;
  esac
}

for name in "$@"; do run "$name"; done
