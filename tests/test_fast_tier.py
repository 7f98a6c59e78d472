"""The fast tier (README): `pytest -m "not model and not slow"` never reaches a real model, and the in-process
``cli`` fixture gives what a `triage` process would: exit status, stdout and stderr."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).with_name("conftest.py")


def test_a_test_that_reaches_a_real_model_through_a_fixture_is_marked_model(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST.read_text(encoding="utf-8"))
    pytester.makepyfile(
        test_some="""
        import pytest

        @pytest.fixture
        def engine_home(smollm2_path):  # one fixture away from the model
            return smollm2_path.parent

        def test_direct(smollm2_path):
            pass

        def test_through_another_fixture(engine_home):
            pass

        def test_the_other_model(qwen25_path):
            pass

        def test_no_model(tmp_path):
            pass
        """
    )
    # in this process: leave out the plugins whose session state the outer run shares (snapshots, asyncio)
    quiet = ["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:asyncio", "-p", "no:textual-snapshot"]
    ran = pytester.runpytest_inprocess(*quiet, "-m", "not model")
    out = ran.stdout.str()
    assert "test_some.py::test_no_model" in out
    assert "1/4 tests collected (3 deselected)" in out, out
    ran = pytester.runpytest_inprocess(*quiet, "-m", "model")
    assert "3/4 tests collected (1 deselected)" in ran.stdout.str(), ran.stdout.str()


def test_two_workers_each_run_on_their_own_cores(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """./scripts/test's `-n 2`: conftest pins each xdist worker to its share of the cores, so the engines a
    worker loads (triage's default thread count is the cores a process may run on) never spin on the other's."""
    if not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2:
        pytest.skip("needs two cores to share")
    for outer in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):  # the inner run's controller is no worker
        monkeypatch.delenv(outer, raising=False)
    mine = os.sched_getaffinity(0)  # one core when this test runs in a pinned worker of ./scripts/test
    os.sched_setaffinity(0, range(os.cpu_count() or 1))  # the inner run's workers share the whole machine
    try:
        cores = sorted(os.sched_getaffinity(0))
        ran = _pinned_run(pytester, cores)
    finally:
        os.sched_setaffinity(0, mine)
    assert len(cores) >= 2
    ran.assert_outcomes(passed=2)


def _pinned_run(pytester: pytest.Pytester, cores: list[int]) -> pytest.RunResult:
    pytester.makeconftest(CONFTEST.read_text(encoding="utf-8"))
    body = f"""
        import os
        from triage.model.native import default_threads

        def _check():
            n = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
            share = {cores}[int(os.environ["PYTEST_XDIST_WORKER"].removeprefix("gw"))::n]
            assert sorted(os.sched_getaffinity(0)) == share
            assert default_threads() == len(share)
    """
    pytester.makepyfile(
        test_one=body + "\n        def test_one():\n            _check()\n",
        test_two=body + "\n        def test_two():\n            _check()\n",
    )
    return pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider")


def test_cli_runs_a_command_in_this_process_with_its_exit_status_and_streams(cli: Any, tmp_path: Path) -> None:
    ran = cli(["stats", "--json", "--history-file", str(tmp_path / "none.sqlite3")])
    assert ran.returncode == 2 and ran.stdout == ""
    assert ran.stderr.startswith("triage: error: there is no history"), ran.stderr
    ran = cli(["stats", "--no-such-flag"])  # argparse's usage error: SystemExit(2)
    assert ran.returncode == 2 and "unrecognized arguments: --no-such-flag" in ran.stderr
