"""The shared read position (triage.scoring.cue) and flash attention, on the real smollm2-135m.

A head fitted on the shared position reads every criterion it covers at one short cue after the
ticket: one decode, the ticket's tokens plus a handful. Criteria it does not cover keep their tails
in the same decode. A head is applied only at the position it was fitted on, and with the attention
kernels its features were computed with.
"""

from __future__ import annotations

import contextlib
import io
import json
import tomllib
from pathlib import Path

import numpy as np
import pytest

from triage.bench.heads import random_head
from triage.domain.pack import Pack, parse_pack
from triage.errors import InputError, TriageError
from triage.lab import score as lab
from triage.lab.options import LabOptions
from triage.lab.split import Split
from triage.learning.head_file import read_head, write_head
from triage.scoring.cue import CUES, TAIL, check_read
from triage.scoring.engine import Engine, ScoreOptions
from triage.scoring.setup_check import check_head

PACK = """
[pack]
name = "shared-test"
[[criterion]]
id = "topic"
question = "Is this about a payment or a delivery?"
options = [ { id = "payment", label = "Payment, charge or refund" },
            { id = "delivery", label = "Delivery of an order" } ]
[[criterion]]
id = "mood"
question = "Is the customer happy or angry?"
options = [ { id = "happy", label = "Happy" }, { id = "angry", label = "Angry" } ]
[[criterion]]
id = "fruit"
question = "Which fruit does the ticket name?"
options = [ { id = "apple", label = "Apple" }, { id = "banana", label = "Banana" },
            { id = "cherry", label = "Cherry" } ]
"""
TICKETS = ["I was charged twice for the bananas, refund one payment!", "Where is my parcel? It is a week late."]
FANOUT_TOL = 0.05  # tests/test_engine.py


@pytest.fixture(scope="module")
def pack() -> Pack:
    return parse_pack(tomllib.loads(PACK), source="test")


def probs(result) -> np.ndarray:
    return np.array([o.probability for c in result.criteria for o in c.options])


def test_read_positions_are_named() -> None:
    assert check_read("shared") == "shared:answer" and check_read("tail") == TAIL
    assert {check_read(f"shared:{c}") for c in CUES} == {f"shared:{c}" for c in CUES}
    with pytest.raises(TriageError, match="unknown read position"):
        check_read("middle")
    with pytest.raises(TriageError, match="unknown read position"):  # never measured better: removed
        check_read("shared:about")


@pytest.mark.model
@pytest.mark.parametrize("cue", sorted(CUES))
def test_a_shared_head_reads_one_cue_for_every_criterion(smollm2_engine: Engine, pack: Pack, cue: str) -> None:
    eng = smollm2_engine
    shared, tail = random_head(eng, pack, f"shared:{cue}"), random_head(eng, pack, TAIL)
    for ticket in TICKETS:
        eng.hold_stable(pack)
        by_tail = lab.score_ticket(eng, ticket, pack, LabOptions(mode="fanout"), head=tail)
        eng.hold_stable(pack)
        got = lab.score_ticket(eng, ticket, pack, LabOptions(mode="fanout"), head=shared)
        assert [c.source for c in got.criteria] == ["learned"] * 3
        assert [c.readout for c in got.criteria] == ["shared"] * 3
        assert not any("coverage" in w for c in got.criteria for w in c.warnings)
        # one cue instead of three tails: the ticket block's own tokens and at most 8 more
        block = len(eng.tokenizer.encode(eng.builder(pack).ticket_block_text(ticket)))
        assert got.tokens.evaluated <= block + 8
        assert got.tokens.evaluated < by_tail.tokens.evaluated
        # every criterion read from the same position: the same features behind every decision
        feats = [got.criteria[i] for i in range(3)]
        assert len({c.top_token for c in feats}) == 1


@pytest.mark.model
def test_an_unchanged_ticket_is_read_whole_at_either_position(smollm2_engine: Engine, pack: Pack) -> None:
    # The kept state of a ticket is reused only when the ticket grew: scored again unchanged, with a head that
    # reads at the cue after a score that read tails (their prefixes differ after the ticket), it is read whole,
    # and its numbers are those of a score with nothing kept.
    eng = smollm2_engine
    head = random_head(eng, pack, "shared:answer")
    for ticket in TICKETS:
        block = len(eng.tokenizer.encode(eng.builder(pack).ticket_block_text(ticket)))
        eng.forget()
        alone = lab.score_ticket(eng, ticket, pack, LabOptions(mode="fanout"), head=head)
        eng.forget()
        lab.score_ticket(eng, ticket, pack, LabOptions(mode="fanout"))  # tails, no head: its state is kept
        again = lab.score_ticket(eng, ticket, pack, LabOptions(mode="fanout"), head=head)
        assert again.thread.reused == 0 and again.tokens.evaluated >= block
        assert again.tokens.evaluated == alone.tokens.evaluated
        assert np.array_equal(probs(again), probs(alone))


@pytest.mark.model
def test_the_shared_position_is_exact_across_schedules(smollm2_engine: Engine, pack: Pack) -> None:
    eng = smollm2_engine
    head = random_head(eng, pack, "shared:answer")
    for ticket in TICKETS:
        split = lab.score_ticket(eng, ticket, pack, LabOptions(mode="split"), head=head, schedule=Split())
        serial = lab.score_ticket(eng, ticket, pack, LabOptions(mode="serial"), head=head)
        fanout = lab.score_ticket(eng, ticket, pack, LabOptions(mode="fanout"), head=head)
        assert np.array_equal(probs(serial), probs(split))
        assert np.max(np.abs(probs(fanout) - probs(serial))) < FANOUT_TOL
        # the features handed to a caller that asked for this position are what the head applied
        _, raw, feats = lab.readouts_and_features(eng, ticket, pack, LabOptions(mode="serial"), read="shared:answer")
        lp = raw["topic"][0][1]
        want = np.exp(head.apply("topic", feats["topic"], lp))
        assert np.allclose([o.probability for o in serial.criteria[0].options], want, atol=1e-9)
        assert all(np.array_equal(feats["topic"], feats[c]) for c in ("mood", "fruit"))


@pytest.mark.model
def test_unlearned_criteria_keep_their_tails_in_the_same_decode(smollm2_engine: Engine, pack: Pack) -> None:
    eng = smollm2_engine
    head = random_head(eng, pack, "shared:answer", only={"topic", "fruit"})
    for ticket in TICKETS:
        plain = lab.score_ticket(eng, ticket, pack, LabOptions(mode="serial"))
        mixed = lab.score_ticket(eng, ticket, pack, LabOptions(mode="serial"), head=head)
        fan = lab.score_ticket(eng, ticket, pack, LabOptions(mode="fanout"), head=head)
        assert [c.source for c in mixed.criteria] == ["learned", "zero-shot", "learned"]
        assert [c.readout for c in mixed.criteria] == ["shared", "label", "shared"]
        # the zero-shot criterion is read from its own tail: its bars are those of a score without a head,
        # to the rounding of another batch split (the prefix ends where the cue and the tail part)
        mood = [o.probability for o in mixed.criteria[1].options]
        assert np.allclose(mood, [o.probability for o in plain.criteria[1].options], atol=FANOUT_TOL)
        assert np.allclose(probs(fan), probs(mixed), atol=FANOUT_TOL)


@pytest.mark.model
def test_a_head_is_refused_at_the_other_position(smollm2_engine: Engine, pack: Pack) -> None:
    eng = smollm2_engine
    shared, tail = random_head(eng, pack, "shared:answer"), random_head(eng, pack, TAIL)
    with pytest.raises(TriageError, match=r"fitted on the shared read position \(shared:answer\).*tail"):
        eng.score_ticket(TICKETS[0], pack, ScoreOptions(), head=shared, read="tail")
    with pytest.raises(TriageError, match=r"fitted on each criterion's own question \(tail\)"):
        eng.score_ticket(TICKETS[0], pack, ScoreOptions(), head=tail, read="shared")
    with pytest.raises(TriageError, match="shared:end"):
        eng.score_ticket(TICKETS[0], pack, ScoreOptions(), head=shared, read="shared:end")
    assert check_head(shared, engine=eng, pack=pack) is None
    with pytest.raises(TriageError, match="label readout"):
        lab.score_ticket(eng, TICKETS[0], pack, LabOptions(readout="letter"), read="shared")


@pytest.mark.model
def test_a_shared_heads_features_are_not_kept_as_tail_features(smollm2_engine: Engine, pack: Pack) -> None:
    """What the history keeps is read as tail features: the shared position's go back only when asked for."""
    eng = smollm2_engine
    head = random_head(eng, pack, "shared:answer", only={"topic"})
    done = [e for e in eng.score(TICKETS[0], pack, ScoreOptions(), head=head, features=True)][-1]
    assert set(done.features) == {"mood", "fruit"}


@pytest.mark.model
def test_a_head_for_other_attention_kernels_is_refused(smollm2_engine: Engine, pack: Pack, tmp_path: Path) -> None:
    eng = smollm2_engine
    assert eng.native.attention == "flash"  # the default: what every head so far was computed with
    plain = random_head(eng, pack, TAIL, attention="plain")
    assert "plain attention, this engine runs flash" in (check_head(plain, engine=eng, pack=pack) or "")
    # the file keeps both; a file written before they were recorded reads as tail and flash
    path = write_head(random_head(eng, pack, "shared:end", attention="plain"), tmp_path / "h.npz")
    back = read_head(path)
    assert (back.read, back.attention) == ("shared:end", "plain")
    old = tmp_path / "old.npz"
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["meta"]))
    del meta["read"], meta["features"]["attention"]
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez_compressed(old, **arrays)
    assert (read_head(old).read, read_head(old).attention) == (TAIL, "flash")
    meta["read"] = "shared:nowhere"
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez_compressed(old, **arrays)
    with pytest.raises(InputError, match="read at 'shared:nowhere'"):
        read_head(old)


@pytest.mark.model
def test_flash_attention_off_is_exact_too_and_close_to_on(smollm2_path: Path, pack: Pack) -> None:
    """Flash attention changes the kernels: with it off, reuse is still exact against split; the two
    kernels' bars differ by rounding only (bench/flash_attn.py measures both on the stand-in)."""
    with Engine(smollm2_path, name="smollm2-135m", n_ctx=1024, flash_attn=False) as off:
        assert off.native.attention == "plain"
        split = lab.score_ticket(off, TICKETS[0], pack, LabOptions(mode="split"), schedule=Split())
        serial = lab.score_ticket(off, TICKETS[0], pack, LabOptions(mode="serial"))
        fanout = lab.score_ticket(off, TICKETS[0], pack, LabOptions(mode="fanout"))
    with Engine(smollm2_path, name="smollm2-135m", n_ctx=1024) as on:
        serial_on = lab.score_ticket(on, TICKETS[0], pack, LabOptions(mode="serial"))
    assert np.array_equal(probs(serial), probs(split))
    assert np.max(np.abs(probs(fanout) - probs(serial))) < FANOUT_TOL
    assert np.max(np.abs(probs(serial_on) - probs(serial))) < FANOUT_TOL


@pytest.mark.model
def test_learn_fits_on_the_shared_position(smollm2_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from triage.cli import main

    monkeypatch.setenv("TRIAGE_HOME", str(tmp_path / "home"))
    pack = tmp_path / "p.toml"
    pack.write_text(PACK, encoding="utf-8")
    pay = ["I was charged twice for {x}.", "Refund the payment for {x}.", "My card was billed for {x} again."]
    dlv = ["My parcel with {x} never arrived.", "The courier lost {x}.", "Where is my delivery of {x}?"]
    things = ["the blender", "my shoes", "a phone case"]
    rest = {"mood": "angry", "fruit": "apple"}  # eval wants every criterion labelled; only topic is learned
    rows = [{"text": t.format(x=x), "labels": {"topic": "payment", **rest}} for t in pay for x in things]
    rows += [{"text": t.format(x=x), "labels": {"topic": "delivery", **rest}} for t in dlv for x in things]
    data = tmp_path / "l.jsonl"
    data.write_text("\n".join(json.dumps({"id": f"r{i}", **r}) for i, r in enumerate(rows)) + "\n")
    model = ["--model", str(smollm2_path), "--n-ctx", "512", "--pack", str(pack)]
    out = tmp_path / "shared.npz"
    with contextlib.redirect_stderr(io.StringIO()):
        argv = ["learn", str(data), *model, "-o", str(out), "--read", "shared", "--no-store", "--criteria", "topic"]
        assert main(argv) == 0
    head = read_head(out)
    assert head.read == "shared:answer" and list(head.criteria) == ["topic"]
    assert head.attention == "flash"
    # --read auto fits both and says which it kept, and why
    auto = tmp_path / "auto.npz"
    said = io.StringIO()
    with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
        argv = ["learn", str(data), *model, "-o", str(auto), "--read", "auto", "--no-store", "--criteria", "topic"]
        assert main(argv) == 0
    chosen = read_head(auto)
    assert chosen.read in (TAIL, "shared:answer")
    assert f"read position: {chosen.read} (" in said.getvalue() and chosen.report["read_choice"].startswith("read")
    # eval measures it where it was fitted, and refuses to read it elsewhere
    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        assert main(["eval", str(data), *model, "--head", str(out), "--no-baseline", "--read", "tail"]) == 2
    assert "fitted on the shared read position" in said.getvalue()
    report = tmp_path / "r.json"
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        assert main(["eval", str(data), *model, "--head", str(out), "--no-baseline", "--json", str(report)]) == 0
    got = json.loads(report.read_text())
    assert got["read"] == "shared:answer"
    [topic] = [c for c in got["criteria"] if c["id"] == "topic"]
    assert topic["variants"]["learned"]["balanced_accuracy"] >= 0.9
