"""Run a command as a normal (unprivileged) user from a test that runs as root.

The sandbox must isolate learner code as a normal user too (issue 19), so the sandbox and forgery
suites also run as one: ``user_command(argv)`` wraps ``argv`` so that it runs as uid/gid 65534
(``nobody``: it exists on every Linux system, owns nothing and needs no account to be made) with
``setpriv``, inside a private mount namespace (``unshare --mount``) where the paths it needs are
reachable.

Why a mount namespace: the interpreter may live where that user cannot go (here
``/root/.pyenv``, and ``/root`` is mode 0700). Rather than change the host (a chmod of /root) or
copy the interpreter, each folder on the way to a needed path that the user cannot traverse is
covered, in this namespace only, by an empty tmpfs of mode 0755 that holds just the needed entries,
bound back from the originals (``/proc/self/fd/N`` of a descriptor opened before the cover). The
user sees the same paths as root, so ``sys.executable``, site-packages and the checkout stay where
they are; nothing outside the namespace changes, and it ends with the command.

    python tests/normal_user.py --reach PATH... -- COMMAND...   (as root; what user_command runs)
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import sysconfig
from pathlib import Path

NORMAL_UID = NORMAL_GID = 65534
REPO = Path(__file__).resolve().parents[1]


def needed_paths() -> list[str]:
    """What a Python run of this checkout needs to reach: the interpreter, its prefixes and
    site-packages, the checkout."""
    paths = [sys.executable, sys.prefix, sys.base_prefix, sys.exec_prefix, str(REPO)]
    paths += [p for k, p in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib", "purelib", "platlib")]
    paths += [p for p in sys.path if p and os.path.isabs(p) and os.path.exists(p)]
    return list(dict.fromkeys(os.path.realpath(p) for p in paths))


def user_command(argv: list[str], *, reach: list[str] = ()) -> list[str]:
    """``argv`` as a command that root runs to run it as the normal user (see the module doc)."""
    if os.geteuid() != 0:
        raise RuntimeError("user_command: only root can switch to another user")
    unshare = shutil.which("unshare")
    if unshare is None or shutil.which("setpriv") is None:
        raise RuntimeError("user_command: needs unshare and setpriv (util-linux)")
    reach_args = [a for p in [*needed_paths(), *reach] for a in ("--reach", p)]
    return [unshare, "--mount", "--propagation", "private", "--", sys.executable, __file__, *reach_args, "--", *argv]


def user_env(home: str, **extra: str) -> dict[str, str]:
    """A plain environment for the user: its own HOME, no root's caches or tokens."""
    keep = ("PATH", "LANG", "LC_ALL", "PYTHONPATH", "ALIGNLINGS_STRICT", "TERM")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(HOME=home, USER="nobody", LOGNAME="nobody", PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def _can_traverse(st: os.stat_result, uid: int, gid: int) -> bool:
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid == gid:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def _open_up(folders: dict[str, set[str]]) -> None:
    """Cover each folder with a 0755 tmpfs holding only the named entries, bound from the originals."""
    from alignlings.grading.sandbox.linux import MS_BIND, MS_REC, _mount

    for folder in sorted(folders, key=lambda p: p.count("/")):  # outermost first
        keep = {name: os.open(os.path.join(folder, name), os.O_PATH) for name in sorted(folders[folder])}
        _mount("tmpfs", folder, "tmpfs", 0, "mode=0755,size=64k")
        for name, fd in keep.items():
            target = os.path.join(folder, name)
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                os.mkdir(target)
            else:
                open(target, "w").close()
            _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
            os.close(fd)


def _main(args: list[str]) -> None:
    split = args.index("--")
    reach = [args[i + 1] for i in range(0, split, 2) if args[i] == "--reach"]
    command = args[split + 1:]
    folders: dict[str, set[str]] = {}
    for path in reach:
        parts = Path(path).parts
        for depth in range(1, len(parts) - 1 + 1):
            folder = str(Path(*parts[:depth]))
            if depth < len(parts) and not _can_traverse(os.stat(folder), NORMAL_UID, NORMAL_GID):
                folders.setdefault(folder, set()).add(parts[depth])
    _open_up(folders)
    os.execvp("setpriv", ["setpriv", f"--reuid={NORMAL_UID}", f"--regid={NORMAL_GID}", "--clear-groups",
                          "--inh-caps=-all", "--", *command])


if __name__ == "__main__":
    _main(sys.argv[1:])
