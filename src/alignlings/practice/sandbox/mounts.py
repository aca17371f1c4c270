"""What a job sees: its import path (the job tree), the visible and hidden paths, the environment,
and the mount namespace built for it (bubblewrap does the same on the cold path)."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from alignlings.practice.sandbox.limits import _DEVICES, _SYSTEM_DIRS, Limits
from alignlings.practice.sandbox.linux import (
    _ARCH,
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWUTS,
    MNT_DETACH,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    _libc,
    _mount,
    _mounts,
    _oserror,
    _pivot_root_here,
    _unshare,
)


def _src_root() -> str:
    return str(Path(__file__).resolve().parents[3])  # .../src, the directory holding `alignlings`


def _package_dir() -> str:
    """The real alignlings package (in a job tree's copy of this module, the one it was made from)."""
    real = getattr(sys.modules.get("alignlings"), "_REAL_PACKAGE", None)
    return real or str(Path(__file__).resolve().parents[2])  # .../alignlings


JOB_MODULES = ("practice/sandbox/__init__.py", "practice/sandbox/limits.py", "practice/sandbox/linux.py",
               "practice/sandbox/mounts.py", "practice/sandbox/job.py", "practice/sandbox/supervisor.py",
               "practice/sandbox/cold.py", "practice/sandbox/forkserver.py", "practice/sandbox/warm.py",
               "practice/checks.py", "practice/values.py", "practice/casejob.py")


"""All of alignlings a job can import: the job side of the sandbox and of grading. The library (whose
losses are the exercises' answers), the packs (solutions, misconceptions) and the grader are not."""


_job_tree_path: str | None = None


_job_tree_lock = threading.Lock()


def job_tree() -> str:
    """A directory holding a minimal ``alignlings`` package made of ``JOB_MODULES``: what jobs import.

    Built once per content (a hash in its name) under the user's cache directory, world-readable
    (jobs run as a uid of their own), never under /tmp (each job gets a fresh /tmp)."""
    global _job_tree_path
    running = sys.modules.get("alignlings")
    if getattr(running, "_REAL_PACKAGE", None):  # this process (a fork server, a job) runs from a tree
        return str(Path(running.__file__).resolve().parents[1])
    with _job_tree_lock:
        if _job_tree_path is not None and os.path.isdir(_job_tree_path):
            return _job_tree_path
        import hashlib

        pkg = _package_dir()
        header = f'"""The part of alignlings a sandboxed job may import."""\n_REAL_PACKAGE = {pkg!r}\n'
        files = {"alignlings/__init__.py": header.encode(),
                 "alignlings/practice/__init__.py": b""}
        for rel in JOB_MODULES:
            with open(os.path.join(pkg, rel), "rb") as f:
                files["alignlings/" + rel] = f.read()
        digest = hashlib.sha256(b"".join(k.encode() + b"\0" + v for k, v in sorted(files.items()))).hexdigest()[:16]
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        top = os.path.join(cache, "alignlings")
        if _under(os.path.realpath(top), ["/tmp"]):
            top = os.path.join("/var/tmp", f"alignlings-{os.geteuid()}")
        path = os.path.join(os.path.realpath(top), f"jobtree-{digest}")
        if not os.path.isdir(path):
            os.makedirs(top, exist_ok=True)
            staging = tempfile.mkdtemp(prefix="jobtree-", dir=top)
            for rel, data in files.items():
                target = os.path.join(staging, rel)
                os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
                with open(target, "wb") as f:
                    f.write(data)
                os.chmod(target, 0o644)
            for dirpath, _, _ in os.walk(staging):
                os.chmod(dirpath, 0o755)
            try:
                os.rename(staging, path)
            except OSError:  # another process made it first
                shutil.rmtree(staging, ignore_errors=True)
        _job_tree_path = path
        return path


def _python_path(extra: Sequence[str] = ()) -> list[str]:
    """The job's import path: the job tree first (its ``alignlings`` shadows the real one), then
    extras, then whatever the caller can import except the directory holding the real package."""
    hidden = {_src_root()}
    tmp = os.path.realpath(tempfile.gettempdir())
    paths = [job_tree()] + [os.path.realpath(p) for p in extra]
    # not the real package's folder, nor a folder holding the temp dir (a script run from /tmp puts
    # /tmp on sys.path: bound read-only, it would hide the job's own work dir)
    paths += [p for p in sys.path if p and os.path.isabs(p) and os.path.isdir(p) and p != "/"
              and os.path.realpath(p) not in hidden and not _under(tmp, [os.path.realpath(p)])]
    return list(dict.fromkeys(paths))


def _masks(binds: Sequence[str], python_path: Sequence[str]) -> list[str]:
    """Directories hidden under an empty read-only tmpfs: the real alignlings package, and any other
    ``alignlings`` folder on the job's import path (an older install in site-packages, a checkout on
    PYTHONPATH), wherever a bound directory would show it. Only the job tree's copy stays visible."""
    tree = os.path.realpath(job_tree())
    found = [os.path.realpath(_package_dir())]
    for entry in python_path:
        candidate = os.path.realpath(os.path.join(entry, "alignlings"))
        if os.path.isdir(candidate) and not _under(candidate, [tree]):
            found.append(candidate)
    return [p for p in dict.fromkeys(found) if _under(p, binds)]


def _job_env(workdir: str, python_path: Sequence[str]) -> dict[str, str]:
    """A clean environment: nothing of the caller's (tokens, credentials) reaches learner code."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir,
        "USER": "learner", "LOGNAME": "learner", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "PYTHONPATH": os.pathsep.join(python_path), "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1", "PYTHONIOENCODING": "utf-8", "PYTHONNOUSERSITE": "1",
        # one thread: predictable timings, and a forked child must not use the parent's OpenMP pool
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
    }


def _under(path: str, parents: Sequence[str]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in parents)


_visible_cache: dict[tuple, tuple[list[str], list[tuple[str, str]]]] = {}


def _visible_paths(python_path: Sequence[str], readonly: Sequence[str] = ()) -> tuple[list[str], list[tuple[str, str]]]:
    """Cached `_find_visible_paths`: the fork server fills the cache once, before it forks jobs."""
    key = (tuple(python_path), tuple(readonly))
    if key not in _visible_cache:
        _visible_cache[key] = _find_visible_paths(python_path, readonly)
    return _visible_cache[key]


def _find_visible_paths(python_path: Sequence[str],
                        readonly: Sequence[str] = ()) -> tuple[list[str], list[tuple[str, str]]]:
    """What the job may read: ([directories to bind read-only at the same path], [(link, target)]).

    System directories, the interpreter's prefixes and every import path; nothing else of the host
    (no /root, /home, other repositories). Symlinked top-level directories (/bin -> usr/bin on
    merged-/usr systems) are recreated as symlinks; other symlinked paths are bound at their target
    and linked from the name the job uses."""
    binds, links = [], []
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            links.append((d, os.readlink(d)))
        elif os.path.isdir(d):
            binds.append(d)
    candidates = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
                  os.path.dirname(os.path.abspath(sys.executable)), *python_path, *readonly]
    extra: list[str] = []
    for path in candidates:
        path = os.path.abspath(path)
        real = os.path.realpath(path)
        if not os.path.isdir(real) or real == "/":
            continue
        extra.append(real)
        if real != path and not _under(path, [d for d, _ in links]):
            links.append((path, real))
    for real in sorted(set(extra), key=len):  # shortest first, so nested paths are skipped
        if not _under(real, binds):
            binds.append(real)
    # a link inside a bound directory would have to be created on the host: never
    return binds, [(link, target) for link, target in links if not _under(link, binds)]


def _describe(base: str, features: Sequence[str]) -> str:
    return f"{base} ({', '.join(features)})" if features else base


def _features(namespaces: bool, probe: dict, processes: int) -> list[str]:
    feats = ["read-only file system except the work dir", "private /tmp", "no network",
             "own pid namespace"] if namespaces else []
    if probe.get("uid_dropped"):
        feats.append("own unprivileged uid")
    if processes <= 1 or not namespaces:
        feat = "no new processes (seccomp)" if probe.get("seccomp") else "no new processes (Python guards only)"
        feats.append(feat if processes <= 1 else feat[:-1] + "; more need a pid namespace)")
    elif probe.get("uid_dropped"):
        feats.append(f"at most {processes} processes and threads (RLIMIT_NPROC)")
    else:
        feats.append("new processes allowed, killed with the pid namespace")
    return feats


def _populate_root(root: str, binds: Sequence[str], links: Sequence[tuple[str, str]],
                   python_path: Sequence[str]) -> None:
    """Fill the tmpfs at `root` with what a job sees: the visible paths bound (read-only once
    sealed), a few device nodes, and mount points for /tmp, /proc and /dev/shm."""
    os.makedirs(root + "/tmp", exist_ok=True)
    os.makedirs(root + "/proc")
    for path in binds:
        os.makedirs(root + path, exist_ok=True)
        _mount(path, root + path, None, MS_BIND | MS_REC)
    for path in _masks(binds, python_path):
        _mount("tmpfs", root + path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "mode=0755,size=4k")
    os.makedirs(root + "/dev/shm")
    for name in _DEVICES:
        open(f"{root}/dev/{name}", "w").close()
        _mount(f"/dev/{name}", f"{root}/dev/{name}", None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{root}/dev/{name}")
    for link, target in links:
        parent = os.path.dirname(root + link)
        if not os.path.lexists(root + link) and os.path.realpath(parent).startswith(root + "/"):
            os.makedirs(parent, exist_ok=True)
            os.symlink(target, root + link)


def _seal_root(writable: set[str]) -> None:
    """After the pivot: every mount read-only (keeping its nosuid/nodev/noexec) except `writable`,
    the device nodes and /proc; then the root itself."""
    writable = writable | {"/proc"} | {f"/dev/{n}" for n in _DEVICES}
    for mount_point, options in _mounts():
        if mount_point not in writable and mount_point != "/" and not mount_point.startswith("/proc/"):
            _mount(None, mount_point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | options)
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _mount_job_parts(limits: Limits) -> None:
    """What each job gets fresh, whichever way its root was made: /proc of its own pid namespace,
    a private /tmp and /dev/shm."""
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={limits.file_size_bytes}")
    _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=1m")


_template: dict[str, Any] | None = None


"""In the fork server: a sealed mount namespace holding the job root for the server's own import
path, kept alive by an open descriptor ("fd"). A job joins a copy of it (setns + unshare) instead
of building its root: ~1 ms instead of ~3 ms of CPU and ~8 ms of wall time, most of it the RCU
grace periods that unmounting the host's tree waits for."""


def _make_template(python_path: Sequence[str], mount_point: str) -> dict[str, Any] | None:
    """Build the template namespace in a throwaway child; None if anything about it fails."""
    binds, links = _visible_paths(python_path)
    if _ARCH is None or any(_under(p, ["/tmp"]) for p in [*binds, *(link for link, _ in links)]):
        return None  # a job's fresh /tmp would hide those
    os.makedirs(mount_point, exist_ok=True)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            _unshare(CLONE_NEWNS)
            _mount(None, "/", None, MS_REC | MS_PRIVATE)
            _mount("tmpfs", mount_point, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m")
            _populate_root(mount_point, binds, links, python_path)
            os.chdir(mount_point)
            _pivot_root_here()
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)  # for _seal_root to read
            _seal_root(set())
            if _libc.umount2(b"/proc", MNT_DETACH) != 0:
                raise _oserror("umount /proc")
            os.write(w, b"1")
            time.sleep(3600)  # the parent opens our namespace, then kills us
        finally:
            os._exit(1)
    os.close(w)
    try:
        if os.read(r, 1) != b"1":
            return None
        fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
    finally:
        os.close(r)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return {"fd": fd, "binds": binds, "links": links}


def _join_template(req: dict, limits: Limits) -> bool:
    """A job's root as a private copy of the template; False if the template does not fit."""
    work = req["workdir"]
    if _template is None or not _under(work, ["/tmp"]):
        return False
    if _visible_paths(req["python_path"], req.get("readonly_paths", ())) != (_template["binds"], _template["links"]):
        return False
    if _libc.setns(_template["fd"], CLONE_NEWNS) != 0:  # also moves our root and cwd there
        raise _oserror("setns into the template")
    _unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
    _mount_job_parts(limits)
    os.makedirs(work)  # inside the job's fresh /tmp; the work dir itself: a tmpfs capped at disk_bytes
    _mount("tmpfs", work, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0700,size={limits.disk_bytes}")
    return True


def _enter_namespaces(req: dict) -> None:
    """In the job process: private mount and network namespaces (also IPC, UTS) with a new root
    holding only the visible paths (read-only), a private /tmp and the work dir, like bubblewrap
    builds. Runs as root, before the uid change; the job is already pid 1 of its own pid namespace."""
    limits = Limits(**req["limits"])
    try:
        if _join_template(req, limits):
            return
    finally:
        if _template is not None:
            os.close(_template["fd"])  # the job keeps no way back to the template
    work, root = req["workdir"], req["root"]
    binds, links = _visible_paths(req["python_path"], req.get("readonly_paths", ()))
    _unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount propagates to the host
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m")
    os.makedirs(root + "/tmp")
    # this /tmp before the binds (an import path may live under /tmp); the job's, sealed writable
    _mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={limits.file_size_bytes}")
    _populate_root(root, binds, links, req["python_path"])
    os.makedirs(root + work, exist_ok=True)
    _mount("tmpfs", root + work, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0700,size={limits.disk_bytes}")
    os.chdir(root)
    _pivot_root_here()
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)  # shows only this pid namespace
    _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=1m")
    _seal_root({"/tmp", work, "/dev/shm"})
