"""Issue 42, parts 3 and 4, values: a value means one thing wherever it is read.

Config keys are read or refused (``server`` is read by ``score``: flag > env > config); a missing label
value in any export format is missing, never an option ``"nan"``; every switch of the environment is
read by one parser that refuses other words; ``TRIAGE_HOME`` is absolute and a folder; empty and blank
values alike; ``&nbsp;`` is empty for learn as for score; a lone surrogate is that row's error; a
config with a byte-order mark is read; a starter head that does not fit is fitted again, and one whose
file cannot be written is applied from memory. No model: the real readers, config file and head files,
``triage`` in this process (``cli``) or a subprocess.
"""

from __future__ import annotations

import errno
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fake_engine import FakeEngine

from triage.cli import build_parser
from triage.domain.pack import default_pack, load_pack
from triage.environment import OFF, ON, SWITCHES, parse_switch
from triage.errors import InputError
from triage.intake.columns import ColumnMap, as_text
from triage.intake.packinit import plan_pack
from triage.learning.labelled import read_labelled
from triage.settings import SETTINGS
from triage.store.config import ConfigError, config_path, load_config

ROOT = Path(__file__).resolve().parents[1]

PACK_TOML = """
[pack]
name = "p"
[[criterion]]
id = "priority"
question = "How urgent?"
options = [ { id = "1", label = "1" }, { id = "2", label = "2" }, { id = "3", label = "3" } ]
"""


def write_config(text: str | bytes) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


# -- config keys: read somewhere, or refused ----------------------------------------------------------


def _readers(key: str) -> list[str]:
    """Lines of triage/ (but settings.py, which declares them) that read ``key``'s configured value: through
    ``Settings.of(...)`` or a ``settings`` object (``wanted``: serve's name for one), or the config dict."""
    pattern = re.compile(
        rf"(?:Settings\.of\(.*\)|\w*settings|wanted)\.{key}\b|config\[[\"']{key}[\"']\]|[\"']{key}[\"'] in config"
    )
    out = []
    for path in sorted((ROOT / "triage").rglob("*.py")):
        if path.name == "settings.py" and path.parent.name == "triage":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                out.append(f"{path.relative_to(ROOT)}:{n}")
    return out


def test_every_config_key_is_read_somewhere_and_any_other_key_is_refused() -> None:
    unread = [key for key in SETTINGS if not _readers(key)]
    assert not unread, f"config keys nothing reads (read them, or drop them so the config refuses them): {unread}"
    assert _readers("server"), "score --server reads the config's server"
    assert not _readers("no_such_key_at_all")  # the grep finds only what is there
    write_config('servr = "http://127.0.0.1:8787"\n')
    with pytest.raises(ConfigError) as caught:
        load_config()
    assert "unknown key 'servr' (did you mean 'server'?)" in caught.value.message


def _score_args(*extra: str):
    return build_parser().parse_args(["score", *extra])


def test_score_server_is_the_flag_else_the_environment_else_the_config(
    monkeypatch: pytest.MonkeyPatch, cli, tmp_path: Path
) -> None:
    from triage.commands._remote import server_of

    monkeypatch.delenv("TRIAGE_SERVER", raising=False)
    assert server_of(_score_args()) is None
    write_config('server = "http://127.0.0.1:9001"\n')
    assert server_of(_score_args()) == "http://127.0.0.1:9001"
    monkeypatch.setenv("TRIAGE_SERVER", "http://127.0.0.1:9002")
    assert server_of(_score_args()) == "http://127.0.0.1:9002"
    assert server_of(_score_args("--server", "http://127.0.0.1:9003")) == "http://127.0.0.1:9003"
    monkeypatch.setenv("TRIAGE_SERVER", "  ")  # blank is unset, as empty is: the config's
    assert server_of(_score_args()) == "http://127.0.0.1:9001"
    with pytest.raises(InputError) as caught:  # a flag for local scoring names the config line that sends away
        server_of(_score_args("--n-ctx", "512"))
    assert "config " in caught.value.message and "line 1: server =" in caught.value.message
    assert "pass --server ''" in (caught.value.hint or "")
    assert server_of(_score_args("--server", "", "--n-ctx", "512")) is None  # an empty flag: here, explicitly
    # end to end: `triage score` with only the config's server goes there (nothing listens: exit 2, said)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        write_config(f'server = "http://127.0.0.1:{port}"\n')
        ran = cli(["score"], stdin="I was charged twice", env={"TRIAGE_SERVER": ""})
    assert ran.returncode == 2, ran.stderr
    assert f"cannot reach the server at http://127.0.0.1:{port}: connection refused" in ran.stderr


def test_a_config_with_a_utf8_byte_order_mark_is_read_and_its_lines_are_named() -> None:
    path = write_config(b'\xef\xbb\xbfn_ctx = 2048\ntheme = "nord"\n')
    assert load_config() == {"n_ctx": 2048, "theme": "nord"}
    write_config(b"\xef\xbb\xbfn_cxt = 2048\n")
    with pytest.raises(ConfigError) as caught:
        load_config()
    assert caught.value.message == f"config file {path} line 1: unknown key 'n_cxt' (did you mean 'n_ctx'?)"


# -- missing label values, in every export format -------------------------------------------------------


def _frame():
    pd = pytest.importorskip("pandas")
    return pd.DataFrame(
        {
            "id": ["A", "B", "C", "D"],
            "text": ["charged twice", "parcel late", "app crashes", "refund please"],
            "priority": [1, None, 3, 2],  # pandas: a float column, NaN where missing
        }
    )


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv", "jsonl-nan", "jsonl-null"])
def test_a_numeric_label_column_with_missing_values_has_no_option_nan(tmp_path: Path, fmt: str) -> None:
    frame = _frame()
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
        export = tmp_path / "export.parquet"
        frame.to_parquet(export)
    elif fmt == "csv":
        export = tmp_path / "export.csv"
        frame.to_csv(export, index=False)  # an empty cell where missing
        assert ",," in export.read_text(encoding="utf-8") or ",\n" in export.read_text(encoding="utf-8")
    elif fmt == "jsonl":
        export = tmp_path / "export.jsonl"
        frame.to_json(export, orient="records", lines=True)  # pandas writes null
    else:  # Python's json writes NaN; a hand-made export writes null
        export = tmp_path / "export.jsonl"
        missing = float("nan") if fmt == "jsonl-nan" else None
        rows = [
            {"id": "A", "text": "charged twice", "priority": 1.0},
            {"id": "B", "text": "parcel late", "priority": missing},
            {"id": "C", "text": "app crashes", "priority": 3.0},
            {"id": "D", "text": "refund please", "priority": 2.0},
        ]
        export.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    if fmt == "jsonl-nan":
        assert "NaN" in export.read_text(encoding="utf-8")
    plan = plan_pack(export, ["text"], {"priority": "priority"}, min_count=1, id_column="id")
    (crit,) = plan.criteria
    assert sorted(o.label for o in crit.options) == ["1", "2", "3"], [o.label for o in crit.options]
    assert crit.empty == 1 and crit.labelled == 3
    assert "nan" not in plan.text.lower()
    (tmp_path / "p.toml").write_text(PACK_TOML, encoding="utf-8")
    pack = load_pack(tmp_path / "p.toml")
    got = read_labelled(export, pack, columns=ColumnMap.parse("text", "id", ["priority=priority"]), partial=True)
    assert {r.ticket.id: r.labels for r in got.rows} == {
        "A": {"priority": "1"},
        "C": {"priority": "3"},
        "D": {"priority": "2"},
    }


def test_missing_cells_are_empty_and_a_string_nan_is_text() -> None:
    assert [as_text(v) for v in (None, float("nan"), np.float32("nan"), np.float64(2.0), 3.0)] == ["", "", "", "2", "3"]
    assert as_text("NaN") == "NaN" and as_text(0) == "0" and as_text(False) == "false"


# -- switches in the environment: one parser, its words, nothing else ------------------------------------


def test_every_switch_of_the_environment_is_read_by_the_one_parser() -> None:
    """Every ``os.environ``/``getenv`` in triage/ reads a variable through triage/environment.py, or is a
    value (a path, a URL, a token), never a switch of its own words."""
    direct = []
    for path in sorted((ROOT / "triage").rglob("*.py")):
        if path.name == "environment.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"os\.environ|getenv", line):
                direct.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    values = ("HF_ENDPOINT",)  # what may be read directly: a value (a URL), not a switch
    assert all(any(v in d for v in values) for d in direct), (
        "read a switch with triage.environment.switch (and add it to SWITCHES and docs/config.md), "
        f"a value with triage.environment.text: {direct}"
    )
    assert set(SWITCHES) == {"TRIAGE_STARTER", "HF_HUB_OFFLINE"}
    docs = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    for name in SWITCHES:
        assert f"`{name}`" in docs, f"docs/config.md does not list {name}"
    for word in (*ON, *OFF):
        assert f"`{word}`" in docs


@pytest.mark.parametrize("word", ["disable", "none", "n", "2", "y", "enabled", "0.0"])
def test_a_switch_with_another_word_is_refused_naming_the_variable_and_the_words(word: str, cli, tmp_path) -> None:
    with pytest.raises(InputError) as caught:
        parse_switch("TRIAGE_STARTER", word, True)
    assert caught.value.message == f"TRIAGE_STARTER={word!r} is not a switch's word"
    assert "1, true, yes, on (on) or 0, false, no, off (off)" in (caught.value.hint or "")
    ran = cli(["model", "list"], env={"TRIAGE_STARTER": word})  # any command: refused at start
    assert ran.returncode == 2 and f"TRIAGE_STARTER={word!r} is not a switch's word" in ran.stderr, ran.stderr
    ran = cli(["model", "list"], env={"TRIAGE_STARTER": "", "HF_HUB_OFFLINE": word})
    assert ran.returncode == 2 and f"HF_HUB_OFFLINE={word!r}" in ran.stderr


def test_the_switch_words_case_and_spaces_ignored_and_blank_is_the_default() -> None:
    for word in ("1", "true", "YES", " On "):
        assert parse_switch("TRIAGE_STARTER", word, False) is True
    for word in ("0", "False", "no", "OFF "):
        assert parse_switch("TRIAGE_STARTER", word, True) is False
    for blank in (None, "", "  "):
        assert parse_switch("TRIAGE_STARTER", blank, True) is True
        assert parse_switch("TRIAGE_STARTER", blank, False) is False


# -- TRIAGE_HOME and TRIAGE_MODEL: absolute, a folder; empty and blank alike --------------------------------


def test_triage_home_must_be_an_absolute_folder_and_blank_is_unset(tmp_path: Path, monkeypatch) -> None:
    from triage.store.paths import user_dirs

    a_file = tmp_path / "home-file"
    a_file.write_text("mine\n", encoding="utf-8")
    for value, said in (
        ("relative/home", "TRIAGE_HOME='relative/home' is a relative path"),
        (str(a_file), f"TRIAGE_HOME={str(a_file)!r} is not a folder (it is a file)"),
    ):
        env = {**os.environ, "TRIAGE_HOME": value, "PYTHONPATH": str(ROOT)}
        env.pop("TRIAGE_STARTER", None)
        proc = subprocess.run(
            [sys.executable, "-m", "triage.cli", "model", "list"],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
        assert proc.returncode == 2, proc.stderr
        assert said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert a_file.read_text(encoding="utf-8") == "mine\n"  # left as it was
    assert not (tmp_path / "relative").exists()  # nothing made under the working folder
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    monkeypatch.setenv("TRIAGE_HOME", "~/th")
    assert user_dirs().config == tmp_path / "me" / "th" / "config"  # ~ expanded
    defaults = []
    for blank in ("", " ", "\t"):
        monkeypatch.setenv("TRIAGE_HOME", blank)
        defaults.append(user_dirs())
    monkeypatch.delenv("TRIAGE_HOME")
    assert defaults == [user_dirs()] * 3  # empty and blank: the platform's folders, as unset


def test_an_empty_or_blank_model_is_no_model_in_the_flag_the_environment_and_the_config(monkeypatch) -> None:
    from triage.model import resolve

    seen: list[str] = []
    monkeypatch.setattr(resolve, "_from_spec", lambda spec, source, catalog: seen.append(source) or spec)
    monkeypatch.setattr(resolve, "inspect_installed", lambda entry: type("I", (), {"present": True})())
    monkeypatch.setattr(resolve, "_catalog_ref", lambda entry, catalog, notice=None: f"default:{entry.name}")
    default = resolve.resolve_model(None, config={})
    for blank in ("", " ", "\t"):
        monkeypatch.setenv("TRIAGE_MODEL", blank)
        assert resolve.resolve_model(None, config={"model": blank}) == default
        assert resolve.resolve_model(blank, config={}) == default
    assert seen == []  # never read as a name or a path
    monkeypatch.setenv("TRIAGE_MODEL", "smollm2-135m")
    assert resolve.resolve_model(" ", config={"model": ""}) == "smollm2-135m"
    assert seen == ["TRIAGE_MODEL=smollm2-135m"]


# -- one emptiness rule; lone surrogates --------------------------------------------------------------------


HTML_BLANKS = [
    "&nbsp;",
    "&nbsp;&nbsp; &#160;",
    "<p>&nbsp;</p>",
    "&#8203;&zwnj;",
    "<div><br/></div>",
    "&ensp;<!-- x -->",
]


def test_learn_and_score_refuse_the_same_html_blanks(tmp_path: Path, cli) -> None:
    from triage.commands.score import read_input
    from triage.domain.ticket import make_ticket

    rows = [{"id": f"E-{i}", "text": t, "labels": {"queue": "billing"}} for i, t in enumerate(HTML_BLANKS)]
    rows.append({"id": "OK", "text": "I was charged twice &amp; want a refund", "labels": {"queue": "billing"}})
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    got = read_labelled(labelled, default_pack(), partial=True)
    assert [r.ticket.id for r in got.rows] == ["OK"]  # learn trains on none of the blanks
    assert len(got.bad) == len(HTML_BLANKS) and all("no visible characters" in b.message for b in got.bad), got.bad
    csv = tmp_path / "export.csv"
    csv.write_text(
        "id,text,queue\n"
        + "".join(f'E-{i},"{t}",billing\n' for i, t in enumerate(HTML_BLANKS))
        + "OK,<p>charged twice&nbsp;</p>,billing\n",
        encoding="utf-8",
    )
    export = read_labelled(csv, default_pack(), columns=ColumnMap.parse("text", "id", ["queue=queue"]), partial=True)
    assert [r.ticket.id for r in export.rows] == ["OK"] and len(export.bad) == len(HTML_BLANKS), export.bad
    scored = read_input(str(labelled), force_jsonl=False, force_text=False, ticket_id=None, columns=None)
    for row in scored[: len(HTML_BLANKS)]:  # score's rule is the same function
        with pytest.raises(InputError, match="no visible characters"):
            make_ticket(row.text, row.ticket_id)
    assert make_ticket(scored[-1].text, "OK").text == "I was charged twice &amp; want a refund"  # text kept as is


def test_a_lone_surrogate_is_that_rows_error_in_score_learn_and_label_file(tmp_path: Path, cli) -> None:
    from triage.domain.ticket import make_ticket

    line = '{"id": "S-1", "text": "refund \\ud800 now", "labels": {"queue": "billing"}}\n'
    good = '{"id": "S-2", "text": "refund me now", "labels": {"queue": "billing"}}\n'
    f = tmp_path / "rows.jsonl"
    f.write_text(line + good, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        make_ticket("refund \ud800 now", "S-1")
    assert "lone surrogate (\\ud800 at character 8)" in caught.value.message
    with pytest.raises(InputError, match="message 2's text holds a lone surrogate"):
        make_ticket(None, "T", [{"role": "customer", "text": "hi"}, {"role": "agent", "text": "ok \udc80"}])
    got = read_labelled(f, default_pack(), partial=True)  # learn: that row's error, the next one learned
    assert [r.ticket.id for r in got.rows] == ["S-2"]
    assert "lone surrogate" in got.bad[0].message
    f.write_text(line.replace("S-1", "S-3") + line, encoding="utf-8")
    ran = cli(["score", str(f), "--model", str(tmp_path / "none.gguf")])  # every row checked before any model
    records = [json.loads(x) for x in ran.stdout.splitlines()]
    assert ran.returncode == 1 and [r["ticket_id"] for r in records] == ["S-3", "S-1"], ran.stderr
    assert all("lone surrogate (\\ud800 at character 8)" in r["error"] for r in records), records
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"id": "S-\\ud800", "labels": {"queue": "billing"}}\n', encoding="utf-8")
    ran = cli(["label", "--file", str(labels)])
    assert ran.returncode == 2 and "its id holds a lone surrogate" in ran.stderr, ran.stderr
    labels.write_text('{"id": "S-1", "labels": {"queue": "bill\\udc80ing"}}\n', encoding="utf-8")
    ran = cli(["label", "--file", str(labels)])
    assert ran.returncode == 2 and "the option of 'queue' holds a lone surrogate" in ran.stderr, ran.stderr


# -- the starter head: re-fitted when it fits another setup; kept in memory when its file cannot be written ---


def _starter_head(engine: FakeEngine, pack, *, n_embd: int = 8, sha: str | None = None):
    from triage.scoring.head import CriterionHead, Head, feature_ids

    crit = pack.criteria[0]
    options = [o.id for o in crit.options]
    rng = np.random.default_rng(0)
    width = len(feature_ids(100, n_embd)) + len(options)
    ch = CriterionHead(options, options, rng.normal(size=(len(options), width)), np.zeros(len(options)))
    ch.info["rows"] = {"team": 0, "starter": 40}
    head = Head(
        sha or engine.sha256, pack.hash, engine.format_for("label").id, 100, n_embd, {crit.id: ch}, name="starter"
    )
    head.kind = "starter"
    head.read = "shared:answer"
    head.attention = engine.native.attention  # type: ignore[attr-defined]
    return head


class Native:
    """What the fit store checks of a loaded model: its widths and its attention kernels."""

    n_vocab, n_embd, attention = 100, 8, "flash"


class OtherAttention(Native):
    attention = "plain"


def test_a_stored_starter_head_for_another_setup_is_fitted_again(monkeypatch) -> None:
    from triage.learning import starter
    from triage.learning.fit import FitRequest
    from triage.learning.fitstore import auto_head, starter_path
    from triage.learning.head_file import write_head

    engine = FakeEngine()
    engine.native = Native()  # type: ignore[attr-defined]
    pack = default_pack()
    path = starter_path(engine.sha256, pack.hash, engine.format_for("label").id)
    write_head(_starter_head(engine, pack), path)  # computed with other attention kernels, under this setup's name
    engine.native = OtherAttention()  # type: ignore[attr-defined]
    assert starter.needs_fit(engine, pack, FitRequest())
    fits: list[int] = []

    def fit_and_store(eng, pk, *, progress=None, **kw):
        from triage.learning.fitstore import store_starter_head

        head = _starter_head(eng, pk)
        store_starter_head(head)
        fits.append(1)
        return starter.Fitted(head, 0.1)

    monkeypatch.setattr(starter, "fit_and_store", fit_and_store)
    said: list[str] = []
    assert starter.ensure(engine, pack, FitRequest(), say=said.append)
    assert "again (the stored one does not fit: head " in said[0] and "flash attention" in said[0], said
    assert not starter.needs_fit(engine, pack, FitRequest())  # fitted for this setup now: never again
    assert auto_head(engine, pack, starter=True).head is not None and fits == [1]


def test_a_team_head_for_another_setup_names_the_command_that_fits_it() -> None:
    from triage.learning import starter
    from triage.learning.fit import FitRequest
    from triage.learning.fitstore import auto_head, head_name, heads_dir
    from triage.learning.head_file import write_head

    engine = FakeEngine()
    engine.native = Native()  # type: ignore[attr-defined]
    pack = default_pack()
    head = _starter_head(engine, pack)
    head.kind, head.name = "team", "team head"
    head.criteria[pack.criteria[0].id].info["rows"] = {"team": 50, "starter": 0}
    write_head(head, heads_dir() / head_name(engine.sha256, pack.hash, engine.format_for("label").id))
    engine.native = OtherAttention()  # type: ignore[attr-defined]
    found = auto_head(engine, pack, starter=True)
    assert found.head is None and "learned head not applied" in (found.skipped or "")
    assert "run `triage learn LABELLED --pack PACK`" in (found.skipped or "")
    assert not starter.needs_fit(engine, pack, FitRequest())  # the team's head is theirs to fit again


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs of this test's own under tmp_path, filled to the last byte (skipped where mounting is
    not permitted); unmounted at the end."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        (mnt / "data" / "heads" / "starter").mkdir(parents=True)
        (mnt / "cache" / "eval").mkdir(parents=True)
        with open(mnt / "filler", "wb", buffering=0) as fh:
            for size in (65536, 4096, 1):
                try:
                    while True:
                        fh.write(b"\0" * size)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_starter_head_whose_file_cannot_be_written_is_applied_from_memory(
    full_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRIAGE_HOME on a full disk (a real tmpfs): neither the readout cache nor the head's file can be written.
    The fit is done once, its head applied from memory for the rest of the process, the failure said once."""
    from triage.learning import fitstore, starter
    from triage.learning.fit import FitRequest, choose_fits
    from triage.scoring.options import ScoreOptions

    monkeypatch.setenv("TRIAGE_HOME", str(full_disk))
    engine = FakeEngine()
    engine.native = Native()  # type: ignore[attr-defined]
    pack = default_pack()
    target = fitstore.starter_path(engine.sha256, pack.hash, engine.format_for("label").id)
    assert target.parent.is_relative_to(full_disk)
    fits: list[int] = []
    real_fit_head = starter.fit_starter_head

    def fit_head(eng, pk, rows, outcomes, **kw):  # type: ignore[no-untyped-def]
        fits.append(1)  # the fake engine reads no features: the fit's inputs are made here, the rest is real
        return _starter_head(eng, pk), []

    from triage.learning import scorer

    # the readout cache is opened on the full disk as the real fit opens it; no row is scored
    monkeypatch.setattr(scorer, "score_rows", lambda *a, **kw: type("Scored", (), {"rows": [], "outcomes": []})())
    monkeypatch.setattr(starter, "fit_starter_head", fit_head)
    monkeypatch.setattr(fitstore, "_KEPT", {})
    said: list[str] = []
    assert starter.ensure(engine, pack, FitRequest(), say=said.append)
    assert real_fit_head is not fit_head and not target.exists()
    warning = [s for s in said if s.startswith("warning:")]
    assert len(warning) == 1, said
    assert f"the head's file {target} cannot be written: No space left on device" in warning[0]
    assert "the eval readout cache" in warning[0] and "kept in memory for this run only" in warning[0]
    assert "applied from memory while this process runs" in warning[0] and "free space" in warning[0]
    for _ in range(3):  # every later score in this process: no fit, the head applied
        assert not starter.ensure(engine, pack, FitRequest(), say=said.append)
        chosen = choose_fits(engine, pack, ScoreOptions(), FitRequest())
        assert chosen.head is not None and chosen.head.kind == "starter"
    assert fits == [1] and len([s for s in said if s.startswith("warning:")]) == 1


def test_on_a_full_disk_score_fits_the_starter_once_and_applies_it_from_memory(
    tmp_path: Path, full_disk: Path, other_model: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real thing on a model triage ships no starter head for (smollm2 under another sha256), in-process on
    a slice of the starter set: TRIAGE_HOME on a tmpfs that is full. One `triage score` of two tickets fits the
    starter head once, cannot keep it (nor the readouts), says so once, and decides both tickets with it."""
    from conftest import starter_slice

    starter_slice(monkeypatch)
    mnt = full_disk  # its folders made, the disk under them full
    tickets = tmp_path / "tickets.jsonl"
    tickets.write_text(
        '{"id": "A", "text": "You charged my card twice this month, refund one of them."}\n'
        '{"id": "B", "text": "My parcel was due last Tuesday and tracking has not moved."}\n',
        encoding="utf-8",
    )
    monkeypatch.delenv("TRIAGE_MODEL", raising=False)
    args = ["score", str(tickets), "--model", str(other_model), "--threads", "1", "--wait-starter"]
    ran = cli(args, mnt, env={"TRIAGE_STARTER": "1"})
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr.count("fitting the starter head for") == 1, ran.stderr
    warnings = [line for line in ran.stderr.splitlines() if "applied from memory" in line]
    assert len(warnings) == 1 and "No space left on device" in warnings[0], ran.stderr
    assert not list((mnt / "data" / "heads" / "starter").glob("*.npz"))  # nothing half-written left
    records = [json.loads(line) for line in ran.stdout.splitlines()]
    assert [r["ticket_id"] for r in records] == ["A", "B"]
    for r in records:
        assert "starter" in {c["source"] for c in r["criteria"]}, ran.stderr


def test_model_pulls_starter_line_says_what_applies(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """``model pull``'s starter step (``_starter_for``) on the fake engine: "already fitted" only of a starter head
    that fits; a team head that does not fit is named with the command that fits it."""
    import triage.scoring.loader as loader
    from triage.commands import model as model_cmd
    from triage.learning.fitstore import head_name, heads_dir, starter_path
    from triage.learning.head_file import write_head

    class Engine(FakeEngine):
        def __enter__(self) -> Engine:
            return self

        def __exit__(self, *exc: object) -> None:
            self.close()

    engine = Engine()
    engine.native = Native()  # type: ignore[attr-defined]
    pack = default_pack()
    monkeypatch.setattr(loader, "load_engine", lambda *a, **k: engine)
    monkeypatch.setenv("TRIAGE_STARTER", "1")
    fmt = engine.format_for("label").id
    write_head(_starter_head(engine, pack), starter_path(engine.sha256, pack.hash, fmt))
    model_cmd._starter_for("fake", None)
    assert capsys.readouterr().out == "starter head for fake-0.1b: already fitted\n"
    from triage.learning import fitstore

    shipped = heads_dir().parent / "shipped-heads"  # stands in for assets/heads/ (a catalog stand-in's head)
    real_shipped_dir = fitstore.shipped_dir
    monkeypatch.setattr(fitstore, "shipped_dir", lambda: shipped)
    write_head(_starter_head(engine, pack), fitstore.shipped_starter_path(engine.sha256, pack.hash, fmt))
    model_cmd._starter_for("fake", None)
    assert capsys.readouterr().out == "starter head for fake-0.1b: ships with triage (nothing to fit)\n"
    monkeypatch.setattr(fitstore, "shipped_dir", real_shipped_dir)
    team = _starter_head(engine, pack)
    team.kind, team.name = "team", "team head"
    team.criteria[pack.criteria[0].id].info["rows"] = {"team": 50, "starter": 0}
    write_head(team, heads_dir() / head_name(engine.sha256, pack.hash, fmt))
    engine.native = OtherAttention()  # type: ignore[attr-defined]
    model_cmd._starter_for("fake", None)
    out = capsys.readouterr().out
    assert out.startswith("starter head for fake-0.1b: not fitted: learned head not applied: "), out
    assert "run `triage learn LABELLED --pack PACK`" in out and "already fitted" not in out
