"""Where triage keeps its files: config, data (models, history), cache and state.

The directories come from platformdirs. ``TRIAGE_HOME=DIR`` puts all four under
``DIR`` (``DIR/config``, ``DIR/data``, ``DIR/cache``, ``DIR/state``); tests and
the packaged smoke test use it to stay out of the user's real directories.
"""

from __future__ import annotations

import os
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


def user_dirs() -> UserDirs:
    """Return the user directories, honouring ``TRIAGE_HOME``. Creates nothing."""
    home = os.environ.get("TRIAGE_HOME")
    if home:
        root = Path(home).expanduser()
        return UserDirs(root / "config", root / "data", root / "cache", root / "state")
    import platformdirs

    return UserDirs(
        Path(platformdirs.user_config_dir(APP_NAME)),
        Path(platformdirs.user_data_dir(APP_NAME)),
        Path(platformdirs.user_cache_dir(APP_NAME)),
        Path(platformdirs.user_state_dir(APP_NAME)),
    )
