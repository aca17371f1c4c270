"""What a job sees: its import path (the job tree), the visible and hidden paths, the environment,
and the mount namespace built for it (bubblewrap does the same on the cold path)."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from alignlings.grading.sandbox.limits import _DEVICES, _SYSTEM_DIRS, Limits, default_tasks
from alignlings.grading.sandbox.linux import (
    _ARCH,
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWUTS,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    _libc,
    _fork_into_new_pid_namespace,
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


JOB_MODULES = ("grading/sandbox/__init__.py", "grading/sandbox/limits.py", "grading/sandbox/linux.py",
               "grading/sandbox/mounts.py", "grading/sandbox/job.py", "grading/sandbox/supervisor.py",
               "grading/sandbox/cold.py", "grading/sandbox/forkserver.py", "grading/sandbox/warm.py",
               "content/checks.py", "grading/values.py", "grading/casejob.py", "grading/record.py")


"""All of alignlings a job can import: the job side of the sandbox and of grading. The library (whose
losses are the exercises' answers), the packs (solutions, misconceptions) and the grader are not."""


_job_tree_path: str | None = None


_job_tree_lock = threading.Lock()


def job_tree() -> str:
    """A directory holding a minimal ``alignlings`` package made of ``JOB_MODULES``: what jobs import.

    Made by this process, for this process: a fresh folder (``mkdtemp``: mode 0700, a name no one
    can predict, created with O_EXCL) inside a per-user folder that must be a real directory this
    user owns (``~/.cache/alignlings``, or ``/var/tmp/alignlings-UID`` where the cache lies under
    /tmp), removed when the process exits. A folder found at a computable path is never imported:
    another local user could have planted it, and the fork server imports the tree before any
    sandbox applies. The tree itself (``jobtree-<hash of its content>``, the name the grader's
    cache keys on) is world-readable, since jobs run as a uid of their own and see it through a
    bind mount, never through the private folder. Never under /tmp (each job gets a fresh /tmp)."""
    global _job_tree_path
    running = sys.modules.get("alignlings")
    if getattr(running, "_REAL_PACKAGE", None):  # this process (a fork server, a job) runs from a tree
        return str(Path(getattr(running, "__file__", "")).resolve().parents[1])
    with _job_tree_lock:
        if _job_tree_path is not None and os.path.isdir(_job_tree_path):
            return _job_tree_path
        files, digest = _job_tree_files()
        base = _private_tree_folder()
        path = os.path.join(base, f"jobtree-{digest}")
        for rel, data in files.items():
            target = os.path.join(path, rel)
            os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with open(fd, "wb") as f:
                f.write(data)
            os.chmod(target, 0o644)  # whatever the umask
        for dirpath, _, _ in os.walk(path):
            os.chmod(dirpath, 0o755)
        atexit.register(shutil.rmtree, base, True)
        _job_tree_path = path
        return path


def _job_tree_files() -> tuple[dict[str, bytes], str]:
    """The job tree's files (relative path -> bytes) and the hash of them all (16 hex digits)."""
    import hashlib

    pkg = _package_dir()
    header = f'"""The part of alignlings a sandboxed job may import."""\n_REAL_PACKAGE = {pkg!r}\n'
    files = {"alignlings/__init__.py": header.encode()}
    for rel in JOB_MODULES:  # each package folder on the way, empty (its real __init__ imports more)
        folders = rel.split("/")[:-1]
        for i in range(1, len(folders) + 1):
            files.setdefault("alignlings/" + "/".join(folders[:i]) + "/__init__.py", b"")
    for rel in JOB_MODULES:
        with open(os.path.join(pkg, rel), "rb") as f:
            files["alignlings/" + rel] = f.read()
    digest = hashlib.sha256(b"".join(k.encode() + b"\0" + v for k, v in sorted(files.items()))).hexdigest()[:16]
    return files, digest


_TREE_PATTERN = re.compile(r"^tree-(\d+)-")


def _tree_top() -> str | None:
    """The per-user folder that holds this user's job trees, made (0700) if missing; None where the
    folder at that path is not a real directory owned by this user (someone else made it)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    top = os.path.join(cache, "alignlings")
    if _under(os.path.realpath(top), [os.path.realpath(tempfile.gettempdir()), "/tmp"]):
        top = os.path.join("/var/tmp", f"alignlings-{os.geteuid()}")
    else:
        try:
            os.makedirs(cache, mode=0o700, exist_ok=True)
        except OSError:
            return None
    try:
        os.mkdir(top, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    st = os.lstat(top)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return None
    if st.st_mode & 0o077:
        os.chmod(top, 0o700)  # ours, but open to others: whatever they put there is never used
    return top


def _private_tree_folder() -> str:
    """A fresh 0700 folder made by this process for its job tree (see ``job_tree``)."""
    top = _tree_top()
    if top is not None:
        _clean_stale_trees(top)
        try:
            return tempfile.mkdtemp(prefix=f"tree-{os.getpid()}-", dir=top)
        except OSError:
            pass
    for fallback in ("/var/tmp", None):  # None: the temp dir (jobs then take the slower mount path)
        try:
            return tempfile.mkdtemp(prefix=f"alignlings-sandbox-{os.getpid()}-tree-", dir=fallback)
        except OSError:
            continue
    raise OSError("job_tree: no folder to write the job tree to (tried the cache folder, /var/tmp, the temp dir)")


def _clean_stale_trees(top: str) -> None:
    """Job trees left by processes of ours that were killed (the pid in their name is gone)."""
    try:
        names = os.listdir(top)
    except OSError:
        return
    for name in names:
        m = _TREE_PATTERN.match(name)
        if not m or int(m.group(1)) == os.getpid():
            continue
        try:
            os.kill(int(m.group(1)), 0)
            continue  # still running
        except ProcessLookupError:
            shutil.rmtree(os.path.join(top, name), ignore_errors=True)
        except OSError:
            continue


def _interpreter_dirs() -> list[str]:
    """Where the interpreter keeps its standard library and site-packages (real paths)."""
    import site
    import sysconfig

    found = []
    for scheme_vars in ({}, {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}):
        paths = sysconfig.get_paths(vars=scheme_vars or None)
        found += [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths]
    found += site.getsitepackages() if hasattr(site, "getsitepackages") else []
    user_site = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    if user_site and site.ENABLE_USER_SITE:
        found.append(user_site)
    return [os.path.realpath(p) for p in dict.fromkeys(found) if p]


def _python_path(extra: Sequence[str] = ()) -> list[str]:
    """The job's import path: the job tree first (its ``alignlings`` shadows the real one), then
    extras, then the caller's import path entries that belong to the interpreter (its standard
    library and site-packages) and nothing else: not the current directory or the script's folder
    (``python -m alignlings`` run in the folder holding the progress database puts it there), not
    ``PYTHONPATH`` entries or folders a ``.pth`` file adds (a checkout of alignlings), not the
    directory holding the real package."""
    hidden = {_src_root()}
    tmp = os.path.realpath(tempfile.gettempdir())
    allowed = _interpreter_dirs()
    paths = [job_tree()] + [os.path.realpath(p) for p in extra]
    # nor a folder holding the temp dir (bound read-only, it would hide the job's own work dir)
    for p in sys.path:
        if not p or not os.path.isabs(p) or not os.path.isdir(p):
            continue
        real = os.path.realpath(p)
        if real != "/" and real not in hidden and _under(real, allowed) and not _under(tmp, [real]):
            paths.append(real)
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


NO_TASK_LIMIT = "threads not limited"


"""What the isolation text says where no task limit binds the job (then it is not isolated: a job
could start threads without end; ``is_isolated``)."""


def _features(namespaces: bool, probe: dict, processes: int, tasks: int | None = None) -> list[str]:
    feats = ["read-only file system except the work dir", "private /tmp", "no network",
             "own pid namespace"] if namespaces else []
    if probe.get("uid_dropped"):
        feats.append("own unprivileged uid")
    elif probe.get("userns"):
        feats.append("own user namespace without capabilities")
    if processes <= 1 or not namespaces:
        feat = "no new processes (seccomp)" if probe.get("seccomp") else "no new processes (Python guards only)"
        feats.append(feat if processes <= 1 else feat[:-1] + "; more need a pid namespace)")
    else:
        feats.append("new processes allowed, killed with the pid namespace")
    nproc, default = probe.get("nproc", -1), default_tasks()
    if 0 < nproc <= default + 1:  # the probe ran with the default task limit: it applied
        feats.append(f"at most {max(tasks or default, processes)} threads (RLIMIT_NPROC)")
    elif probe.get("pids_cgroup"):  # jobs stay the host's uid 0 (no CAP_SETUID), in a pids cgroup each
        feats.append(f"at most {max(tasks or default, processes)} threads (pids cgroup)")
    else:
        feats.append(f"{NO_TASK_LIMIT} (no uid of its own that RLIMIT_NPROC binds)")
    return feats


def _can_traverse(st: os.stat_result, uid: int, gid: int) -> bool:
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid == gid:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def _reach(paths: Sequence[str], uid: int, gid: int) -> None:
    """In a mount namespace of our own, as a process that can pass every folder (root of a user
    namespace mapping uid 0): let `uid`/`gid` reach each of `paths` by covering each folder on the
    way that it cannot pass with a 0755 tmpfs holding only the entries on the way, bound back from
    the originals (through a descriptor opened before the cover). Outside this namespace, and
    inside it for everything else they hold, those folders keep their modes (0700)."""
    folders: dict[str, set[str]] = {}
    for path in paths:
        parts = Path(path).parts
        for depth in range(1, len(parts)):
            folder = str(Path(*parts[:depth]))
            if not _can_traverse(os.stat(folder), uid, gid):
                folders.setdefault(folder, set()).add(parts[depth])
    for folder in sorted(folders, key=lambda p: p.count("/")):  # outermost first
        keep = {name: os.open(os.path.join(folder, name), os.O_PATH) for name in sorted(folders[folder])}
        try:
            _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
            for name, fd in keep.items():
                target = os.path.join(folder, name)
                if stat.S_ISDIR(os.fstat(fd).st_mode):
                    os.mkdir(target)
                else:
                    open(target, "w").close()
                _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
        finally:
            for fd in keep.values():
                os.close(fd)


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

    def build() -> None:
        os.close(r)
        # our pid in the caller's /proc (still the host's here), which the caller's own pid
        # namespace may not number us by (a fork server in a user namespace is pid 1 of its own)
        host_pid = int(os.readlink("/proc/self"))
        _unshare(CLONE_NEWNS)
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        _mount("tmpfs", mount_point, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m")
        _populate_root(mount_point, binds, links, python_path)
        # /proc of our own pid namespace, mounted while the host's is still in sight (in a user
        # namespace the kernel mounts a proc only where one is fully visible already), and kept:
        # each job mounts its own over it, which again needs one in sight
        _mount("proc", mount_point + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        os.chdir(mount_point)
        _pivot_root_here()
        _seal_root(set())
        os.write(w, f"{host_pid}\n".encode())
        time.sleep(3600)  # the parent opens our namespace, then kills us

    pid = _fork_into_new_pid_namespace(build)
    os.close(w)
    try:
        answer = os.read(r, 32)
        if not answer.endswith(b"\n"):
            return None
        fd = os.open(f"/proc/{int(answer)}/ns/mnt", os.O_RDONLY)
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
    # shows only this pid namespace; mounted before the host's /proc goes out of sight (see above)
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chdir(root)
    _pivot_root_here()
    _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=1m")
    _seal_root({"/tmp", work, "/dev/shm"})
