"""One product path: `triage score`, `triage serve` and the Ray job score with ``ScoreOptions()`` (and
``--criteria``). The research knobs left their flags, each with a message saying what replaced it, and
stay on the commands that measure them (bench, eval, calibrate), with choices from options.py."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import re
from pathlib import Path

import pytest

from triage.cli import build_parser, main
from triage.domain.pack import parse_pack
from triage.errors import InputError
from triage.lab import options as lab_opts
from triage.scoring import options as opts
from triage.scoring.options import ScoreOptions
from triage.settings import RETIRED, retired_flag, retired_message

REMOVED = [
    ["--readout", "letter"],
    ["--orderings=cyclic"],
    ["--mode", "serial"],
    ["--strategy", "restore"],
    ["--prior"],
    ["--pack-tokens", "512"],
]


def command(name: str) -> argparse.ArgumentParser:
    return build_parser()._subparsers._group_actions[0].choices[name]  # type: ignore[union-attr]


def small_pack():  # type: ignore[no-untyped-def]
    options = [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}]
    return parse_pack({"criterion": [{"id": "topic", "question": "Q?", "options": options}]})


@pytest.mark.parametrize("name", ["score", "serve"])
def test_score_and_serve_help_no_longer_list_the_research_flags(name: str) -> None:
    text = command(name).format_help()
    for key in RETIRED:
        flag = retired_flag(key)
        assert not re.search(rf"(?<![\w-]){flag}(?![\w-])", text), f"{name} --help still lists {flag}"
    for word in ("orderings", "letter readout", "content-free prior", "serial mode", "packed"):
        assert word not in text, f"{name} --help still says {word!r}"
    assert "--model" in text and "--pack" in text


@pytest.mark.parametrize("name", ["score", "serve"])
@pytest.mark.parametrize("argv", REMOVED, ids=lambda a: a[0].split("=")[0])
def test_a_removed_flag_exits_2_saying_what_replaced_it(
    name: str, argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "no-model.gguf")
    with pytest.raises(SystemExit) as stopped:
        main([name, *argv, "--model", missing])
    assert stopped.value.code == 2
    key = argv[0][2:].split("=")[0].replace("-", "_")
    err = capsys.readouterr().err
    assert err == f"triage: error: {retired_message(key, as_flag=True)}\n"
    assert err.startswith(f"triage: error: {argv[0].split('=')[0]} was removed: ")


def test_the_readout_message_names_where_the_letter_readout_is_measured(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["score", "--readout", "letter"])
    err = capsys.readouterr().err
    assert "--readout was removed: triage reads options by name" in err
    assert "`triage bench` and `triage eval --readout letter` compare the letter readout" in err


def test_score_and_the_ray_job_run_the_product_options(tmp_path: Path) -> None:
    from triage.commands.score import options_of, ray_job

    pack = small_pack()
    args = build_parser().parse_args(["score", "--criteria", " topic,topic "])
    assert options_of(args, pack) == ScoreOptions(criteria=("topic",))
    assert options_of(build_parser().parse_args(["score"]), pack) == ScoreOptions()
    product = opts.PRODUCT_READ  # what the product's readings are: ScoreOptions carries only criteria
    assert (product.readout, opts.DEFAULT_MODE, product.prior, product.orderings) == ("label", "fanout", False, "none")
    assert [f.name for f in dataclasses.fields(ScoreOptions)] == ["criteria"]
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "text": "hi"}\n', encoding="utf-8")
    job = ray_job(build_parser().parse_args(["score", str(src), "--ray"]), config={})
    assert job.options == ScoreOptions() and not hasattr(job, "pack_tokens")


def test_serve_scores_every_request_with_the_product_options() -> None:
    pytest.importorskip("starlette")
    from triage.serve.app import ServeSettings, prepare
    from triage.serve.requests import Invalid, parse_score

    pack = small_pack()
    settings = ServeSettings(packs={pack.name: pack})
    loop = asyncio.new_event_loop()
    try:
        job = prepare(parse_score({"id": "T-1", "text": "hi", "criteria": ["topic"]}), settings, loop)
        assert job.options == ScoreOptions(criteria=("topic",))
        assert prepare(parse_score({"text": "hi"}), settings, loop).options == ScoreOptions()
    finally:
        loop.close()
    for field in ("readout", "mode", "orderings", "prior"):
        with pytest.raises(Invalid) as bad:
            parse_score({"text": "hi", field: "letter"})
        assert bad.value.field == field and bad.value.message == f"field {field!r} was removed: {RETIRED[field]}"


def test_criteria_are_checked_against_the_pack() -> None:
    from triage.commands.score import options_of

    pack = small_pack()
    with pytest.raises(InputError, match="names no criteria"):
        options_of(build_parser().parse_args(["score", "--criteria", " , "]), pack)
    with pytest.raises(InputError, match="nope"):
        options_of(build_parser().parse_args(["score", "--criteria", "nope"]), pack)


def test_the_measuring_commands_keep_their_instruments_with_choices_from_options_py() -> None:
    actions = {name: {a.dest: a for a in command(name)._actions} for name in ("eval", "calibrate", "bench")}
    for name in ("eval", "calibrate", "bench"):
        assert tuple(actions[name]["readout"].choices) == lab_opts.READOUTS, name
        assert actions[name]["readout"].default == lab_opts.DEFAULT_READOUT == opts.DEFAULT_READOUT, name
    assert tuple(actions["calibrate"]["orderings"].choices) == lab_opts.ORDERINGS
    assert tuple(actions["bench"]["orderings"].choices) == lab_opts.ORDERINGS
    assert "prior" in actions["eval"] and "prior" in actions["calibrate"]
    args = build_parser().parse_args(["eval", "x.jsonl", "--readout", "letter", "--prior"])
    assert (args.readout, args.prior) == ("letter", True)
