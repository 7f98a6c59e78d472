"""The engine protocol, kept: the scripted fake implements every member of it (forget, stable_key, raw_readouts
as the engine does them), and the type checker refuses a fake that lacks one (``./scripts/test`` runs mypy)."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest

from tests.fake_engine import FakeEngine
from triage.domain.pack import default_pack
from triage.domain.ticket import make_ticket
from triage.scoring.engine import Engine
from triage.scoring.options import ScoreOptions
from triage.scoring.protocol import AppEngine, ScoringEngine

ROOT = Path(__file__).resolve().parents[1]


def _thread(*texts: str) -> list[dict[str, str]]:
    roles = ["customer", "agent"]
    return [{"role": roles[i % 2], "text": t} for i, t in enumerate(texts)]


def test_the_fake_is_a_scoring_engine_by_its_members() -> None:
    fake = FakeEngine()
    assert isinstance(fake, AppEngine)
    assert isinstance(fake, ScoringEngine)  # runtime_checkable: every member is there
    for member in ("forget", "stable_key", "raw_readouts", "score_many", "score_ticket", "n_ctx", "tokenizer"):
        assert member in vars(FakeEngine), f"FakeEngine inherits the protocol's empty {member}"


def test_forget_drops_a_tickets_kept_state_so_its_next_score_reads_it_whole() -> None:
    fake, pack = FakeEngine(), default_pack()
    first = _thread("The export button does nothing since the update.", "Which browser do you use?")
    again = _thread(*[m["text"] for m in first], "Firefox 128 on Windows, and it fails in Edge too.")
    fake.score_ticket(make_ticket(None, "t-1", first), pack)
    kept = fake.score_ticket(make_ticket(None, "t-1", again), pack)
    assert kept.thread.previous == 2 and kept.thread.reused > 0

    fake.forget("t-1")
    more = _thread(*[m["text"] for m in again], "Could you send a screenshot of the export dialog?")
    fresh = fake.score_ticket(make_ticket(None, "t-1", more), pack)
    assert fresh.thread.previous == 0 and fresh.thread.reused == 0  # kept, it would be previous 3, reused > 0


def test_forget_without_an_id_drops_every_ticket_and_an_unknown_id_is_no_error() -> None:
    fake, pack = FakeEngine(), default_pack()
    for tid in ("a", "b"):
        fake.score_ticket(make_ticket(None, tid, _thread("Login fails with error 500.")), pack)
    fake.forget("never-scored")
    longer = {tid: make_ticket(None, tid, _thread("Login fails with error 500.", "Since when?")) for tid in "ab"}
    fake.forget()
    for ticket in longer.values():
        assert fake.score_ticket(ticket, pack).thread.previous == 0


def test_stable_key_is_the_engines_own_naming_of_model_format_and_pack() -> None:
    fake, pack = FakeEngine(), default_pack()
    for kind in ("label", "letter"):
        assert fake.stable_key(pack, kind) == Engine.stable_key(fake, pack, kind)  # type: ignore[arg-type]
    assert fake.stable_key(pack, "label") != fake.stable_key(pack, "letter")
    assert FakeEngine(name="other-0.1b").stable_key(pack) != fake.stable_key(pack)
    assert fake.stable_key(pack).endswith(pack.hash)


def test_raw_readouts_give_each_criterions_scripted_log_probabilities_and_coverage() -> None:
    fake, pack = FakeEngine(low_coverage=("urgency",)), default_pack()
    result, raw = fake.raw_readouts("The invoice PDF is blank for every customer.", pack, ScoreOptions())
    assert list(raw) == [c.id for c in result.criteria] == [c.id for c in pack.criteria]
    for crit in result.criteria:
        ((order, logprobs, coverage),) = raw[crit.id]
        assert order == tuple(range(len(crit.options)))
        assert [math.exp(v) for v in logprobs] == pytest.approx([o.probability for o in crit.options])
        assert coverage == crit.coverage
    assert [c.coverage for c in result.criteria if c.id == "urgency"] == [0.2]


@pytest.mark.slow
def test_the_type_checker_refuses_a_fake_that_lacks_a_protocol_member(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mypy_api = pytest.importorskip("mypy.api")
    monkeypatch.chdir(ROOT)  # the checkout's triage/ and tests/, with its [tool.mypy]
    monkeypatch.setenv("MYPYPATH", str(ROOT))
    source = textwrap.dedent(
        """
        from tests.fake_engine import FakeEngine


        class Partial(FakeEngine):
            pass


        def make() -> FakeEngine:
            return FakeEngine()
        """
    )
    ok = tmp_path / "uses_fake.py"
    ok.write_text(source)
    args = ["--python-version", "3.11", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary"]
    out, err, status = mypy_api.run([*args, str(ok)])
    assert status == 0, out + err

    # The same fake without forget: the protocol's member is then abstract, and mypy refuses an instance.
    fake_src = (ROOT / "tests" / "fake_engine.py").read_text()
    assert "    def forget(self" in fake_src
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "lacking.py").write_text(
        fake_src.replace("    def forget(self", "    def forgotten(self") + "\n\nengine = FakeEngine()\n"
    )
    out, err, status = mypy_api.run([*args, str(pkg / "lacking.py")])
    assert status == 1
    assert 'Cannot instantiate abstract class "FakeEngine" with abstract attribute "forget"' in out, out + err
