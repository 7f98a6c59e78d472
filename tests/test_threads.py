"""Tickets as threads: messages in the prompt, append-only reuse of a thread's KV state, edits, compaction.

The engine tests run the real 135M model: the token counts come from the engine, and
the probabilities are compared with a fresh engine that decodes the same batches.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from triage.domain.pack import default_pack
from triage.domain.thread import Message, compaction, render
from triage.domain.ticket import make_ticket
from triage.errors import InputError
from triage.lab import score as lab
from triage.lab.full import Full
from triage.lab.options import LabOptions
from triage.scoring.engine import Engine
from triage.scoring.prefix_store import Entries, Saved, common_length, first_edit

THREAD = [
    {"role": "customer", "text": "My package has said 'in transit' for 9 days. Order 4411. Where is it?"},
    {"role": "agent", "text": "Sorry about the delay. I have asked the carrier for a trace; expect news in two days."},
    {"role": "customer", "text": "Four days later nobody wrote back. This is the second time I am asking."},
    {
        "role": "agent",
        "text": "I apologise. The carrier says the parcel is lost. I can send a replacement or refund you.",
    },
    {
        "role": "customer",
        "text": "Send a replacement today, or I will file a chargeback with my bank. I want a manager.",
    },
]
FANOUT_TOL = 0.05  # as tests/test_engine.py: fanout against other batch shapes


def probs(result: Any) -> np.ndarray:
    return np.array([o.probability for c in result.criteria for o in c.options])


# -- rows and rendering -------------------------------------------------------------
def test_one_customer_message_is_a_plain_ticket() -> None:
    plain = make_ticket("Where is my parcel?", "T-1")
    thread = make_ticket(None, "T-1", [{"role": "customer", "text": "Where is my parcel?"}])
    assert thread == plain and thread.thread == (Message("customer", "Where is my parcel?"),)


def test_a_thread_only_grows_at_the_end() -> None:
    texts = [make_ticket(None, "T", THREAD[:k]).text for k in range(1, 6)]
    for a, b in zip(texts, texts[1:], strict=False):
        assert b.startswith(a + "\n\n")
    assert "Agent reply:\nSorry about the delay." in texts[-1]
    assert "Customer reply:\nFour days later" in texts[-1]
    assert texts[0] == THREAD[0]["text"]  # the first customer message is written as a plain ticket


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        ([], "'messages' is empty"),
        ([{"role": "boss", "text": "hi"}], "message 1 has role 'boss'; use one of customer, agent, note"),
        ([{"role": "agent"}], "message 1 has no 'text' string"),
        ([{"role": "agent", "text": " \x1b[2J "}], "message 1 has no text"),
        ("hello", "must be a list"),
        ([{"role": "customer", "text": "a"}, "b"], "message 2 is a str"),
    ],
)
def test_bad_messages_name_the_row_and_the_message(messages: Any, needle: str) -> None:
    with pytest.raises(InputError) as err:
        make_ticket(None, "T-9", messages)
    assert needle in err.value.message and "ticket T-9" in err.value.message


def test_text_and_messages_together_are_refused() -> None:
    with pytest.raises(InputError, match="both 'text' and 'messages'"):
        make_ticket("x", "T-9", [{"role": "customer", "text": "x"}])


def test_compaction_keeps_its_cut_for_the_turns_that_follow() -> None:
    sizes = [50] + [30] * 40
    cuts = [compaction(sizes[:m], 5, 400) for m in range(1, len(sizes) + 1)]
    assert cuts[:11] == [0] * 11  # 50 + 10 * 30 fits 400
    moved = [i for i in range(1, len(cuts)) if cuts[i] != cuts[i - 1]]
    assert len(moved) < len(cuts) // 4  # the cut moves seldom: the turns in between append
    for m, cut in enumerate(cuts, 1):
        kept = sizes[0] + (5 if cut else 0) + sum(sizes[1 + cut : m])
        assert kept <= 400 and cut <= max(m - 2, 0)
    assert render([Message("customer", "a"), Message("agent", "b"), Message("customer", "c")], 1) == (
        "a\n\n[... 1 earlier message left out ...]\n\nCustomer reply:\nc"
    )


def test_the_store_is_an_lru_under_its_byte_cap() -> None:
    store = Entries(cap_bytes=100)
    for i in range(4):
        store.put(Saved("k", (1, 2, 3, i), 1, (), bytes(40), ticket_id=f"t{i}"))
    assert len(store) == 2 and store.nbytes == 80 and store.get("t0", "k") is None
    assert store.get("t3", "k") is not None and store.get("t3", "other stable block") is None
    store.put(Saved("k", (1,), 1, (), bytes(101), ticket_id="big"))  # larger than the cap: not kept
    assert store.get("big", "k") is None and store.nbytes == 80
    store.put(
        Saved("k", (1, 2, 3, 3, 4), 1, (), bytes(40), ticket_id="t3")
    )  # a ticket's newer state replaces its older
    assert len(store) == 2 and store.get("t3", "k").tokens == (1, 2, 3, 3, 4)  # type: ignore[union-attr]
    store.put(Saved("k", (1, 2), 1, (), bytes(10), ticket_id="d1", prefilled=True))
    store.put(Saved("k", (1, 2, 5), 1, (), bytes(10), ticket_id="d2", prefilled=True))  # a grown draft replaces it
    assert store.nbytes == 90 and len(store) == 3 and store.get("d2", "k") is None  # prefills are nobody's thread
    assert common_length((1, 2, 3), (1, 2, 4)) == 2
    a, b = Message("customer", "a"), Message("agent", "b")
    assert first_edit((a,), (a, b)) is None and first_edit((a, b), (a, Message("agent", "c"))) == 2
    assert first_edit((a, b), (a,)) == 2


# -- the real engine ----------------------------------------------------------------
def tails_lead(engine: Engine, pack: Any) -> int:
    """Tokens of the tails' common start ("Question:") that sit in the prefix after the ticket block."""
    builder = engine.builder(pack)
    text = THREAD[0]["text"]
    prefix = builder.build(text, [[tuple(range(len(c.options)))] for c in pack.criteria], n_ctx=engine.n_ctx).prefix
    return len(prefix) - len(builder.stable_tokens) - len(engine.tokenizer.encode(builder.ticket_block_text(text)))


@pytest.fixture(scope="module")
def engines(smollm2_path: Any) -> Any:
    made = [Engine(smollm2_path, name="smollm2-135m", n_ctx=2048) for _ in range(2)]
    yield made
    for e in made:
        e.close()


def turns(engine: Engine, pack: Any, options: LabOptions | None = None, *, between: bool = False) -> list[Any]:
    """Score the thread as it grows, one message at a time (``between``: another ticket in between)."""
    out = []
    for k in range(1, len(THREAD) + 1):
        out.append(lab.score_ticket(engine, make_ticket(None, "T-1", THREAD[:k]), pack, options))
        if between:
            lab.score_ticket(engine, f"another ticket about a refund, number {k}", pack, options)
    return out


# Fanout only: a thread's growing prefix is reused where a ticket is scored again as it grows (the app, serve,
# score), and they all run fanout. Serial is eval's letter readout, which scores each row once, whole; serial
# against fanout is test_engine.py::test_fanout_matches_serial_and_full_drift_is_reported.
@pytest.mark.parametrize("mode", ["fanout"])
def test_the_fifth_message_costs_its_own_tokens_and_the_tails(engines: Any, mode: str) -> None:
    eng, fresh = engines
    pack, options = default_pack(), LabOptions(mode=mode)
    eng.forget()
    got = turns(eng, pack, options)
    builder = eng.builder(pack)
    orders = [[tuple(range(len(c.options)))] for c in pack.criteria]
    texts = [make_ticket(None, "T", THREAD[:k]).text for k in (4, 5)]
    prefixes = [builder.build(t, orders, n_ctx=eng.n_ctx).prefix for t in texts]
    blocks = [builder.stable_tokens + tuple(eng.tokenizer.encode(builder.ticket_block_text(t))) for t in texts]
    message = len(blocks[1]) - len(blocks[0])  # the fifth message's tokens as the prompt writes them
    lead = len(prefixes[1]) - len(blocks[1])  # the tails' common start ("Question:"), part of the prefix
    shared = common_length(*prefixes)
    new = len(prefixes[1]) - shared
    last = got[-1]
    assert last.thread.previous == 4 and last.thread.messages == 5 and last.thread.edited is None
    assert last.thread.reused == shared - last.tokens.stable
    assert last.tokens.evaluated == new + last.tokens.tails  # counts from the engine
    assert new <= message + lead + 1  # the message, the tails' lead and at most the one trimmed token
    print(
        f"{mode}: turn 5 evaluated {last.tokens.evaluated}: message {message}, tails {last.tokens.tails} + lead {lead}"
    )
    # The same numbers as a fresh engine that decodes the same batches, with other tickets in between.
    fresh.forget()
    fresh.clear()
    again = turns(fresh, pack, options, between=True)
    assert probs(again[-1]).tolist() == probs(last).tolist()
    # Drift against a fresh score of the whole thread (other batch boundaries), reported.
    fresh.forget()
    whole = lab.score_ticket(fresh, make_ticket(None, "T-1", THREAD), pack, options)
    single = lab.score_ticket(fresh, make_ticket(None, "T-2", THREAD), pack, LabOptions(mode="full"), schedule=Full())
    assert whole.thread.reused == 0 and whole.tokens.evaluated > 2 * len(prefixes[1]) - 2 * shared
    drift = float(np.max(np.abs(probs(whole) - probs(last))))
    drift_full = float(np.max(np.abs(probs(single) - probs(last))))
    print(f"{mode}: drift against a fresh score {drift:.4f}, against one full pass {drift_full:.4f}")
    assert drift < FANOUT_TOL


def test_an_edited_earlier_message_is_read_again_from_the_change(engines: Any) -> None:
    eng, fresh = engines
    pack = default_pack()
    eng.forget()
    turns(eng, pack)  # LabOptions(): the product's options
    edited = [dict(m) for m in THREAD]
    edited[1]["text"] = "We do not ship to that country, sorry."
    got = eng.score_ticket(make_ticket(None, "T-1", edited), pack)
    assert got.thread.edited == 2 and got.thread.previous == 5
    assert any("message 2 changed" in w for w in got.warnings)
    builder, orders = eng.builder(pack), [[tuple(range(len(c.options)))] for c in pack.criteria]
    old, new = (builder.build(make_ticket(None, "T", m).text, orders, n_ctx=eng.n_ctx).prefix for m in (THREAD, edited))
    assert got.thread.reused == common_length(old, new) - len(builder.stable_tokens)  # up to the edit only
    assert got.tokens.evaluated == len(new) - common_length(old, new) + got.tokens.tails
    fresh.forget()
    want = fresh.score_ticket(make_ticket(None, "T-1", edited), pack)
    assert want.thread.reused == 0
    assert float(np.max(np.abs(probs(want) - probs(got)))) < FANOUT_TOL
    assert [c.choice for c in want.criteria if c.margin > 2 * FANOUT_TOL] == [
        c.choice for c, w in zip(got.criteria, want.criteria, strict=True) if w.margin > 2 * FANOUT_TOL
    ]


def test_a_thread_longer_than_the_context_is_compacted_and_the_next_turn_reuses_it(smollm2_path: Any) -> None:
    pack = default_pack()
    with Engine(smollm2_path, name="smollm2-135m", n_ctx=1024) as eng:
        budget = eng.builder(pack).ticket_room(eng.n_ctx)
        long = [dict(THREAD[0])]
        while len(eng.tokenizer.encode(make_ticket(None, "L", long).text)) <= budget:
            role = "agent" if len(long) % 2 else "customer"
            long.append({"role": role, "text": f"Message {len(long) + 1}: " + THREAD[len(long) % 5]["text"] * 2})
        first = eng.score_ticket(make_ticket(None, "L", long), pack)
        assert first.thread.dropped > 0 and first.complete
        assert any("thread compacted" in w and f"of {len(long)}" in w for w in first.warnings)
        nxt = eng.score_ticket(
            make_ticket(None, "L", [*long, {"role": "agent", "text": "A replacement is on its way."}]), pack
        )
        assert nxt.thread.dropped == first.thread.dropped and not nxt.thread.compaction_moved
        assert nxt.thread.reused > 0
        reply = len(eng.tokenizer.encode("\n\nAgent reply:\nA replacement is on its way."))
        assert nxt.tokens.evaluated - nxt.tokens.tails <= reply + tails_lead(eng, pack) + 1


def test_no_state_is_kept_when_the_cap_is_zero(smollm2_path: Any) -> None:
    pack = default_pack()
    with Engine(smollm2_path, name="smollm2-135m", n_ctx=1024, thread_cache_mib=0) as eng:
        eng.score_ticket(make_ticket(None, "T-1", THREAD[:2]), pack)
        again = eng.score_ticket(make_ticket(None, "T-1", THREAD[:3]), pack)
        assert again.thread.reused == 0 and len(eng.memory) == 0 and again.thread.previous == 0


def test_the_result_records_the_thread(engines: Any) -> None:
    eng, _ = engines
    eng.forget()
    pack = default_pack()
    eng.score_ticket(make_ticket(None, "T-1", THREAD[:2]), pack)
    d = eng.score_ticket(make_ticket(None, "T-1", THREAD[:3]), pack).to_dict()
    assert d["schema"] == "triage.result/3"
    assert d["thread"]["messages"] == 3 and d["thread"]["previous"] == 2 and d["thread"]["reused"] > 0
    from triage.domain.result import ticket_result_from_dict

    assert ticket_result_from_dict(d).thread.messages == 3
    old = {**d, "schema": "triage.result/2"}
    old.pop("thread")
    assert ticket_result_from_dict(old).thread.messages == 1  # a /2 result was one message


# -- the command line -----------------------------------------------------------------
def test_score_reuses_a_thread_that_comes_back_and_names_each_bad_row(
    tmp_path: Any, capsys: pytest.CaptureFixture[str], smollm2_path: Any
) -> None:
    import json

    from triage.cli import main

    rows = [
        {"id": "T-7", "messages": THREAD[:2]},
        {"id": "T-8", "messages": []},
        {"id": "T-9", "text": "x", "messages": THREAD[:1]},
        {"id": "T-10", "messages": [{"role": "boss", "text": "x"}]},
        {"id": "T-11", "messages": [{"role": "agent", "text": ""}]},
        {"id": "T-7", "messages": THREAD[:3]},
        {"id": "T-12", "text": "My refund never came."},
    ]
    src = tmp_path / "threads.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code = main(["score", str(src), "--model", str(smollm2_path), "--format", "jsonl"])
    out, err = capsys.readouterr()
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 1  # some rows failed; the others were scored
    by_line = {r.get("line", i + 1): r for i, r in enumerate(records)}
    assert "'messages' is empty" in by_line[2]["error"]
    assert "both 'text' and 'messages'" in by_line[3]["error"]
    assert "role 'boss'" in by_line[4]["error"]
    assert "message 1 has no text" in by_line[5]["error"]
    scored = [r for r in records if "error" not in r]
    assert [r["ticket_id"] for r in scored] == ["T-7", "T-7", "T-12"]
    first, second = scored[0], scored[1]
    assert first["thread"]["messages"] == 2 and second["thread"]["messages"] == 3
    assert second["thread"]["previous"] == 2 and second["thread"]["reused"] > 0
    assert second["tokens"]["evaluated"] < first["tokens"]["evaluated"]
    assert "line 2" in err and "line 4" in err
