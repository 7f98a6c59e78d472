#!/bin/bash
# The helpdesk walk recorded in docs/quality.md ("Helpdesk: from an export to a head"):
# export -> pack init -> learn --holdout 0.3 -> eval, with qwen2.5-coder-0.5b, then the same rows
# through triage's JSONL shape and the three export shapes with the hand-written pack.
# usage: bench/intake/helpdesk.sh [OUTDIR]   (default /tmp/helpdesk-run; a fresh TRIAGE_HOME inside it)
set -euxo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-/tmp/helpdesk-run}
D=$ROOT/../shared/datasets/helpdesk
T="${TRIAGE:-triage}"
PY="${PYTHON:-python}"
M="--model $($T model path qwen2.5-coder-0.5b)"   # resolved before TRIAGE_HOME moves the model dir
mkdir -p "$OUT" && cd "$OUT"
export TRIAGE_HOME=$OUT/home
date -u
$PY "$ROOT/bench/intake/exports.py" "$D/tickets.jsonl" "$D/criteria.toml" exports
# 1. from the Freshdesk-like export alone
$T pack init exports/freshdesk.csv --text Subject,Description --id "Ticket ID" --criteria queue=Group,priority=Priority,type=Type -o helpdesk-team.toml --force
$T learn exports/freshdesk.csv $M --pack helpdesk-team.toml --text Subject,Description --id "Ticket ID" --label queue=Group --label priority=Priority --label type=Type --holdout 0.3 -o helpdesk-team.npz
$T eval exports/freshdesk.csv $M --pack helpdesk-team.toml --text Subject,Description --id "Ticket ID" --label queue=Group --label priority=Priority --label type=Type --split 0.7 --curve none --json eval-team.json
# 2. the same rows through triage's JSONL shape and the three export shapes, with the hand-written pack
$T learn "$D/tickets.jsonl" $M --pack "$D/criteria.toml" --holdout 0.3 --no-store -o ref-jsonl.npz
$T learn exports/freshdesk.csv $M --pack "$D/criteria.toml" --text Subject,Description --id "Ticket ID" --label queue=Group --label priority=Priority --label type=Type --holdout 0.3 --no-store -o ref-freshdesk.npz
$T learn exports/jira.csv $M --pack "$D/criteria.toml" --text Summary,Description --id "Issue key" --label queue=Queue --label priority=Priority --label type=Type --holdout 0.3 --no-store -o ref-jira.npz
$T learn exports/zendesk.jsonl $M --pack "$D/criteria.toml" --text ticket.subject,ticket.description --id ticket.id --label queue=fields.queue --label priority=fields.priority --label type=fields.type --holdout 0.3 --no-store -o ref-zendesk.npz
date -u
