"""Criteria packs: loading, validation messages, canonical hash."""

from __future__ import annotations

from pathlib import Path

import pytest

from triage.domain.pack import LETTERS, PackError, default_pack, load_pack


def write(tmp_path: Path, text: str, name: str = "p.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


GOOD = """
[[criterion]]
id = "urgency"
question = "How urgent?"
options = [ { id = "high", label = "High" }, { id = "low", label = "Low" } ]
"""


def test_default_pack_has_the_support_decisions() -> None:
    pack = default_pack()
    ids = [c.id for c in pack.criteria]
    assert ids == ["queue", "urgency", "sentiment", "needs_approval", "type"]
    assert pack.name == "support"
    assert all(len(c.options) >= 2 for c in pack.criteria)
    assert len(pack.hash) == 16


def test_dataset_criteria_load_as_they_are(shared_dir: Path) -> None:
    files = sorted((shared_dir / "datasets").glob("*/criteria.toml"))
    assert files, "no criteria.toml under shared/datasets"
    for f in files:
        pack = load_pack(f)
        assert pack.name == f.parent.name  # no [pack] table: named after its folder
        assert pack.criteria


def test_no_pack_table_means_defaults(tmp_path: Path) -> None:
    pack = load_pack(write(tmp_path, GOOD, "mine.toml"))
    assert pack.name == "mine" and pack.version == "1"
    assert "triage assistant" in pack.instruction


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (GOOD + GOOD, "criterion 'urgency': duplicate id 'urgency'"),
        (
            '[[criterion]]\nid = "x"\nquestion = "Q?"\noptions = [ { id = "a", label = "A" } ]\n',
            "criterion 'x': field 'options' has 1 option",
        ),
        (
            '[[criterion]]\nid = "x"\nquestion = "  "\noptions = [ { '
            'id = "a", label = "A" }, { id = "b", label = "B" } ]\n',
            "criterion 'x': field 'question' is empty",
        ),
        (
            '[[criterion]]\nid = "x"\nquestion = "Q?"\noptions = [ { '
            'id = "a", label = "A" }, { id = "a", label = "B" } ]\n',
            "duplicate option id 'a'",
        ),
        (
            '[[criterion]]\nid = "x"\nquestion = "Q?"\noptions = [ '
            '{ id = "a", label = "" }, { id = "b", label = "B" } ]\n',
            "option 'a': field 'label' is empty",
        ),
        ('[pack]\nname = "n"\n', "no [[criterion]] entries"),
        ('[pack]\ncolour = "red"\n' + GOOD, "unknown field(s) ['colour']"),
    ],
)
def test_validation_names_file_criterion_and_field(tmp_path: Path, body: str, expected: str) -> None:
    path = write(tmp_path, body)
    with pytest.raises(PackError) as err:
        load_pack(path)
    assert str(path) in err.value.message
    assert expected in err.value.message


def test_more_options_than_letters(tmp_path: Path) -> None:
    opts = ", ".join(f'{{ id = "o{i}", label = "L{i}" }}' for i in range(len(LETTERS) + 1))
    path = write(tmp_path, f'[[criterion]]\nid = "many"\nquestion = "Q?"\noptions = [ {opts} ]\n')
    with pytest.raises(PackError, match=r"criterion 'many': field 'options' has 27 options; at most 26"):
        load_pack(path)


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(PackError, match="does not exist"):
        load_pack(tmp_path / "nope.toml")
    with pytest.raises(PackError, match="not valid TOML"):
        load_pack(write(tmp_path, "[[criterion]\nid="))
    bad = tmp_path / "latin1.toml"
    bad.write_bytes('question = "caf\xe9"'.encode("latin-1"))
    with pytest.raises(PackError, match="not UTF-8"):
        load_pack(bad)


def test_hash_is_canonical(tmp_path: Path) -> None:
    a = load_pack(write(tmp_path, GOOD, "a.toml"))
    # Same content, other whitespace, key order and file name: same hash.
    b = load_pack(
        write(
            tmp_path,
            '\n[[criterion]]\nquestion="How '
            'urgent?"\nid="urgency"\noptions=[{label="High",id="high"},{label="Low",id="low"}]\n',
            "b.toml",
        )
    )
    assert a.to_dict()["criterion"] == b.to_dict()["criterion"]
    assert load_pack(write(tmp_path, '[pack]\nname="a"\n' + GOOD, "c.toml")).hash == a.hash
    # A changed label changes the hash.
    c = load_pack(write(tmp_path, GOOD.replace('"High"', '"Very high"'), "a2.toml"))
    assert c.hash != a.hash


def test_examples_are_validated(tmp_path: Path) -> None:
    ok = GOOD + '\n[[example]]\ntext = "Site down!"\nlabels = { urgency = "high" }\n'
    pack = load_pack(write(tmp_path, ok))
    assert pack.examples[0].labels == {"urgency": "high"}
    bad = GOOD + '\n[[example]]\ntext = "x"\nlabels = { urgency = "extreme" }\n'
    with pytest.raises(PackError, match="example #1: field 'labels.urgency' = 'extreme' is not an option"):
        load_pack(write(tmp_path, bad, "bad.toml"))
