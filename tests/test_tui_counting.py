"""Token counting for the ticket box: chunked (so the UI keeps the GIL), exact, with the real budget."""

from __future__ import annotations

import pytest
from fake_engine import CharTokenizer, FakeEngine

from triage.domain.pack import default_pack
from triage.lab import debias
from triage.lab.letter import LetterReadout
from triage.scoring.prompt import TICKET_TOKENS, PromptBuilder, PromptFormat
from triage.scoring.readout import LABEL
from triage.scoring.tokenizer import qwen3_tokenizer
from triage.tui.counting import QWEN3_FORMAT, chunks, count_ticket, count_tokens, ticket_budget

TEXT = "My invoice is wrong, I was charged twice; please refund me today!\n" * 400


def orders(orderings: str = "cyclic") -> list[list[tuple[int, ...]]]:
    return [debias.orders_for(len(c.options), orderings) for c in default_pack().criteria]


def test_chunks_cover_the_text_and_cut_before_spaces() -> None:
    parts = list(chunks(TEXT, size=1000))
    assert "".join(parts) == TEXT
    assert len(parts) > 20 and all(p.startswith(" ") for p in parts[1:])


def test_chunked_count_matches_the_whole_count_for_qwen3() -> None:
    tok = qwen3_tokenizer()
    assert count_tokens(tok, TEXT) == len(tok.encode(TEXT))


def test_count_stops_when_cancelled() -> None:
    assert count_tokens(CharTokenizer(), TEXT, cancelled=lambda: True) is None


@pytest.mark.parametrize("readout", ["label", "letter"])
@pytest.mark.parametrize("n_ctx", [2048, 4096])
def test_budget_matches_where_the_builder_starts_cutting(n_ctx: int, readout: str) -> None:
    kind = LABEL if readout == "label" else LetterReadout()
    builder = PromptBuilder(default_pack(), PromptFormat("plain", readout=readout), CharTokenizer(), kind)
    asked = orders("none" if readout == "label" else "cyclic")
    budget = ticket_budget(builder, n_ctx)
    fits = "x" * budget
    over = "x" * (budget + 1)
    assert builder.build(fits, asked, n_ctx=n_ctx).cut_chars == 0
    assert builder.build(over, asked, n_ctx=n_ctx).cut_chars > 0


def test_estimate_before_the_model_uses_qwen3_and_the_engine_after() -> None:
    pack = default_pack()
    before = count_ticket(TEXT, pack, orders(), builder=None, n_ctx=4096)
    assert before is not None and before.estimated and before.tokens == len(qwen3_tokenizer().encode(TEXT))
    assert before.over and before.budget == TICKET_TOKENS  # ~6,000 tokens: over the ticket budget
    engine = FakeEngine(n_ctx=100_000)
    after = count_ticket(TEXT, pack, orders(), builder=engine.builder(pack), n_ctx=engine.n_ctx)
    assert after is not None and not after.estimated and after.tokens == len(TEXT)
    assert after.over and after.budget == TICKET_TOKENS  # however large the context
    short = count_ticket(TEXT[:300], pack, orders(), builder=engine.builder(pack), n_ctx=engine.n_ctx)
    assert short is not None and not short.over
    assert QWEN3_FORMAT.id.endswith("chat+nothink/label")
