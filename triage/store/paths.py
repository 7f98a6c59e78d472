"""Where triage keeps its files: config, data (models, history), cache and state.

The directories come from platformdirs. ``TRIAGE_HOME=DIR`` puts all four under
``DIR`` (``DIR/config``, ``DIR/data``, ``DIR/cache``, ``DIR/state``); tests and
the packaged smoke test use it to stay out of the user's real directories. ``DIR`` must be
absolute once ``~`` is expanded, and not a file: a relative one would move with the working
folder, so it is refused (:class:`~triage.errors.InputError`), as is a file. Empty and blank
both mean unset (the platform's folders).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

APP_NAME = "triage"


@dataclass(frozen=True)
class UserDirs:
    """The four per-user directories triage writes to."""

    config: Path
    data: Path
    cache: Path
    state: Path

    @property
    def models(self) -> Path:
        """Installed model files."""
        return self.data / "models"

    @property
    def history_db(self) -> Path:
        """The SQLite history of scored tickets."""
        return self.data / "history.sqlite3"

    @property
    def config_file(self) -> Path:
        """The user's config file (TOML)."""
        return self.config / "config.toml"


def _home(value: str) -> Path:
    """``TRIAGE_HOME``'s folder: absolute (``~`` expanded) and not a file.

    Raises:
        InputError: a relative path, or a path that exists and is no folder.
    """
    from triage.errors import InputError

    root = Path(value).expanduser()
    if not root.is_absolute():
        raise InputError(
            f"TRIAGE_HOME={value!r} is a relative path: triage's files would move with the working folder",
            hint=f"give an absolute path, e.g. TRIAGE_HOME={Path.cwd() / value}, or unset it for the default folders",
        )
    if root.exists() and not root.is_dir():
        raise InputError(
            f"TRIAGE_HOME={value!r} is not a folder (it is a file)",
            hint="point TRIAGE_HOME at a folder (it is created when needed), or unset it for the default folders",
        )
    return root


def user_dirs() -> UserDirs:
    """Return the user directories, honouring ``TRIAGE_HOME``. Creates nothing."""
    from triage.environment import text

    home = text("TRIAGE_HOME")
    if home is not None:
        root = _home(home)
        return UserDirs(root / "config", root / "data", root / "cache", root / "state")
    import platformdirs

    return UserDirs(
        Path(platformdirs.user_config_dir(APP_NAME)),
        Path(platformdirs.user_data_dir(APP_NAME)),
        Path(platformdirs.user_cache_dir(APP_NAME)),
        Path(platformdirs.user_state_dir(APP_NAME)),
    )
