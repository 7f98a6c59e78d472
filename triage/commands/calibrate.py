"""``triage calibrate``: fit a per-criterion temperature and option biases on labelled tickets."""

from __future__ import annotations

import argparse
from pathlib import Path

from triage.commands._input import INPUT_HELP

NAME = "calibrate"
ORDER = 45
HELP = "fit a calibration (temperature + option biases) on labelled tickets"
DESCRIPTION = (
    """\
Score labelled tickets (JSON Lines: {"id", "text", "labels": {criterion: option}})
with every cyclic option ordering and fit, per criterion, a temperature T and a
bias per option on the combined log-probs: p = softmax(logp / T + b). The fit is
regularised toward T = 1, b = 0 (L2 on log T and on b). By default it is fitted
for what triage scores with: options read by name, no prior. --readout letter,
--orderings and --prior fit for the alternatives `triage eval` compares (with
--prior on the prior-corrected log-probs; with --readout letter --orderings none
on the letters in pack order alone); `triage score` and the app never apply
those.

A criterion with fewer than --min-per-option gold labels for some option is
refused and named (or, with --rare-options freeze, fitted with those options'
biases held at 0). A quarter of the rows (by id hash) is held out first to
check that the fit helps (NLL, ECE, balanced accuracy before and after); the
saved fit then uses all rows.

The file records the model sha256, pack hash and prompt format; it is written
to -o and also stored in the user data dir (calibrations/), from where `triage
score`, the app and `triage eval` apply it when all three match and it was
fitted for the options they score with. Readouts are
shared with `triage eval`'s cache: tickets it scored are not scored again.

examples:
  triage calibrate train.jsonl --pack criteria.toml -o cal.json
  triage calibrate train.jsonl --pack criteria.toml --prior -o cal.json
  triage calibrate export.csv --pack team.toml --text Subject,Description --label queue=Group -o cal.json

"""
    + INPUT_HELP
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from triage.commands._flags import add_model_options, add_prompt_option
    from triage.commands._input import add_input_arguments
    from triage.lab.options import DEFAULT_ORDERINGS, DEFAULT_READOUT, ORDERINGS, READOUTS

    p.add_argument(
        "train", metavar="TRAIN", help="labelled tickets to fit on (JSON Lines, or an export: CSV, JSON, Parquet)"
    )
    add_model_options(p, n_ctx=1024)
    add_input_arguments(p)
    p.add_argument("--pack", metavar="CRITERIA.toml", help="criteria pack (default: the built-in support pack)")
    p.add_argument(
        "-o", "--output", metavar="CAL.json", help="write the calibration here (it is also stored in the user data dir)"
    )
    p.add_argument("--force", action="store_true", help="replace an existing -o file (never an input)")
    p.add_argument(
        "--prior",
        action="store_true",
        help="fit on prior-corrected log-probs, for `triage eval --prior` (triage's scoring applies no prior)",
    )
    p.add_argument(
        "--readout",
        choices=READOUTS,
        default=DEFAULT_READOUT,
        help=f"fit for the label readout (options by name, default {DEFAULT_READOUT}: what triage scores with) "
        "or the letter readout (for `triage eval --readout letter`)",
    )
    p.add_argument(
        "--orderings",
        choices=ORDERINGS,
        default=DEFAULT_ORDERINGS,
        help="with --readout letter: fit for every rotation (cyclic) or the pack order only "
        f"(default {DEFAULT_ORDERINGS})",
    )
    p.add_argument("--limit", type=int, metavar="N", help="fit on the first N usable rows only")
    add_prompt_option(p)
    p.add_argument(
        "--min-per-option",
        type=int,
        default=None,
        metavar="N",
        help="fewest gold labels per option to fit a criterion (default 5)",
    )
    p.add_argument(
        "--rare-options",
        choices=("refuse", "freeze"),
        default="refuse",
        help="an option below --min-per-option: refuse the criterion (default), or hold its bias at 0",
    )
    p.add_argument(
        "--weighting",
        choices=("none", "balanced"),
        default="none",
        help="objective: plain NLL (default) or class-balanced NLL (favours balanced accuracy over calibration)",
    )
    p.add_argument(
        "--holdout",
        type=float,
        default=None,
        metavar="F",
        help="share of rows held out to check the fit (default 0.25; 0 to skip)",
    )
    p.add_argument("--no-store", action="store_true", help="do not store the result in the user data dir")


def run(args: argparse.Namespace) -> int:
    from triage.commands._input import labelled_rows
    from triage.domain.pack import resolve_pack
    from triage.domain.ticket import printable
    from triage.errors import InputError
    from triage.evaluation.calibrating import fit_calibration
    from triage.evaluation.labelled_runs import load_for, report_bad, report_consoles, save_fit, score_sets
    from triage.evaluation.runner import gold
    from triage.evaluation.variants import readings
    from triage.lab.options import LabOptions
    from triage.lab.seams import plain_readout
    from triage.learning import fitstore
    from triage.scoring import calibrate as cal_mod

    out, err = report_consoles()
    if not args.output and args.no_store:
        raise InputError("with --no-store, give -o CAL.json: the fit would go nowhere")
    if args.output:  # now, not after the scoring and the fit
        from triage.store.outputs import check_output, check_writable

        check_writable(check_output(args.output, inputs=[args.train], force=args.force, what="calibration"))
    # The fit is made on the log-probs of these options (the product's by default: `triage score` applies it).
    options = LabOptions(readout=args.readout, orderings=args.orderings, prior=args.prior)
    readout, orderings, prior = options.readout, options.effective_orderings, options.prior
    if prior and readout == "letter" and orderings == "none":
        raise InputError("--prior is fitted on cyclic log-probs; leave it out with --orderings none")
    holdout = cal_mod.HOLDOUT_FRACTION if args.holdout is None else args.holdout
    if not 0 <= holdout < 1:
        raise InputError(f"--holdout wants a share between 0 and 1, got {holdout}")
    pack = resolve_pack(args.pack)
    rows = labelled_rows(args, args.train, pack)
    report_bad(rows, err)
    rows = rows.limit(args.limit)
    engine = load_for(  # the weights only if a ticket is not in the cache already (triage.scoring.lazy)
        err, model=args.model, n_ctx=args.n_ctx, threads=args.threads, prompt_style=args.prompt, lazy=True
    )
    with engine:
        run_ = score_sets(engine, pack, [("train", rows.rows)], err, readout)
        scored = run_.sets[0]
        cut_to = engine.builder(pack, plain_readout(options)).limit_words(engine.n_ctx)  # what a long ticket was cut to
        if not scored.rows:
            raise InputError(f"no row of {args.train} could be scored")
        base = {c.id: readings(c, scored.outcomes, run_.prior).base(prior, orderings) for c in pack.criteria}
        cal, outcomes = fit_calibration(
            pack,
            base,
            {c.id: gold(scored.rows, c) for c in pack.criteria},
            [r.id for r in scored.rows],
            model_sha256=engine.sha256,
            prompt_format=engine.format_for(readout).id,
            orderings=orderings,
            prior=prior,
            name=Path(args.output).name if args.output else "calibration",
            min_per_option=args.min_per_option or cal_mod.MIN_PER_OPTION,
            rare=args.rare_options,
            holdout=holdout,
            weighting=args.weighting,
        )
        cal.report.update({"train": str(args.train), "n_ctx": engine.n_ctx, "model": engine.name, "cut": scored.cut})
    err.print(
        f"cache: {run_.hits} hit(s), {run_.misses} scored · {scored.cut} ticket(s) cut to {cut_to}",
        markup=False,
        highlight=False,
    )
    for o in outcomes:
        if o.refused:
            err.print(f"triage: refused: {printable(o.refused)}", style="yellow", markup=False)
            continue
        bias = ", ".join(f"{k} {v:+.2f}" for k, v in (o.bias or {}).items())
        out.print(
            printable(f"{o.criterion}: n={o.n}  T={o.temperature:.3f}  bias {bias}"), markup=False, highlight=False
        )
        if o.holdout:
            b, a = o.holdout["before"], o.holdout["after"]
            out.print(
                f"  holdout n={o.holdout['n']} (fit on {o.holdout['fit_n']}): NLL {b['nll']:.3f} → {a['nll']:.3f} · "
                f"ECE {b['ece']:.3f} → {a['ece']:.3f} · balanced acc "
                f"{b['balanced_accuracy']:.3f} → {a['balanced_accuracy']:.3f}",
                markup=False,
                highlight=False,
            )
        for w in o.warnings:
            err.print(f"triage: warning: {printable(w)}", style="yellow", markup=False)
    if not cal.criteria:
        raise InputError(
            "no criterion could be fitted; nothing written",
            hint="label more rows per option, or pass --rare-options freeze",
        )
    save_fit(
        cal,
        out,
        output=args.output,
        no_store=args.no_store,
        write=cal_mod.write_calibration,
        store=fitstore.store_calibration,
    )
    return 1 if any(o.refused for o in outcomes) else 0
