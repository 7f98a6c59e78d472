"""``triage learn``: fit a learned read-out (a head) per criterion on a team's labelled tickets."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from triage.commands._input import INPUT_HELP

if TYPE_CHECKING:
    import numpy as np

    from triage.domain.pack import Pack
    from triage.evaluation.labelled_runs import ScoringRun
    from triage.evaluation.runner import Scored
    from triage.learning.learn import LearnOutcome
    from triage.scoring.head import Head

NAME = "learn"
ORDER = 46
HELP = "learn each criterion from labelled tickets (a read-out on the model's hidden state)"
DESCRIPTION = (
    """\
Score labelled tickets (JSON Lines: {"id", "text", "labels": {criterion: option}};
a row may label some criteria only) with the label readout, and fit, for each
criterion with enough labels, a multinomial logistic regression on what the
model computed at that criterion's answer position: its hidden state (read
through the output layer: the logits of a fixed set of tokens, twice the hidden
width) and the options' log-probs. Features are standardised, L2 strength is
chosen by stratified cross-validation on these rows, classes are weighted
balanced. Scoring with the head costs nothing extra: the features come from the
decode that reads the options anyway.

Several files are learned together, and --history adds the labels agents gave in
the app or with `triage label`. A row of `triage label --export` whose "pack"
names another pack than the one learned is left out (learn says how many). A ticket text that comes more than once is
learned once (its labels merged, a later source winning: files in the order
given, then the history). A history ticket scored by the app or by `triage score
--history` kept what a head reads with its score, so it is not scored again; one
whose features are gone, or were computed with another model, pack or prompt
format, is scored, and learn says how many. When no row needs scoring (all kept,
or in eval's cache), the model's weights are not loaded at all: learn reads only
what identifies its numbers (sha256, prompt format, sizes) from the file.

An option with fewer than --min-per-option labels (default 5) cannot be
learned: the head learns the other options and leaves that one to the
zero-shot readout, and learn names it (--rare-options refuse leaves the whole
criterion unlearned instead). A criterion with fewer than two learnable
options, or with no labels, is not learned and is named: it stays calibrated
or zero-shot. Each result says per criterion what decided it: learned,
calibrated or zero-shot.

Learn first says, one line per criterion, whether it applies what it learned.
With --holdout the held-out rows decide: a head not better than zero-shot there
is stored but not applied (score and the app keep that criterion calibrated or
zero-shot). Without --holdout, cross-validation on the training rows decides: a
head worse than zero-shot on the same rows by more than their noise is stored,
not applied. --apply applies it anyway, and says so. The figures and tables
follow, each column explained in one line.

While it scores, a progress bar on a terminal; with stderr redirected (a file,
a pipe), a plain line at the start, after the first row, then every 10 s or
each tenth of the rows: rows done, rows/s and the time left.

The head (.npz, no pickle) records the model sha256, pack hash and prompt
format; it is written to -o and stored in the user data dir (heads/), from
where `triage score` and the app apply it when all three match, and say why
not when they do not. Readouts and features are cached with `triage eval`'s:
tickets scored before are not scored again. As eval and calibrate, learn reads
tickets with a 1024-token context unless --n-ctx says otherwise; a ticket
longer than the ticket budget has its middle cut as `triage score` and the app
cut it, and the count is shown. Fitting and scoring with a
head need only numpy; --holdout's TF-IDF baseline needs scikit-learn (the
`learn` extra).

With --ray (a local cluster) or --ray ADDRESS (an existing one), the rows that are
not cached are scored on Ray workers (--workers of --threads threads each, 1 by
default) and the fit stays here. The workers score exactly as learn does locally
(the same context size, prompt format, readout and cut rule; learn checks each
worker's before it sends a ticket), and every ticket scored goes into the cache as
its batch comes back. Needs the ray extra: pip install 'triage[ray]'.

examples:
  triage learn history.jsonl --pack criteria.toml
  triage learn --history --pack team.toml           # the labels agents gave in the app
  triage learn old-export.csv --history --pack team.toml --text Subject,Description --label queue=Group
  triage learn history.jsonl --pack criteria.toml -o team.npz --min-per-option 10
  triage learn export.csv --pack team.toml --text Subject,Description --label queue=Group --holdout 0.3
  triage learn history.jsonl --pack criteria.toml --ray --workers 2     # score on a local Ray cluster

"""
    + INPUT_HELP
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from triage.commands._flags import add_model_options, add_prompt_option
    from triage.commands._input import add_input_arguments

    p.add_argument(
        "labelled",
        nargs="*",
        metavar="LABELLED",
        help=(
            "labelled tickets to learn from (JSON Lines, or an export: "
            "CSV, JSON, Parquet); several files are learned together"
        ),
    )
    p.add_argument(
        "--history",
        action="store_true",
        help=(
            "also learn from the labels agents gave in the app or with `triage label` (the "
            "history); tickets whose score kept what a head reads are not scored again"
        ),
    )
    p.add_argument(
        "--history-file", metavar="PATH", help="with --history: this history file (default: the user data dir's)"
    )
    add_model_options(p, n_ctx=1024)
    add_input_arguments(p)
    p.add_argument("--pack", metavar="CRITERIA.toml", help="criteria pack (default: the built-in support pack)")
    p.add_argument(
        "-o", "--output", metavar="HEAD.npz", help="write the head here (it is also stored in the user data dir)"
    )
    p.add_argument(
        "--criteria", metavar="ID,ID", help="learn only these criteria (default: every criterion with labels)"
    )
    p.add_argument("--limit", type=int, metavar="N", help="learn from the first N usable rows only")
    add_prompt_option(p)
    p.add_argument(
        "--min-per-option",
        type=int,
        default=None,
        metavar="N",
        help=(
            "fewest labels an option needs to be learned (default 5); with --rare-options backoff a "
            "criterion is learned when two of its options have them"
        ),
    )
    p.add_argument(
        "--rare-options",
        choices=("backoff", "refuse"),
        default="backoff",
        help=(
            "an option below --min-per-option: learn the other options and leave that one "
            "to the zero-shot readout (default), or leave the whole criterion unlearned"
        ),
    )
    p.add_argument(
        "--read",
        metavar="WHERE",
        default="tail",
        help=(
            "where the head reads each ticket: tail (each criterion's own question, default) or shared (one "
            "short cue after the ticket read by every learned criterion, so a ticket costs its own tokens and a "
            "handful; shared:answer and shared:end name the cues), or auto: fit both and keep the "
            "shared position unless it cross-validates worse (scores every ticket twice). The head records it and "
            "is applied only there; the history's kept features are tail ones, so with shared its tickets are "
            "scored again"
        ),
    )
    p.add_argument("--no-store", action="store_true", help="do not store the head in the user data dir")
    p.add_argument("--force", action="store_true", help="replace an existing -o file")
    p.add_argument(
        "--apply",
        action="store_true",
        help=(
            "apply every learned criterion, also one whose own check found it no better than zero-shot "
            "(by default such a criterion is stored but not applied: it stays calibrated or zero-shot)"
        ),
    )
    p.add_argument(
        "--holdout",
        type=float,
        metavar="F",
        help=(
            "keep the share F of rows out (by id hash: eval --split 1-F's dev rows) and fit on the rest; "
            "a criterion is applied only where the head beats zero-shot on them. Prints per criterion "
            "balanced accuracy, macro-F1 and ECE on them for the head, zero-shot and TF-IDF, with the "
            "confusion matrix"
        ),
    )
    from triage.intake.sample import DEFAULT_PER_OPTION, PER_OPTION_WHY, per_option_arg

    p.add_argument(
        "--per-option",
        type=per_option_arg,
        default=DEFAULT_PER_OPTION,
        metavar="N|all",
        help=(
            "learn from a stratified sample: for each option, the N rows of lowest "
            "id hash (streamed; before --limit and --holdout); all: every row. "
            f"Default {DEFAULT_PER_OPTION or 'all'}: {PER_OPTION_WHY}"
        ),
    )
    ray = p.add_argument_group("scoring the rows on Ray (docs/scale.md)")
    ray.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="score the rows that are not cached on Ray (a local cluster, or join ADDRESS: auto, ray://host:10001); "
        "the fit stays here",
    )
    ray.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="with --ray: scoring actors of --threads threads each (default: the cluster's CPUs / threads; "
        "with --ray, --threads defaults to 1)",
    )
    ray.add_argument(
        "--batch-size", type=int, metavar="N", help="with --ray: tickets per batch, the most a dead worker loses (16)"
    )


def run(args: argparse.Namespace) -> int:
    from triage.backlog.learn_rows import sets_scorer
    from triage.commands._input import labelled_rows
    from triage.domain.pack import resolve_pack
    from triage.domain.ticket import printable
    from triage.errors import InputError
    from triage.evaluation.labelled_runs import load_for, report_bad, report_consoles, save_fit
    from triage.learning import fitstore, head_file, starter
    from triage.learning import learn as learn_mod
    from triage.learning.fit import FitRequest, starter_on
    from triage.learning.scorer import fit_inputs
    from triage.scoring.options import parse_criteria
    from triage.store.config import load_config

    out, err = report_consoles()
    if not args.output and args.no_store:
        raise InputError("with --no-store, give -o HEAD.npz: the head would go nowhere")
    if args.output and Path(args.output).suffix != head_file.SUFFIX:
        raise InputError(
            f"a head file ends in {head_file.SUFFIX}, got {args.output}",
            hint=f"e.g. -o {Path(args.output).with_suffix(head_file.SUFFIX).name}",
        )
    if args.min_per_option is not None and args.min_per_option < 2:
        raise InputError(f"--min-per-option must be at least 2, got {args.min_per_option}")
    if args.holdout is not None and not 0 < args.holdout < 1:
        raise InputError(f"--holdout wants a share between 0 and 1, got {args.holdout}")
    if args.per_option is not None and args.per_option < 1:
        raise InputError(f"--per-option must be at least 1, got {args.per_option}")
    from triage.scoring.cue import TAIL, check_read

    reads = [TAIL, check_read("shared")] if args.read == "auto" else [check_read(args.read)]
    if args.holdout is not None:  # the TF-IDF baseline beside the head: say it before scoring, not after
        from triage.evaluation.baseline import need_sklearn

        need_sklearn("--holdout")
    score_sets = sets_scorer(args, calls=len(reads))  # with --ray: on Ray (triage/backlog/learn_rows.py)
    if args.history_file and not args.history:
        raise InputError("--history-file works only with --history")
    if args.output:  # now, not after the scoring and the fit
        from triage.store.history_open import history_path
        from triage.store.outputs import check_output, check_writable

        inputs = [*args.labelled] + (
            [history_path(Path(args.history_file) if args.history_file else None)] if args.history else []
        )
        check_writable(check_output(args.output, inputs=inputs, force=args.force, what="head"))
    if not args.labelled and not args.history:
        raise InputError("nothing to learn from", hint="give labelled files, or --history (the app's labels), or both")
    pack = resolve_pack(args.pack)
    only = parse_criteria(args.criteria, pack)
    sets = [labelled_rows(args, f, pack, partial=True, per_option=args.per_option) for f in args.labelled]
    for one in sets:
        report_bad(one, err)
    # The weights are loaded only if a row must be scored: rows kept in the history with their features, or in
    # eval's cache, need only the model's identity (triage.scoring.lazy).
    engine = load_for(
        err, model=args.model, n_ctx=args.n_ctx, threads=args.threads, prompt_style=args.prompt, lazy=True
    )
    with engine:
        history = None
        if args.history:
            from triage.store import features as feat
            from triage.store.history import History
            from triage.store.training import training_rows

            ident = feat.Identity(engine.sha256, engine.format_for("label").id, pack.hash)
            source = Path(args.history_file) if args.history_file else None
            with History.open_readonly(source, must_exist=source is not None) as h, h.guard():  # only read
                if h.notice:
                    err.print(f"triage: note: {printable(h.notice)}", markup=False, highlight=False)
                history = training_rows(h, pack, ident)
            err.print(
                f"triage: the history holds {len(history.rows)} labelled ticket(s) for pack {printable(pack.name)}: "
                f"{history.kept} with what a head reads kept, {history.to_score} to score (features gone, or "
                "scored with another model, pack or prompt format)",
                markup=False,
                highlight=False,
            )
        from triage.learning.sources import merge

        merged = merge(sets, history)
        for note in merged.notes:
            err.print(f"triage: {printable(note)}", style="dim", markup=False, highlight=False)
        rows = merged.rows.limit(args.limit)
        if not rows.rows:
            raise InputError(f"no labelled row for pack {pack.name!r} in {rows.source}")
        held = None
        if args.holdout is not None:
            from triage.learning.labelled import split_by_id

            held, rows = split_by_id(rows, 1 - args.holdout)
            if not held.rows or not rows.rows:
                raise InputError(
                    f"--holdout {args.holdout:g} leaves {len(rows.rows)} row(s) "
                    f"to fit on and {len(held.rows)} held out; both need rows"
                )
        parts = [("learn", rows.rows)] + ([("holdout", held.rows)] if held is not None else [])
        fits: dict[str, _Fit] = {}
        for read in reads:  # with --read auto both positions, then the better by cross-validation
            known = merged.known if read == TAIL else None  # the history keeps tail features only
            run_ = score_sets(engine, pack, parts, err, "label", features=True, known=known, prior=False, read=read)
            scored = run_.sets[0]
            cut_to = engine.builder(pack, "label").limit_words(engine.n_ctx)  # what a long ticket was cut to
            if not scored.rows:
                raise InputError(f"no row of {rows.source} could be scored")
            features, logprobs, labels = fit_inputs(pack, [r.labels for r in scored.rows], scored.outcomes)
            weights, with_starter = None, None
            if starter_on(load_config()) and starter.is_builtin(pack):  # the built-in pack: its starter rows too
                srun = score_sets(
                    engine,
                    pack,
                    [("starter", starter.starter_rows(pack))],
                    err,
                    "label",
                    features=True,
                    prior=False,
                    read=read,
                )
                with_starter = starter.fit_set(
                    pack, [r.labels for r in scored.rows], scored.outcomes, srun.sets[0].rows, srun.sets[0].outcomes
                )
                features, logprobs, labels = with_starter.features, with_starter.logprobs, with_starter.labels
                weights = with_starter.weights
                err.print(f"triage: learning {with_starter.said()}", markup=False, highlight=False)
            name = (
                Path(args.output).name
                if args.output
                else _head_name(pack, args.labelled, args.history, len(scored.rows))
            )
            head, outcomes = learn_mod.fit_head(
                pack,
                features,
                logprobs,
                labels,
                **learn_mod.engine_keys(engine),
                name=name,
                read=read,
                criteria=only,
                on_criterion=lambda cid, n: err.print(
                    f"triage: fitting {printable(cid)} on {n} row(s)…", style="dim", markup=False, highlight=False
                ),
                min_per_option=args.min_per_option or learn_mod.MIN_PER_OPTION,
                rare=args.rare_options,
                refuse_worse=False,  # a head worse than zero-shot is stored, not applied (triage.evaluation.verdict)
                weights=weights,
            )
            if with_starter is not None:
                starter.rows_info(with_starter, head)
            fits[read] = _Fit(run_, scored, features, logprobs, labels, head, outcomes)
        read, why = _choose_read(fits) if len(fits) > 1 else (reads[0], None)
        run_, scored, features, logprobs, labels, head, outcomes = fits[read]
        if why is not None:
            err.print(f"triage: {why}", markup=False, highlight=False)
            head.report["read_choice"] = why
        head.report.update(
            {
                "labelled": [str(f) for f in args.labelled],
                "history": bool(args.history),
                "n_ctx": engine.n_ctx,
                "model": engine.name,
                "rows": len(scored.rows),
                "cut": scored.cut,
            }
        )
    kept = sum(s_.known for s_ in run_.sets)
    loaded = "" if getattr(engine, "loaded", True) else " · nothing to score, so the model was not loaded"
    err.print(
        f"cache: {run_.hits} hit(s), {run_.misses} scored, {kept} kept in the "
        f"history · {scored.cut} ticket(s) cut to {cut_to}{loaded}",
        markup=False,
        highlight=False,
    )
    if not head.criteria:
        for o in outcomes:
            err.print(f"triage: not learned: {printable(o.refused or '')}", style="yellow", markup=False)
        raise InputError(
            "no criterion could be learned; nothing written",
            hint="label at least --min-per-option rows for two or more options of a criterion",
        )
    results = None
    if held is not None:
        from triage.evaluation.holdout import brief, holdout_metrics
        from triage.store.files import json_safe

        results = holdout_metrics(pack, head, scored, run_.sets[1], only)
        head.report["holdout"] = json_safe({"fraction": args.holdout, **brief(results)})
    from triage.evaluation.verdict import mark, verdicts

    found = verdicts(outcomes, results, apply=args.apply)
    mark(head, found)
    # First the verdicts, one plain line per criterion; then how each was fitted and the tables.
    for v in found:
        style = "yellow" if v.applied is False or v.weak else "green" if v.applied else "dim"
        out.print(printable(v.line), style=style, markup=False, highlight=False)
    for o in outcomes:
        for w in o.warnings:
            err.print(f"triage: warning: {printable(w)}", style="yellow", markup=False)
        if o.refused:
            continue
        zero = _zero_shot_bacc(logprobs[o.criterion], labels[o.criterion])
        back = f" · left to zero-shot: {', '.join(o.backoff)}" if o.backoff else ""
        how = (
            f"{o.cv['folds']}-fold CV balanced accuracy {o.cv['balanced_accuracy']:.3f}"
            if o.cv.get("folds")
            else "not cross-validated"
        )
        out.print(
            printable(
                f"{o.criterion}: learned from n={o.n} "
                f"({', '.join(f'{k} {v}' for k, v in o.counts.items())}) · C={o.c:g} · "
                f"{how} (zero-shot on the same rows {zero:.3f}){back}"
            ),
            markup=False,
            highlight=False,
        )
    if results is not None:
        from triage.evaluation.holdout import print_holdout

        print_holdout(results, out, fraction=args.holdout, fit_n=len(scored.rows))
    held_back = head.held_back()
    save_fit(
        head,
        out,
        output=args.output,
        no_store=args.no_store,
        write=head_file.write_head,
        store=fitstore.store_head,
        applied=(
            "not applied: every criterion it learned is stored, not applied (--apply applies them)"
            if held_back and len(held_back) == len(head.criteria)
            else f"applied automatically for this model, pack and prompt format, except {', '.join(held_back)}: "
            "stored, not applied"
            if held_back
            else None
        ),
    )
    if not args.no_store:  # what `triage score` will now apply, by the same policy
        from triage.learning.fit import choose_fits
        from triage.scoring.options import ScoreOptions

        product = ScoreOptions(criteria=only)  # the options `triage score` runs with
        policy = choose_fits(engine, pack, product, FitRequest(no_calibration=True))
        for fit_note in policy.notes:
            lead = "`triage score` with this model and pack: " if fit_note.applied else "note: "
            err.print(f"triage: {lead}{printable(fit_note.text)}", markup=False)
    return 0


AUTO_TOLERANCE = 0.01  # the shared position is chosen unless it cross-validates this much worse than the tails


class _Fit(NamedTuple):
    """What one read position learned: its scoring, the fit's inputs, the head and each criterion's outcome."""

    run: ScoringRun
    scored: Scored
    features: dict[str, np.ndarray]
    logprobs: dict[str, np.ndarray]
    labels: dict[str, list[int]]
    head: Head
    outcomes: list[LearnOutcome]


def _choose_read(fits: dict[str, _Fit]) -> tuple[str, str]:
    """With --read auto: the shared position unless its heads cross-validate worse than the tails' (mean balanced
    accuracy over the criteria both learned, by more than :data:`AUTO_TOLERANCE`), or it learns fewer criteria."""
    tail, shared = list(fits)
    cv = {
        r: {o.criterion: o.cv["balanced_accuracy"] for o in f.outcomes if not o.refused and o.cv.get("folds")}
        for r, f in fits.items()
    }
    both = sorted(set(cv[tail]) & set(cv[shared]))
    if len(cv[shared]) < len(cv[tail]) or not both:
        return (
            tail,
            f"read position: {tail} (the shared position learned {len(cv[shared])} criteria, "
            f"the tails {len(cv[tail])})",
        )
    mt = sum(cv[tail][c] for c in both) / len(both)
    ms = sum(cv[shared][c] for c in both) / len(both)
    pick = shared if ms >= mt - AUTO_TOLERANCE else tail
    return pick, (
        f"read position: {pick} (cross-validated balanced accuracy {ms:.3f} at the shared position, {mt:.3f} at the"
        f" tails, mean over {len(both)} criteria; the shared position unless it is more than {AUTO_TOLERANCE} worse)"
    )


def _head_name(pack: Pack, files: list[str], history: bool, rows: int) -> str:
    """A readable name for the head: what it was learned from."""
    what = [Path(f).name for f in files] + (
        [f"{rows} labelled tickets in the history"] if history and not files else ["the history"] if history else []
    )
    return f"{pack.name} head from {' + '.join(what)}"


def _zero_shot_bacc(logprobs: np.ndarray, y: list[int]) -> float:
    """Balanced accuracy of the zero-shot readout on the training rows (what learning is measured against)."""
    import numpy as np

    from triage.evaluation.metrics import balanced_accuracy

    lp = np.asarray(logprobs)
    return balanced_accuracy(y, [int(i) for i in lp.argmax(axis=1)], lp.shape[1])
