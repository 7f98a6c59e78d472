"""With nothing installed, the app offers the first-run screen; a chosen file loads and is remembered."""

from __future__ import annotations

from pathlib import Path

from fake_engine import FakeFactory, fake_app, wait_until

from triage.errors import TriageError
from triage.model.resolve import NoModelError
from triage.store.config import load_config


class SwitchingFactory(FakeFactory):
    """No model at first; whatever path is asked for afterwards loads."""

    def __call__(self, requested, notice):  # type: ignore[no-untyped-def]
        self.requests.append(requested)
        if requested is None:
            raise NoModelError("no model is installed", hint="install one with `triage model pull qwen3-0.6b`")
        return self.engine


async def test_first_run_screen_appears_and_a_chosen_file_loads(tmp_path: Path) -> None:
    from triage.tui.screens.first_run import FirstRunScreen

    factory = SwitchingFactory()
    app = fake_app(factory)
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, FirstRunScreen), what="first-run screen")
        model = tmp_path / "mine.gguf"
        model.write_bytes(b"GGUF")
        app.screen.dismiss(model)  # what the screen does once a file is validated or a pull is done
        await wait_until(pilot, lambda: app.main.model_state == "ready", what="model loaded")
        assert factory.requests == [None, str(model)]
    assert load_config()["model"] == str(model)


async def test_other_load_failures_do_not_open_it() -> None:
    from triage.tui.screens.first_run import FirstRunScreen

    app = fake_app(FakeFactory(error=TriageError("model file /x.gguf is not a GGUF file")))
    async with app.run_test() as pilot:
        await wait_until(pilot, lambda: app.main.model_state == "failed")
        await pilot.pause(0.1)
        assert not isinstance(app.screen, FirstRunScreen)
