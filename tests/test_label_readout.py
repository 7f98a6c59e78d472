"""The label readout (options read by name) on a real model (smollm2-135m).

Whole-answer scoring is checked against an independent teacher-forced computation
with the same model: for each option, the prompt and the option's answer decoded
in one sequence, the answer tokens' log-probabilities summed. The engine decodes
every option's continuation in one batch with a shared tail, so the numbers agree
to batch-shape rounding, not bit for bit (docs/engine.md, "Exactness").
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from triage.domain.pack import Pack, PackError, load_pack, parse_pack
from triage.errors import TriageError
from triage.lab import score as lab
from triage.lab.debias import log_normalize
from triage.lab.full import Full
from triage.lab.options import LabOptions
from triage.lab.restore import Restore
from triage.lab.split import Split
from triage.model.native import Seq
from triage.scoring import readout
from triage.scoring.engine import Engine, ScoreOptions

pytestmark = pytest.mark.model

# "credit card" and "credit union" share their first token; "mortgage" is one token.
SHARED_FIRST = """
[pack]
name = "finance"
[[criterion]]
id = "product"
question = "Which product is the complaint about?"
options = [
  { id = "card",     label = "Credit card",  answer = "credit card" },
  { id = "union",    label = "Credit union", answer = "credit union" },
  { id = "mortgage", label = "Mortgage" },
]
[[criterion]]
id = "mood"
question = "Is the customer happy or angry?"
options = [ { id = "happy", label = "Happy" }, { id = "angry", label = "Angry" } ]
"""

TICKETS = [
    "My credit card was charged twice for one purchase and the bank will not refund it.",
    "The credit union closed my savings account without telling me.",
    "Thanks, the mortgage paperwork went through quickly.",
]
TOL = 0.03  # probability; batch-shape rounding (measured max ~1e-3 on these tickets)


@pytest.fixture(scope="module")
def engine(smollm2_engine: Engine) -> Engine:
    return smollm2_engine


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Pack:
    path = tmp_path_factory.mktemp("pack") / "finance.toml"
    path.write_text(SHARED_FIRST, encoding="utf-8")
    return load_pack(path)


def reference(engine: Engine, pack: Pack, ticket: str, ci: int) -> tuple[np.ndarray, float]:
    """Whole-answer log-probs by plain teacher forcing, one option at a time, from an empty cache."""
    builder = engine.builder(pack, "label")
    crit = pack.criteria[ci]
    prompt = builder.prompt_tokens(ticket, crit, tuple(range(len(crit.options))))
    n = engine.native
    scores, coverage = [], 0.0
    for toks in builder.answer_tokens(crit):
        engine.clear()
        out = n.decode([Seq("p", 0, 0, prompt + toks[:-1], every=True)])["p"]
        rows = out[len(prompt) - 1 :]
        lp = [float(log_normalize(rows[j].astype(np.float64))[toks[j]]) for j in range(len(toks))]
        scores.append(sum(lp))
        first = log_normalize(rows[0].astype(np.float64))
        coverage = float(np.sum(np.exp(first[sorted({a[0] for a in builder.answer_tokens(crit)})])))
    engine.clear()
    s = np.array(scores)
    return s - np.logaddexp.reduce(s), coverage


def test_plans_choose_whole_answers_only_when_needed(engine: Engine, pack: Pack) -> None:
    product, mood = engine.answer_plans(pack)
    assert product.whole and product.first[0] == product.first[1]  # " credit" twice
    assert len(product.tokens[0]) > 1 and product.extra_tokens == sum(len(t) - 1 for t in product.tokens)
    assert not mood.whole and mood.extra_tokens == 0


@pytest.mark.parametrize("ticket", TICKETS)
def test_shared_first_token_is_scored_by_whole_answers(engine: Engine, pack: Pack, ticket: str) -> None:
    result = lab.score_ticket(engine, ticket, pack, LabOptions(mode="serial"))
    product = result.criteria[0]
    assert product.readout == "label-whole" and result.criteria[1].readout == "label"
    got = np.array([o.probability for o in product.options])
    want, coverage = reference(engine, pack, ticket, 0)
    assert np.max(np.abs(got - np.exp(want))) < TOL
    # A first-token comparison could not tell "credit card" from "credit union": the
    # whole-answer readout does, so their probabilities differ as the reference's do.
    assert got[0] != pytest.approx(got[1], abs=1e-6)
    assert (got[0] > got[1]) == (want[0] > want[1])
    assert product.coverage == pytest.approx(coverage, abs=TOL)
    assert 0 < product.coverage <= 1


@pytest.mark.parametrize("ticket", TICKETS)
def test_serial_and_fanout_match_split_with_whole_answers(engine: Engine, pack: Pack, ticket: str) -> None:
    split = lab.score_ticket(engine, ticket, pack, LabOptions(mode="split"), schedule=Split())
    for schedule in (None, Restore()):  # serial's truncate, then bench's restore
        serial = lab.score_ticket(engine, ticket, pack, LabOptions(mode="serial"), schedule=schedule)
        assert [o.probability for c in serial.criteria for o in c.options] == [
            o.probability for c in split.criteria for o in c.options
        ]
    fanout = lab.score_ticket(engine, ticket, pack, LabOptions(mode="fanout"))
    full = lab.score_ticket(engine, ticket, pack, LabOptions(mode="full"), schedule=Full())
    # fanout (the product) is held to 0.05; full (bench's baseline: each prompt in one pass from an empty
    # cache) to 0.1: one pass instead of three picks other kernels, measured up to 0.066 here and 0.080 on a
    # thread (docs/engine.md, "Exactness").
    for other, tol in ((fanout, 0.05), (full, 0.1)):
        diff = max(
            abs(a.probability - b.probability)
            for c, d in zip(other.criteria, split.criteria, strict=True)
            for a, b in zip(c.options, d.options, strict=True)
        )
        assert diff < tol, (other.criteria[0].readout, diff)
    # Teacher forcing costs the answers' extra tokens, counted in the tails.
    plan = engine.answer_plans(pack)[0]
    assert serial.tokens.tails == sum(c.tail_tokens for c in serial.criteria)
    assert serial.criteria[0].tail_tokens >= plan.extra_tokens + 1


def test_multi_token_answers_with_distinct_first_tokens(engine: Engine, tmp_path: Path) -> None:
    pack = parse_pack(
        {
            "criterion": [
                {
                    "id": "topic",
                    "question": "What is the ticket about?",
                    "options": [
                        {"id": "debt_collection", "label": "Debt collection"},  # answer "debt collection": two tokens
                        {"id": "mortgage", "label": "Mortgage"},
                    ],
                }
            ]
        },
        "multi.toml",
    )
    (plan,) = engine.answer_plans(pack)
    assert plan.whole and len(set(plan.first)) == 2 and max(len(t) for t in plan.tokens) > 1
    ticket = "A debt collector keeps calling me about a loan I already paid."
    result = lab.score_ticket(engine, ticket, pack, LabOptions(mode="serial"))
    got = np.array([o.probability for o in result.criteria[0].options])
    want, _ = reference(engine, pack, ticket, 0)
    assert np.max(np.abs(got - np.exp(want))) < TOL


def test_whole_answer_math_on_known_logits() -> None:
    # Vocabulary of 6; options (1, 2), (1, 3), (4,).
    plan = readout.answer_plan([(1, 2), (1, 3), (4,)], ["a b", "a c", "d"])
    assert plan.whole
    tail = np.log(np.array([0.05, 0.5, 0.05, 0.05, 0.3, 0.05]))
    after_1 = np.log(np.array([0.1, 0.1, 0.6, 0.1, 0.05, 0.05]))  # rows for option 0's and 1's second token
    r = readout.read_whole(tail, [after_1[None, :], after_1[None, :], None], plan)
    p = np.array([0.5 * 0.6, 0.5 * 0.1, 0.3])
    assert np.allclose(np.exp(r.position_logprobs), p / p.sum())
    assert r.coverage == pytest.approx(0.8)
    with pytest.raises(ValueError):
        readout.read_first(tail, plan)


def test_answers_that_cannot_be_told_apart_are_refused(engine: Engine) -> None:
    with pytest.raises(TriageError, match="is the start of the answer"):
        readout.answer_plan([(5,), (5, 6)], ["yes", "yes please"])
    prefix_pack = parse_pack(
        {
            "criterion": [
                {
                    "id": "c",
                    "question": "Q?",
                    "options": [{"id": "yes", "label": "Yes"}, {"id": "yes_please", "label": "Yes please"}],
                }
            ]
        },
        "p.toml",
    )
    with pytest.raises(TriageError, match="criterion 'c'.*'yes' is the start of the answer 'yes please'"):
        engine.score_ticket("Hello", prefix_pack)
    with pytest.raises(PackError, match="same answer 'Billing'"):
        parse_pack(
            {
                "criterion": [
                    {
                        "id": "q",
                        "question": "Q?",
                        "options": [
                            {"id": "a", "label": "A", "answer": "billing"},
                            {"id": "b", "label": "B", "answer": "Billing"},
                        ],
                    }
                ]
            },
            "dup.toml",
        )


def test_answer_defaults_to_the_readable_id_and_keeps_old_hashes() -> None:
    data = {
        "criterion": [
            {
                "id": "c",
                "question": "Q?",
                "options": [
                    {"id": "credit_reporting", "label": "Credit reporting"},
                    {"id": "b", "label": "B", "answer": "bee"},
                ],
            }
        ]
    }
    pack = parse_pack(data, "x.toml")
    assert [o.answer_text for o in pack.criteria[0].options] == ["credit reporting", "bee"]
    assert "answer" not in pack.to_dict()["criterion"][0]["options"][0]  # absent stays absent in the hash
    assert pack.to_dict()["criterion"][0]["options"][1]["answer"] == "bee"


def test_label_calibration_round_trip(smollm2_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from triage.cli import main
    from triage.scoring.calibrate import read_calibration

    pack = tmp_path / "mood.toml"
    pack.write_text(
        '[[criterion]]\nid = "mood"\nquestion = "Is the customer happy?"\n'
        'options = [{ id = "unhappy", label = "Unhappy" }, { id = "happy", label = "Happy" }]\n',
        encoding="utf-8",
    )
    rows = [
        ("Great flight, thanks!", "happy"),
        ("You lost my bag.", "unhappy"),
        ("Lovely crew, thank you.", "happy"),
        ("Delayed again, awful.", "unhappy"),
        ("Best trip ever!", "happy"),
        ("Refund me now.", "unhappy"),
    ]
    train = tmp_path / "train.jsonl"
    train.write_text(
        "\n".join(json.dumps({"id": f"t{i}", "text": t, "labels": {"mood": y}}) for i, (t, y) in enumerate(rows)) + "\n"
    )
    cal_json = tmp_path / "cal.json"
    model = ["--model", str(smollm2_path), "--n-ctx", "512", "--pack", str(pack)]
    assert main(["calibrate", str(train), *model, "--min-per-option", "1", "--holdout", "0", "-o", str(cal_json)]) == 0
    capsys.readouterr()
    cal = read_calibration(cal_json)
    assert cal.prompt_format.endswith("/label") and cal.orderings == "none"
    ticket = tmp_path / "t.txt"
    ticket.write_text("The crew was rude and my seat was broken.")
    assert main(["score", str(ticket), *model, "--format", "json", "--no-calibration"]) == 0
    raw = json.loads(capsys.readouterr().out)
    assert main(["score", str(ticket), *model, "--format", "json"]) == 0  # the stored fit applies itself
    out = capsys.readouterr()
    done = json.loads(out.out)
    assert "applying calibration" in out.err and done["calibration"] and done["readout"] == "label"
    lp = np.log([o["probability"] for o in raw["criteria"][0]["options"]])
    cal._option_ids = {"mood": ["unhappy", "happy"]}
    want = np.exp(cal.apply("mood", lp))
    assert np.allclose([o["probability"] for o in done["criteria"][0]["options"]], want, atol=1e-9)
    # The letter readout (what eval and bench compare) does not pick up a label calibration.
    from triage.learning.fit import choose_fits
    from triage.scoring.loader import load_engine

    with load_engine(str(smollm2_path), n_ctx=512, lazy=True) as eng:
        assert choose_fits(eng, load_pack(pack), ScoreOptions()).calibration is not None
        letters = LabOptions(readout="letter")
        assert choose_fits(eng, load_pack(pack), letters.product, read_as=letters.read_as).calibration is None
