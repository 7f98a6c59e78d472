"""Which labels stand for a score of their ticket (carried to a thread's newer scores), and the history list's
count of labelled criteria: the rule of :mod:`triage.store.label_marks`, on real SQLite histories."""

from __future__ import annotations

from fake_engine import FakeEngine

from triage.domain.pack import default_pack
from triage.domain.ticket import make_ticket
from triage.store import labels as lab
from triage.store.history import History
from triage.store.label_marks import labelled_criteria, standing, standing_for

TICKET = "The parcel has said 'in transit' for nine days. Please send a replacement."
REPLY = "I have asked the carrier for a trace; you will hear from us within two days."


def _thread(n: int):  # the ticket with n messages (customer, then agent replies)
    messages = [{"role": "customer", "text": TICKET}] + [
        {"role": "agent", "text": f"{REPLY} ({i})"} for i in range(1, n)
    ]
    return make_ticket(None, "T-9", messages) if n > 1 else make_ticket(TICKET, "T-9")


def _score(h: History, n: int, row: int | None = None) -> tuple[int, int, object]:
    ticket = _thread(n)
    result = FakeEngine().score_ticket(ticket, default_pack())
    row = h.save_ticket(ticket, row=row)
    sid = h.start_score(row, model=result.model, pack=result.pack, orderings=result.orderings, messages=n)
    h.finish_score(sid, result)
    return row, sid, result


def test_a_label_stands_on_its_score_is_carried_to_newer_ones_and_not_put_on_older_ones() -> None:
    with History.open() as h:
        row, s1, r1 = _score(h, 1)
        crit = r1.criteria[0]
        other = next(o.id for o in crit.options if o.id != crit.choice)
        scored = lab.ScoredTicket(row, r1.ticket_id, TICKET, s1, r1)
        lab.record(h, scored, [lab.Answer(crit.id, other)], origin="app")
        assert set(standing_for(h, row, r1)) == {crit.id}
        here = standing_for(h, row, r1)[crit.id]
        assert (here.option, here.given_at, here.carried) == (other, 1, False)
        _, s2, r2 = _score(h, 2, row)
        _, s3, r3 = _score(h, 3, row)
        carried = standing_for(h, row, r3)[crit.id]
        assert (carried.option, carried.given_at, carried.carried) == (other, 1, True)
        # answered again on message 2: that answer stands from then on, and not on the score of message 1
        lab.record(h, lab.ScoredTicket(row, r2.ticket_id, "", s2, r2), [lab.Answer(crit.id, crit.choice)], origin="app")
        assert standing_for(h, row, r1) == {}
        again = standing_for(h, row, r3)[crit.id]
        assert (again.option, again.given_at, again.carried) == (crit.choice, 2, True)
        assert standing_for(h, row, r2)[crit.id].carried is False


def test_a_label_of_another_pack_or_an_option_the_score_lacks_does_not_stand() -> None:
    with History.open() as h:
        row, s1, r1 = _score(h, 1)
        crit = r1.criteria[0]
        [label] = lab.record(
            h, lab.ScoredTicket(row, r1.ticket_id, TICKET, s1, r1), [lab.Answer(crit.id, crit.choice)], origin="cli"
        )
    labels = {crit.id: label}
    assert set(standing(labels, r1, {s1: 1})) == {crit.id}
    from dataclasses import replace

    other_pack = replace(r1, pack={**r1.pack, "hash": "0" * 64})
    assert standing(labels, other_pack, {s1: 1}) == {}
    renamed = replace(label, option="no-such-option")
    assert standing({crit.id: renamed}, r1, {s1: 1}) == {}
    assert standing({"no-such-criterion": replace(label, criterion="no-such-criterion")}, r1, {s1: 1}) == {}
    unscored = replace(label, score_id=None)  # a label with no score was given on one message
    assert standing({crit.id: unscored}, r1, {})[crit.id].given_at == 1


def test_labelled_criteria_counts_criteria_per_ticket_not_answers() -> None:
    with History.open() as h:
        row, s1, r1 = _score(h, 1)
        a, b = r1.criteria[0], r1.criteria[1]
        scored = lab.ScoredTicket(row, r1.ticket_id, TICKET, s1, r1)
        lab.record(h, scored, [lab.Answer(a.id, a.choice), lab.Answer(b.id, b.choice)], origin="app")
        lab.record(h, scored, [lab.Answer(a.id, a.options[-1].id)], origin="app")  # a changed answer: still one
        other = h.save_ticket(make_ticket("Another ticket, never labelled."))
        assert labelled_criteria(h, [row, other]) == {row: 2}
        assert labelled_criteria(h, []) == {}


def test_a_label_keeps_its_meaning_over_the_thread_and_says_its_message() -> None:
    """A correction to X stays a correction when a reply makes the model say X too; a confirmation of Y stays a
    confirmation of Y when the model moves away from it (issue 40: `you: medium` became `confirmed (msg 1)`)."""
    from dataclasses import replace

    with History.open() as h:
        row, s1, r1 = _score(h, 1)
        a, b = r1.criteria[0], r1.criteria[1]
        fixed = next(o.id for o in a.options if o.id != a.choice)
        scored = lab.ScoredTicket(row, r1.ticket_id, TICKET, s1, r1)
        lab.record(h, scored, [lab.Answer(a.id, fixed), lab.Answer(b.id, b.choice)], origin="app")
        _, _, r2 = _score(h, 2, row)
        moved = next(o.id for o in b.options if o.id != b.choice)
        r2.criteria = [replace(r2.criteria[0], choice=fixed), replace(r2.criteria[1], choice=moved), *r2.criteria[2:]]
        marks = standing_for(h, row, r2)
        here = standing_for(h, row, r1)
    corrected, confirmed = marks[a.id], marks[b.id]
    assert (corrected.kind, corrected.shown, corrected.carried) == ("correction", a.choice, True)
    assert corrected.corrected and corrected.verdict() == f"you: {fixed} (msg 1)"  # the model now agrees: still yours
    assert (confirmed.kind, confirmed.shown) == ("confirmation", b.choice)
    assert confirmed.verdict() == f"confirmed {b.choice} (msg 1)"  # not "you: X" though the model moved
    # on the score it was given on: no message count for a plain ticket, and a count once it is a thread
    assert here[a.id].verdict() == f"you: {fixed}" and here[b.id].verdict() == "confirmed"
    assert here[b.id].verdict(on_thread=True) == "confirmed (msg 1)"


def test_the_history_lists_marks_stand_per_score_as_on_the_cards() -> None:
    from triage.store.label_marks import standing_on_entries

    with History.open() as h:
        row, s1, r1 = _score(h, 1)
        _, s2, r2 = _score(h, 2, row)
        a = r2.criteria[0]
        fixed = next(o.id for o in a.options if o.id != a.choice)
        lab.record(h, lab.ScoredTicket(row, r2.ticket_id, "", s2, r2), [lab.Answer(a.id, fixed)], origin="app")
        marks = standing_on_entries(h, [(row, s1, "support", 1), (row, s2, "support", 2)])
        assert standing_on_entries(h, [(row, s2, "another-pack", 2)]) == {}  # given with another pack: no mark
    assert (row, s1) not in marks  # given after message 2: not put on the score of message 1
    mark = marks[(row, s2)][a.id]
    assert (mark.option, mark.kind, mark.shown, mark.given_at, mark.carried) == (
        fixed,
        "correction",
        a.choice,
        2,
        False,
    )
