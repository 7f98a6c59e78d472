"""``triage eval``: measure decision quality on labelled tickets, every debiasing variant side by side."""

from __future__ import annotations

import argparse
from pathlib import Path

from triage.commands._input import INPUT_HELP

NAME = "eval"
ORDER = 40
HELP = "measure accuracy and calibration on labelled tickets (raw, cyclic, prior, calibrated, baseline)"
DESCRIPTION = (
    """\
Score labelled tickets (JSON Lines: {"id", "text", "labels": {criterion: option}})
against a criteria pack and report, per criterion and variant: accuracy, balanced
accuracy, macro-F1, ECE (15 bins), Brier, NLL, the order-flip rate, mean
coverage and the confusion matrix.

Every ticket is scored once, with every cyclic option ordering; the variants
are read from that one pass:
  raw           the pack-order readout alone
  cyclic        all rotations combined
  cyclic+prior  cyclic, with the content-free ("N/A" ticket) prior divided out
  calibrated    a temperature and option biases fitted on --train (or --split)
                over cyclic (--prior: cyclic+prior), or a stored calibration
                that matches the model, pack and prompt format
  raw+calibrated  the same fit over the pack-order readout alone (the letter
                readout in pack order only, with a calibration)
  learned       a learned head (what `triage learn` fits: logistic regression
                on the answer position's hidden-state features and the option
                log-probs), fitted on --train; label readout only (numpy
                alone). With --curve, also fitted on the first 25, 50,
                100, 150 training rows, beside calibration and the baseline.
                Without --train: a head from `triage learn` (--head, or the
                stored one for this model, pack and prompt format), measured
                on TICKETS (needs only numpy)
  baseline      TF-IDF + logistic regression (balanced) on the same training
                labels (needs scikit-learn: the `eval` extra)

Readouts are cached per (model, pack, prompt format, context size, ticket text
as read) in the user cache dir, so a re-run does not score again (a damaged
cache file is moved aside and its readouts computed again). A ticket longer
than the ticket budget (the same for every command and the app) has its middle
cut, and the cut count is shown; eval's default context is 1024 tokens, room
enough for the budget beside most packs.

--split F makes a dev/train split from TICKETS alone: a row trains when
sha256("triage-split/1:" + id) read as a fraction of 2^64 is below F. The
split depends only on the ids, not on the file order. --save-split DIR writes
DIR/dev.jsonl and DIR/train.jsonl and exits.

examples:
  triage eval dev.jsonl --pack criteria.toml --train train.jsonl --json out.json
  triage eval tickets.jsonl --pack criteria.toml --split 0.5 --limit 100
  triage eval export.csv --pack team.toml --text Subject,Description --label queue=Group --split 0.7

"""
    + INPUT_HELP
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from triage.commands._flags import add_model_options, add_prompt_option
    from triage.commands._input import add_input_arguments
    from triage.lab.options import DEFAULT_READOUT, READOUTS

    p.add_argument(
        "tickets",
        metavar="TICKETS",
        help="labelled tickets to evaluate on (JSON Lines, or an export: CSV, JSON, Parquet)",
    )
    add_model_options(p, n_ctx=1024)
    add_input_arguments(p)
    p.add_argument("--pack", metavar="CRITERIA.toml", help="criteria pack (default: the built-in support pack)")
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--train", metavar="TRAIN.jsonl", help="labelled tickets to fit the calibration and the baseline on"
    )
    src.add_argument(
        "--split", type=float, metavar="F", help="hold the share F of TICKETS (by id hash) out as training rows"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with --save-split: replace existing dev.jsonl / train.jsonl (never the input)",
    )
    p.add_argument(
        "--save-split", metavar="DIR", help="with --split: write DIR/dev.jsonl and DIR/train.jsonl, then exit"
    )
    p.add_argument("--limit", type=int, metavar="N", help="evaluate the first N usable rows only (file order)")
    p.add_argument(
        "--train-limit", type=int, metavar="N", help="train on the first N usable training rows (default: --limit)"
    )
    add_prompt_option(p)
    p.add_argument(
        "--readout",
        choices=READOUTS,
        default=DEFAULT_READOUT,
        help=f"read options by name (label, default {DEFAULT_READOUT}: what triage scores with, one tail per "
        "criterion) or by letter in every rotation (letter: to compare, as `triage bench` does)",
    )
    p.add_argument(
        "--prior",
        action="store_true",
        help="fit the calibration on prior-corrected log-probs (cyclic+prior for letters); triage's scoring "
        "applies no prior, so this measures it",
    )
    p.add_argument("--calibration", metavar="CAL.json", help="apply this calibration file (without --train)")
    p.add_argument("--no-calibration", action="store_true", help="do not apply a stored calibration automatically")
    p.add_argument(
        "--min-per-option",
        type=int,
        default=None,
        metavar="N",
        help="fewest training labels per option to fit a criterion (default 5)",
    )
    p.add_argument(
        "--rare-options",
        choices=("refuse", "freeze"),
        default="refuse",
        help=(
            "calibration: an option below --min-per-option refuses the criterion (default), or holds its "
            "bias at 0 (the learned variant leaves such an option to zero-shot, as `triage learn` does)"
        ),
    )
    p.add_argument(
        "--cal-weighting",
        choices=("none", "balanced"),
        default="none",
        help="calibration objective: plain NLL (default) or class-balanced NLL",
    )
    p.add_argument("--no-baseline", action="store_true", help="skip the TF-IDF baseline")
    p.add_argument(
        "--no-learn",
        action="store_true",
        help="skip the learned variant (it needs each ticket's features: tickets cached without them are scored again)",
    )
    p.add_argument(
        "--read",
        metavar="WHERE",
        help=(
            "where the learned variant reads each ticket: tail (each criterion's question, default) or "
            "shared (one short cue after the ticket for every criterion: fewer tokens; shared:answer and "
            "shared:end name the cues). With a shared position the zero-shot and calibrated "
            "variants are read at the cue too, where no question was asked: compare their rows from a tail "
            "run. Default with --head: where that head was fitted"
        ),
    )
    p.add_argument(
        "--head",
        metavar="HEAD.npz",
        help=(
            "evaluate this learned head (without --train; default: the stored "
            "one learned for this model, pack and prompt format, if any)"
        ),
    )
    p.add_argument(
        "--curve",
        metavar="N,N,...",
        default="25,50,100,150",
        help=(
            "learning curve: fit learned, calibrated and the baseline on the "
            "first N training rows (default 25,50,100,150; 'none' to skip)"
        ),
    )
    p.add_argument(
        "--confusion", action="store_true", help="print the confusion matrix of every variant (default: the last one)"
    )
    p.add_argument("--json", dest="json_path", metavar="PATH", help="also write the report as JSON")


def curve_sizes(text: str) -> tuple[int, ...]:
    """``--curve``: ``25,50,100`` → (25, 50, 100); ``none`` → ()."""
    from triage.errors import InputError

    if text.strip().lower() in ("", "none"):
        return ()
    try:
        sizes = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise InputError(f"--curve wants training-row counts like 25,50,100,150 (or none), got {text!r}") from None
    if any(n < 2 for n in sizes):
        raise InputError(f"--curve counts must be at least 2, got {text!r}")
    return sizes


def run(args: argparse.Namespace) -> int:
    import time

    from triage.commands._input import labelled_rows
    from triage.domain.pack import resolve_pack
    from triage.domain.ticket import printable
    from triage.errors import InputError
    from triage.evaluation.labelled_runs import load_for, report_bad, report_consoles, score_sets
    from triage.evaluation.report import print_report, write_json
    from triage.evaluation.runner import CalibrationPlan, build_report, set_summary
    from triage.lab.options import LabOptions
    from triage.lab.scorer import orderings_for
    from triage.lab.seams import plain_readout
    from triage.learning.fit import FitRequest, choose_fits
    from triage.learning.labelled import split_by_id, write_jsonl
    from triage.scoring.calibrate import MIN_PER_OPTION

    out, err = report_consoles()
    readout, prior = args.readout, args.prior  # the product's unless asked: label, no prior
    if args.head and (args.train or args.split):
        raise InputError(
            "--head evaluates a learned head; leave out --train/--split (eval then fits its own), or leave out --head"
        )
    if args.head and (readout != "label" or args.no_learn):
        raise InputError(
            "--head needs the label readout and the learned variant; leave out --readout letter / --no-learn, or --head"
        )
    if args.calibration and (args.train or args.split):
        raise InputError("--calibration applies a fitted file; leave out --train/--split, or leave out --calibration")
    if args.save_split and args.split is None:
        raise InputError("--save-split needs --split F")
    pack = resolve_pack(args.pack)
    tickets = labelled_rows(args, args.tickets, pack)
    report_bad(tickets, err)
    train = None
    if args.split is not None:
        tickets, train = split_by_id(tickets, args.split)
        if args.save_split:
            from triage.store.outputs import check_output

            folder = Path(args.save_split)
            paths = [
                check_output(
                    folder / name, inputs=[args.tickets], force=args.force, what="split", option="--save-split"
                )
                for name in ("dev.jsonl", "train.jsonl")
            ]
            write_jsonl(tickets.rows, paths[0])
            write_jsonl(train.rows, paths[1])
            out.print(
                f"wrote {len(tickets.rows)} dev rows to {folder / 'dev.jsonl'} "
                f"and {len(train.rows)} training rows to {folder / 'train.jsonl'}"
            )
            return 0
    elif args.train:
        train = labelled_rows(args, args.train, pack)
        report_bad(train, err)
    dev = tickets.limit(args.limit)
    train_limit = args.train_limit if args.train_limit is not None else args.limit
    train = train.limit(train_limit) if train is not None else None

    from triage.scoring.cue import TAIL, check_read, describe_read

    engine = load_for(  # the weights only if a ticket is not in the cache already (triage.scoring.lazy)
        err, model=args.model, n_ctx=args.n_ctx, threads=args.threads, prompt_style=args.prompt, lazy=True
    )
    with engine:
        fit_kw = {
            "min_per_option": args.min_per_option or MIN_PER_OPTION,
            "rare": args.rare_options,
            "weighting": args.cal_weighting,
        }
        plan = CalibrationPlan(prior=prior, fit_kw=fit_kw)
        plan.learn = train is not None and readout == "label" and not args.no_learn
        plan.learn_kw = {
            "min_per_option": args.min_per_option or MIN_PER_OPTION,
            "rare": "backoff",
            "hidden_width": engine.native.n_embd,
        }  # as `triage learn` (fit_head) by default
        plan.curve = curve_sizes(args.curve) if plan.learn else ()
        # With --train eval fits its own; without, it measures what `triage score` would apply (the one fit policy).
        # It reads every base a calibration may sit on, so none is passed over for its orderings or prior.
        request = FitRequest(
            head=args.head,
            no_head=train is not None or readout != "label" or args.no_learn,
            calibration=args.calibration,
            no_calibration=train is not None or args.no_calibration,
        )
        options = LabOptions(readout=readout, orderings=orderings_for(readout), prior=prior)
        fits = choose_fits(engine, pack, options.product, request, any_base=True, read_as=options.read_as)
        for note in fits.notes:
            if not note.applied:
                err.print(f"triage: note: {printable(note.text)}", markup=False)
        plan.stored, plan.stored_path = fits.calibration, fits.calibration_path
        plan.stored_head, plan.stored_head_path = fits.head, fits.head_path
        if plan.stored_head is not None:
            name, path = printable(plan.stored_head.name), printable(plan.stored_head_path)
            err.print(f"triage: evaluating learned head '{name}' ({path})", markup=False)
        if plan.stored is not None:
            # Eval has every base a calibration can sit on (raw, cyclic, cyclic+prior) from its one pass.
            unread = plan.stored.orderings != options.effective_orderings
            if unread and not (readout == "letter" and plan.stored.orderings == "none"):
                raise InputError(
                    f"calibration {plan.stored_path} was fitted on "
                    f"orderings={plan.stored.orderings}, which eval does not read"
                )
            err.print(f"triage: applying calibration {printable(plan.stored_path)}", markup=False)
        parts = [("dev", dev.rows)] + ([("train", train.rows)] if train is not None else [])
        t0 = time.perf_counter()
        read = check_read(args.read) if args.read else None
        if plan.stored_head is not None:
            if read is not None and read != plan.stored_head.read:
                raise InputError(
                    f"head {plan.stored_head_path} was fitted on {describe_read(plan.stored_head.read)}, "
                    f"not on {describe_read(read)}",
                    hint=f"leave out --read, or give --read {plan.stored_head.read}",
                )
            read = plan.stored_head.read
        want = plan.learn or plan.stored_head is not None
        run_ = score_sets(engine, pack, parts, err, readout, features=want, read=read or TAIL)
        wall = time.perf_counter() - t0
        cut_to = engine.builder(pack, plain_readout(options)).limit_words(engine.n_ctx)  # what a long ticket was cut to
        dev_scored = run_.sets[0]
        plan.train = run_.sets[1] if train is not None else None
        report, _ = build_report(
            pack,
            dev_scored,
            prior=run_.prior,
            plan=plan,
            baseline=not args.no_baseline,
            engine_info={"model_sha256": engine.sha256, "prompt_format": engine.format_for(readout).id},
            readout=readout,
        )
        report.update(
            {
                "model": engine.model_info,
                "prompt_format": engine.format_for(readout).id,
                "read": read or TAIL,
                "attention": engine.native.attention,
                "n_ctx": engine.n_ctx,
                "tickets": set_summary(tickets, dev_scored, args.limit),
                "train": set_summary(train, plan.train, train_limit)
                if train is not None and plan.train is not None
                else None,
                "split": args.split,
                "calibration_settings": (
                    {"prior": prior, **plan.fit_kw} if train is not None else {"stored": plan.stored_path}
                ),
                "head": plan.stored_head_path,
                "cache": {"hits": run_.hits, "scored": run_.misses, "path": run_.cache_path},
                "timing": {"wall_s": round(wall, 2), "scoring_s": round(run_.scored_s, 2)},
            }
        )
    report = {"schema": report.pop("schema"), **report}
    err.print(
        f"cache: {run_.hits} hit(s), {run_.misses} scored ({run_.scored_s:.0f} s of scoring) · "
        f"{dev_scored.cut} dev ticket(s) cut to {cut_to}"
        + (f", {plan.train.cut} training" if plan.train is not None else ""),
        markup=False,
        highlight=False,
    )
    head = f"{engine.name} · {engine.format_for(readout).id} · pack {pack.name} {pack.hash} · n_ctx {engine.n_ctx}"
    out.print(head, style="bold", markup=False, highlight=False)
    print_report(report, out, confusion=args.confusion)
    if args.json_path:
        write_json(report, args.json_path)
        err.print(f"triage: wrote {args.json_path}", markup=False)
    skipped = report["tickets"]["skipped"] + (report["train"]["skipped"] if report.get("train") else 0)
    return 1 if skipped and not dev_scored.rows else 0
