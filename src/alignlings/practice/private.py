"""Where alignlings keeps a learner's state, readable by that user alone (issue 29 §4).

The progress store holds learners' code and, on a class server, the class code and the learners'
token hashes; the caches hold reference values. On a shared host another local user must read none
of it. So:

- :func:`private_umask` sets the process umask to 077 (the CLI does it first thing), so every
  folder alignlings creates is 0700 and every file 0600 (SQLite gives its journal, ``-wal`` and
  ``-shm`` files the database file's mode);
- :func:`tighten` makes the home folders 0700 and the store and its journal files 0600 where an
  older version (or another umask) left them readable by others, and says what it changed: the CLI
  prints a notice, a server logs it.

The folders are ``$ALIGNLINGS_HOME`` when set, else the platform's user data and cache folders of
alignlings (``platformdirs``), and the folder of the progress database when it lives elsewhere.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("alignlings.practice")

PRIVATE_UMASK = 0o077
JOURNAL_SUFFIXES = ("", "-wal", "-shm", "-journal")


def private_umask() -> int:
    """Add group and other to the process umask (the old umask is returned)."""
    old = os.umask(PRIVATE_UMASK)
    os.umask(old | PRIVATE_UMASK)
    return old


def homes() -> list[Path]:
    """The folders alignlings keeps state in, for this environment."""
    home = os.environ.get("ALIGNLINGS_HOME")
    if home:
        return [Path(home).expanduser()]
    import platformdirs

    return [Path(platformdirs.user_data_dir("alignlings", appauthor=False)),
            Path(platformdirs.user_cache_dir("alignlings"))]


def _chmod(path: Path, mode: int, changed: list[str]) -> None:
    try:
        st = path.lstat()
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode) or st.st_uid != os.geteuid():
        return  # never follow a link, never touch what is not ours
    if stat.S_IMODE(st.st_mode) & 0o077:
        try:
            os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o077 & mode)
            changed.append(f"{path}: {stat.S_IMODE(st.st_mode):o} -> {stat.S_IMODE(path.stat().st_mode):o}")
        except OSError as exc:
            log.warning("could not make %s private: %s", path, exc)


def tighten(db_path: str | Path | None = None) -> list[str]:
    """Make the homes (:func:`homes`) and everything in them private: folders 0700, files 0600; and
    a progress database kept elsewhere (``db_path``) with its journal files 0600 (its folder is
    left alone: it is not ours). Returns one line per change ([] when all was private already)."""
    changed: list[str] = []
    for folder in homes():
        if not folder.is_dir():
            continue
        _chmod(folder, 0o700, changed)
        for root, dirs, files in os.walk(folder):
            for d in dirs:
                _chmod(Path(root) / d, 0o700, changed)
            for f in files:
                _chmod(Path(root) / f, 0o600, changed)
    if db_path is not None and "://" not in str(db_path):
        for suffix in JOURNAL_SUFFIXES:
            _chmod(Path(f"{db_path}{suffix}"), 0o600, changed)
    return changed
