"""Where alignlings keeps a learner's state, readable by that user alone (issue 29 §4).

The progress store holds learners' code and, on a class server, the class code and the learners'
token hashes; the caches hold reference values. On a shared host another local user must read none
of it. So:

- :func:`private_umask` sets the process umask to 077 (the CLI does it first thing), so every
  folder alignlings creates is 0700 and every file 0600 (SQLite gives its journal, ``-wal`` and
  ``-shm`` files the database file's mode);
- :func:`tighten` makes the home folders 0700 and the store, its journal files and the caches
  0600 where an older version (or another umask) left them readable by others, and says what it
  changed: the CLI prints a notice, a server logs it. The sandbox's job trees (``tree-*`` in the
  cache folder) stay as they are: their insides must be readable by the jobs' own uids, and the
  0700 folder above them keeps other users out.

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


CACHE_FOLDERS = ("cache", "expected", "predict", "figures")
"""The folders of cached values under a home: made private with everything in them."""


def _private_folder(folder: Path, changed: list[str], depth: int = 0) -> None:
    """Files in ``folder`` 0600, its cache folders 0700 and what they hold. A job tree
    (``tree-*``: readable inside by the jobs' own uids, behind this 0700 folder) and anything
    else are left as they are."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        path = Path(entry.path)
        if entry.is_symlink() or entry.name.startswith("tree-"):
            continue
        if entry.is_file():
            _chmod(path, 0o600, changed)
        elif entry.is_dir() and (depth > 0 or entry.name in CACHE_FOLDERS) and depth < 4:
            _chmod(path, 0o700, changed)
            _private_folder(path, changed, depth + 1)


def tighten(db_path: str | Path | None = None) -> list[str]:
    """Make the homes (:func:`homes`) 0700, the files in them (the store and its journal files)
    0600 and their cache folders private; and a progress database kept elsewhere (``db_path``) with
    its journal files 0600 (its folder is left alone: it is not ours). Returns one line per change
    ([] when all was private already)."""
    changed: list[str] = []
    for folder in homes():
        if not folder.is_dir():
            continue
        _chmod(folder, 0o700, changed)
        _private_folder(folder, changed)
    if db_path is not None and "://" not in str(db_path):
        for suffix in JOURNAL_SUFFIXES:
            _chmod(Path(f"{db_path}{suffix}"), 0o600, changed)
    return changed
