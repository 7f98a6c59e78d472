#!/usr/bin/env bash
# The team's loop from scripts on each development set (docs/quality.md, "Learning from the history"):
#
#   bench/quality/history_loop.sh [SET...]   # default: airline-sentiment issue-kind cfpb-product helpdesk
#   TRIAGE_THREADS=1 bench/quality/history_loop.sh cfpb-product   # llama.cpp threads for score, learn and eval
#   (TRIAGE_THREADS=N: llama.cpp threads for every step)
#
# For each set, in a fresh TRIAGE_HOME: the first LIMIT training rows of the 50/50 split are scored with
# `triage score --history` (timed), their labels recorded with `triage label --file`, and a head fitted with
# `triage learn --history` (timed; it must score nothing). The same rows in a file go through `triage learn
# train.jsonl`. Both heads are measured by `triage eval --head` on the first LIMIT dev rows. The context is
# eval's and learn's 1024 tokens for every step, so all of them compute the same numbers.
# Results: bench/quality/results/history-SET.txt (the timings and both evals).
set -euo pipefail
cd "$(dirname "$0")/../.."
TRIAGE="${TRIAGE_BIN:-.venv/bin/triage}"
DATA="${TRIAGE_DATASETS:-../shared/datasets}"
SPLITS="${TRIAGE_SPLITS:-/tmp/triage-quality/splits}"
MODEL="${TRIAGE_EVAL_MODEL:-qwen2.5-coder-0.5b}"
LIMIT="${TRIAGE_EVAL_LIMIT:-100}"
N_CTX=1024
OUT="${TRIAGE_EVAL_OUT:-bench/quality/results}"
WORK="${TRIAGE_LOOP_WORK:-/tmp/triage-history-loop}"
mkdir -p "$OUT" "$WORK"
MODEL_PATH="$("$TRIAGE" model path "$MODEL")"  # before TRIAGE_HOME moves: each set starts from an empty one
sets=("$@"); [ ${#sets[@]} -eq 0 ] && sets=(airline-sentiment issue-kind cfpb-product helpdesk)
for d in "${sets[@]}"; do
  [ -f "$SPLITS/$d/dev.jsonl" ] || "$TRIAGE" eval "$DATA/$d/tickets.jsonl" --pack "$DATA/$d/criteria.toml" \
    --split 0.5 --save-split "$SPLITS/$d"
  w="$WORK/$d"
  [ -f "$w/scored.seconds" ] || { rm -rf "$w"; mkdir -p "$w/home"; }  # a set scored by an earlier run is reused
  export TRIAGE_HOME="$w/home"
  head -n "$LIMIT" "$SPLITS/$d/train.jsonl" > "$w/train.jsonl"
  python3 - "$w" <<'PY'
import json, sys
w = sys.argv[1]
rows = [json.loads(l) for l in open(f"{w}/train.jsonl", encoding="utf-8")]
with open(f"{w}/tickets.jsonl", "w", encoding="utf-8") as t, open(f"{w}/labels.jsonl", "w", encoding="utf-8") as l:
    for r in rows:
        t.write(json.dumps({"id": r["id"], "text": r["text"]}) + "\n")
        l.write(json.dumps({"id": r["id"], "labels": r["labels"]}) + "\n")
PY
  common=(--model "$MODEL_PATH" --n-ctx "$N_CTX" --pack "$DATA/$d/criteria.toml" ${TRIAGE_THREADS:+--threads "$TRIAGE_THREADS"})
  {
    echo "== $d: $LIMIT training rows, $LIMIT dev rows, $MODEL, n_ctx $N_CTX"
    if [ ! -f "$w/scored.seconds" ]; then
      s0=$(date +%s.%N)
      "$TRIAGE" score "$w/tickets.jsonl" --history "${common[@]}" --format jsonl > "$w/scored.jsonl" 2> "$w/score.err" \
        || { cat "$w/score.err"; exit 1; }
      s1=$(date +%s.%N)
      python3 -c "print($s1 - $s0)" > "$w/scored.seconds"
      "$TRIAGE" label --file "$w/labels.jsonl" 2>&1
    fi
    tail -n 1 "$w/score.err"
    scored=$(cat "$w/scored.seconds")
    l0=$(date +%s.%N)
    "$TRIAGE" learn --history "${common[@]}" -o "$w/history.npz" --no-store --force 2>&1
    l1=$(date +%s.%N)
    python3 -c "s=$scored; l=$l1-$l0; print(f'score --history: {s:.1f} s; learn --history: {l:.1f} s = {100*l/s:.1f}% of the scoring')"
    "$TRIAGE" learn "$w/train.jsonl" "${common[@]}" -o "$w/file.npz" --no-store --force 2>&1
    echo "-- eval, head from the history"
    "$TRIAGE" eval "$SPLITS/$d/dev.jsonl" --head "$w/history.npz" "${common[@]}" --limit "$LIMIT" 2>/dev/null
    echo "-- eval, head from the file"
    "$TRIAGE" eval "$SPLITS/$d/dev.jsonl" --head "$w/file.npz" "${common[@]}" --limit "$LIMIT" 2>/dev/null
  } > "$OUT/history-$d.txt"
  cat "$OUT/history-$d.txt" >&2
  # The learning loop over every row of the set, training split then dev split, in file order (the rows above are in
  # the cache already; the replay scores the rest once). TRIAGE_REPLAY_LIMIT=N replays the first N.
  cat "$SPLITS/$d/train.jsonl" "$SPLITS/$d/dev.jsonl" > "$w/replay.jsonl"
  PYTHONPATH="${TRIAGE_PYTHONPATH:-.}" "${PYTHON:-.venv/bin/python}" bench/learning_loop.py "$w/replay.jsonl" \
    --pack "$DATA/$d/criteria.toml" --model "$MODEL_PATH" --limit "${TRIAGE_REPLAY_LIMIT:-100000}" --refit-every 20 \
    -o "$OUT/learning-loop-$d" > "$OUT/learning-loop-$d.txt" 2>&1
  cat "$OUT/learning-loop-$d.txt" >&2
done
