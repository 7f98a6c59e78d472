"""``triage bench``: measure scoring speed per mode, prefix reuse, exactness and the stable cache."""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "bench"
ORDER = 50
HELP = "measure speed per mode, the gain from prefix reuse, drift and the stable cache"
DESCRIPTION = """\
Score a fixed set of real tickets (assets/bench-tickets.jsonl: customer tweets,
GitHub issues, CFPB complaints) with every mode, interleaved ticket by ticket
after a warm-up, and report medians and spread:

  full             every prompt evaluated whole (the baseline)
  serial_truncate  prefix once, then each tail; truncate back to the prefix
  serial_restore   the same, restoring a saved prefix state after each tail
  fanout           prefix once, all tails in one batch
  fanout_learned   fanout with a learned head on every criterion (random weights
                   of the real shape: what a head costs; label readout only)
  shared_learned   the same with the head read at the shared position: one cue
                   after the ticket (shared:answer) instead of every tail
  letter_serial    the letter readout in every rotation, serial/truncate
  serial_long      serial_truncate with a pack whose stable block is ~3x longer
  split            serial's token split without reuse (exactness reference)

The report opens with a plain summary from the run's own figures (how long a
warm ticket takes, how many times faster than scoring each question whole, and
against llama.cpp's raw speed on the same tokens), then the detail;
bench/README.md's "Glossary" defines every term it prints.

Reuse modes start each ticket as a session does between tickets: the pack's
stable block resident, the ticket new. Figures: per-ticket and per-criterion
ms, tokens evaluated, speed-up over full against the token bound, a tail cost
model (fixed ms + ms/token) from single tails of 8-256 tokens, llama.cpp's raw
throughput on fresh sequences, drift (serial vs full, vs the same split: 0),
cache hit rate, cold vs warm first ticket after a restart, long vs short
stable block, model load time and peak RSS. The load average is recorded, and
a busy machine is flagged: on 2 cores, another model process ruins timings.

Paste figures (every run, --quick too): the set's first tweet and first long
ticket (cut to the 384-token ticket budget), each scored cold, then prefilled
(the prompt up to its tails, as while a ticket is pasted) and scored again:
medians of the cold score, the score after the prefill and the tails alone,
side by side (docs/engine.md, "Prefill while pasting"; 5 repeats, --quick 3).

--quick (under a minute on a quiet 2-core machine with the 0.5B stand-in;
bench/README.md, "Running it", has the measured times): 1 ticket (a tweet), split for the first 2 criteria, the tail
probe at 8/96 tokens and the typical tail size (1 timing each), the warm-up
is the stable block's prefill, no cold/warm restart and no long-stable-block
pack unless --long-pack is given. The cache hit rate is then the steady one.
The default pack, its criteria, and every mode (full, serial, fanout,
fanout_learned, shared_learned, letter_serial) are those of a full run; letter_serial asks every rotation,
the other modes read by name (--readout label, the default).
The default run (a few minutes on the same machine): 3 tickets (the first
tweet, medium and long ticket of the set; --limit 12 for all), split for the
first 2 criteria on the tweet and the medium ticket, the probe at 8-256
tokens on the tweet and the long ticket, the cold/warm restart with both
packs over all three.

examples:
  triage bench --quick --model qwen2.5-coder-0.5b --json /tmp/b.json
  triage bench --wait-quiet 600 --json bench/results/qwen2.5-coder-0.5b.json"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from triage.commands._flags import add_model_options, add_prompt_option
    from triage.lab.options import DEFAULT_READOUT, ORDERINGS, READOUTS

    add_model_options(p)
    p.add_argument("--pack", metavar="PATH", help="criteria pack (default: the built-in support pack)")
    p.add_argument(
        "--long-pack",
        metavar="PATH",
        help="pack for the long-stable-block measurement (default: assets/long-stable-pack.toml)",
    )
    p.add_argument("--no-long-pack", action="store_true", help="skip the long-stable-block measurement")
    p.add_argument(
        "--tickets", metavar="TICKETS.jsonl", help='tickets to score ({"id", "text"} per line; default: the bench set)'
    )
    p.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help="use the first N tickets of the file (default: 1 of each length; --quick: the one flagged quick)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="a run of under a minute: 1 ticket, orderings none, smaller probe, no restart (see above)",
    )
    p.add_argument("--repeat", type=int, default=1, metavar="N", help="score the ticket set N times (default 1)")
    p.add_argument(
        "--readout",
        choices=READOUTS,
        default=DEFAULT_READOUT,
        help=f"readout of the full, serial and fanout modes (default {DEFAULT_READOUT}); "
        "letter_serial is always letters in every rotation",
    )
    p.add_argument(
        "--orderings",
        choices=ORDERINGS,
        default=None,
        help="with --readout letter: option orderings (default cyclic; --quick: none)",
    )
    add_prompt_option(p)
    p.add_argument("--probe-reps", type=int, metavar="N", help="timings per tail-probe size (default 2; --quick 1)")
    p.add_argument(
        "--json", dest="json_path", metavar="PATH", help="write the results as JSON (and the chart beside it as .svg)"
    )
    p.add_argument("--svg", metavar="PATH", help="write the chart here (default: the --json path with .svg)")
    p.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="first wait up to SECONDS for the 1-minute load average to fall below 0.7 (polls every 30 s)",
    )


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from triage.assets_path import asset
    from triage.bench.chart import chart_from_report
    from triage.bench.machine import cores, is_busy, load_average, wait_until_quiet
    from triage.bench.report import build_report, write_json
    from triage.bench.runner import BenchRunner, EngineSpec
    from triage.bench.terminal import print_summary
    from triage.bench.workload import LONG_PACK_ASSET, make_workload
    from triage.domain.pack import load_pack, resolve_pack
    from triage.model.resolve import resolve_model
    from triage.scoring.loader import engine_settings

    out = Console()
    if not out.is_terminal:  # a log file: wide enough for the tables
        out = Console(width=120)
    err = Console(stderr=True)
    pack = resolve_pack(args.pack)
    # --quick leaves the long-stable-block measurement out unless --long-pack asks for it
    skip_long = args.no_long_pack or (args.quick and not args.long_pack)
    long_pack = None if skip_long else load_pack(args.long_pack or asset(LONG_PACK_ASSET))
    readout = args.readout  # bench measures a fixed workload, whatever the user's config
    workload = make_workload(
        pack=pack,
        long_pack=long_pack,
        tickets_path=Path(args.tickets) if args.tickets else None,
        quick=args.quick,
        limit=args.limit,
        repeats=args.repeat,
        orderings=args.orderings,
        readout=readout,
    )
    ref = resolve_model(args.model)
    if ref.notice:
        err.print(f"triage: {ref.notice}", markup=False)
    settings = engine_settings(args.n_ctx, args.threads)
    spec = EngineSpec(ref.path, ref.name, ref.sha256, ref.stand_in, settings["n_ctx"], settings["threads"], args.prompt)

    wait = None
    if args.wait_quiet > 0:
        wait = wait_until_quiet(args.wait_quiet, say=lambda m: err.print(f"triage: {m}", markup=False))
    load = load_average()
    if is_busy(load):
        err.print(
            f"[bold yellow]warning:[/] load average {load[0]:.2f} on {cores()} cores: other processes are running, "
            "and llama.cpp's spinning threads make timings noisy (try --wait-quiet 600)"
        )

    runner = BenchRunner(spec, workload, probe_reps=args.probe_reps or (1 if args.quick else 2))
    steps = len(runner.plan())
    with Progress(
        TextColumn("[bold]bench[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    ) as progress:
        task = progress.add_task("starting", total=steps)
        data = runner.run(on_step=lambda label: progress.update(task, advance=1, description=label))
    report = build_report(data, wait=wait)
    print_summary(report, out)
    if args.json_path or args.svg:
        svg = chart_from_report(report)
        if args.json_path:
            json_path = Path(args.json_path)
            write_json(report, json_path)
            out.print(f"wrote {json_path}")
        svg_path = Path(args.svg) if args.svg else Path(args.json_path).with_suffix(".svg")
        svg_path.parent.mkdir(parents=True, exist_ok=True)
        svg_path.write_text(svg, encoding="utf-8")
        out.print(f"wrote {svg_path}")
    return 0
