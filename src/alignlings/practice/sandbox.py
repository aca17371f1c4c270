"""The sandbox of the practice grader: run learner code in a separate, limited process.

A *job* is a function ``f(payload: dict) -> JSON value`` named ``"package.module:function"``. It
never runs in the caller's process. There are two ways to start one:

- ``run_job`` (cold): a fresh interpreter per job, inside bubblewrap where bubblewrap works.
- ``WarmSandbox`` (warm): a long-lived fork server imports torch once; each job runs in a child
  forked from it (milliseconds instead of the ~1 s torch import), isolated with Linux namespaces
  that we set up ourselves: the same layout bubblewrap builds, made once as a sealed template
  mount namespace that each job joins a private copy of.

Layers, outermost first. Each result names the ones that applied in ``SandboxResult.isolation``.

1. A supervisor outside the job (the caller's thread, in ``_supervise``) enforces wall time, output
   size and resident memory, and at the end kills the job's whole pid namespace (or process group,
   where there is none). On the warm path the fork server only forks and reaps: it passes the
   caller a pidfd to the job and its exit status, so no process sits between them.
2. Namespaces: the job sees only the system and Python directories, read-only; its work dir is the
   one writable place besides a private /tmp; no network; its own pid namespace.
3. When we are root, the job runs as a uid of its own (``_JOB_UID_BASE`` + a live pid, so
   concurrent jobs never share one): it cannot signal our processes or read root's files.
4. rlimits: CPU time, data size and address space, file size, open files, core dumps.
5. No new processes: Python-level guards raise ``PermissionError`` with a plain message, and a
   seccomp filter (the kernel) kills the job if it forks or execs some other way (ctypes).

Everything is Linux-only; where a layer cannot be set up the run falls back and says so.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import faulthandler
import gc
import importlib
import json
import os
import platform
import re
import resource
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

__all__ = ["Limits", "SandboxResult", "SandboxUnavailable", "WarmSandbox", "run_job"]

ERROR_KINDS = ("timeout", "memory", "output_limit", "crashed", "killed", "exited", "exception", "forbidden")
"""Every value ``SandboxResult.error_kind`` takes besides None."""

_JOB_UID_BASE = 1_500_000_000
"""Jobs run as uid/gid ``_JOB_UID_BASE + pid`` (the job's host pid on the warm path, its bwrap's on
the cold path: live pids are unique, so concurrent jobs never share a uid); far above the ranges
distributions and subuid maps hand out."""

_RESULT_CAP = 32 * 2**20  # a job's JSON return value; more is reported as output_limit
_AS_SLACK = 2 * 2**30  # address space beyond memory_bytes: code mappings and reservations, not memory
_SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_DEVICES = ("null", "zero", "full", "random", "urandom")


# -- public types ------------------------------------------------------------------------------
@dataclass
class Limits:
    """What one job may use. Defaults suit one grading run of a small DPO/GRPO exercise."""

    wall_seconds: float = 10.0
    """Real time from the start of the job's process until it is stopped (error_kind "timeout").
    On the cold path this includes starting the interpreter and imports such as torch (~1 s)."""
    cpu_seconds: int = 30
    """CPU time (RLIMIT_CPU), all threads together; over it the job is stopped ("timeout")."""
    memory_bytes: int = 4 * 2**30
    """Memory: RLIMIT_DATA (heap and private anonymous memory, which is what torch and Python
    allocate; the interpreter and preloaded modules count too, ~250 MB with torch), the resident
    set polled by the supervisor (catches shared memory), and RLIMIT_AS at this plus 2 GiB, since
    torch reserves address space it never uses. Over it: error_kind "memory"."""
    file_size_bytes: int = 16 * 2**20
    """Largest file the job may write (RLIMIT_FSIZE); also the size of its private /tmp."""
    open_files: int = 256
    """Open file descriptors (RLIMIT_NOFILE)."""
    disk_bytes: int = 64 * 2**20
    """Everything the job may write to its work dir together: where namespaces apply, the work dir
    is a tmpfs of this size (writing past it fails with ENOSPC); without them only
    file_size_bytes per file holds."""
    processes: int = 1
    """Processes the job may have, itself included. 1: it may start no process or program (Python
    guards raise first with a plain message, then a seccomp filter kills it: "forbidden"). N > 1:
    forking is allowed, but only inside a pid namespace, whose end kills every process in it
    (without one, a child could escape and outlive the job, so it stays 1); where the job runs as
    its own uid, RLIMIT_NPROC caps its processes *and threads* at N."""
    output_bytes: int = 64 * 1024
    """Captured stdout+stderr; a job that prints more is stopped at once ("output_limit")."""

    def __post_init__(self) -> None:
        for name in ("wall_seconds", "cpu_seconds", "memory_bytes", "file_size_bytes", "open_files",
                     "disk_bytes", "processes", "output_bytes"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Limits.{name}: expected a positive number, got {getattr(self, name)!r}")


@dataclass
class SandboxResult:
    ok: bool
    """The job function returned normally and its value came back."""
    value: Any
    """The job function's JSON-decoded return value (None if not ok)."""
    error_kind: str | None
    """None, or one of ERROR_KINDS."""
    error_message: str | None
    """A plain-language reason, e.g. "the code ran longer than 10 s and was stopped"."""
    stdout: str
    """What the job printed (stdout and stderr interleaved), cut at Limits.output_bytes."""
    isolation: str
    """Which layers applied, e.g. "bubblewrap (read-only file system except the work dir, ...)"."""
    seconds: float
    """Wall time of the whole call, sandbox setup included."""


class SandboxUnavailable(RuntimeError):
    """The isolation asked for by name cannot be set up on this machine."""


# -- Linux primitives via ctypes -----------------------------------------------------------------
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET, CLONE_THREAD = 0x20000000, 0x40000000, 0x00010000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 18, 1 << 21
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP = 1, 4, 38, 22
_MOUNT_OPTION_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
                       "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}

# Syscall numbers: the seccomp filter matches on them, and glibc wraps neither pivot_root nor seccomp.
_ARCHES = {
    "x86_64": {"audit": 0xC000003E, "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "execve": 59,
               "execveat": 322, "seccomp": 317, "pivot_root": 155, "unshare": 272, "setns": 308, "x32": True},
    "aarch64": {"audit": 0xC00000B7, "fork": None, "vfork": None, "clone": 220, "clone3": 435, "execve": 221,
                "execveat": 281, "seccomp": 277, "pivot_root": 41, "unshare": 97, "setns": 268, "x32": False},
}
_ARCH = _ARCHES.get(platform.machine())

try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    _libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    _libc.unshare.argtypes = [ctypes.c_int]
    _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
except (OSError, AttributeError):  # not glibc/Linux: namespaces and seccomp are simply unavailable
    _libc = None


def _oserror(what: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"{what}: {os.strerror(err)}")


def _unshare(flags: int) -> None:
    if _libc is None or _libc.unshare(flags) != 0:
        raise _oserror("unshare") if _libc else OSError(errno.ENOSYS, "unshare: no libc")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: None if s is None else os.fsencode(s))
    if _libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        raise _oserror(f"mount {target}")


def _prctl(option: int, arg: int) -> None:
    if _libc is None or _libc.prctl(option, arg, 0, 0, 0) != 0:
        raise _oserror("prctl") if _libc else OSError(errno.ENOSYS, "prctl: no libc")


def _pivot_root_here() -> None:
    """Make the current directory the root (the pivot_root(".", ".") idiom) and drop the old one."""
    if _ARCH is None or _libc.syscall(_ARCH["pivot_root"], b".", b".") != 0:
        raise _oserror("pivot_root") if _ARCH else OSError(errno.ENOSYS, "pivot_root: unknown architecture")
    if _libc.umount2(b".", MNT_DETACH) != 0:
        raise _oserror("umount old root")
    os.chdir("/")


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _seccomp_program(arch: dict) -> list[tuple[int, int, int, int]]:
    """A classic-BPF filter: kill the process on fork, vfork, execve(at) and on clone without
    CLONE_THREAD; clone3 answers ENOSYS (its flags sit behind a pointer BPF cannot read), which
    makes glibc fall back to clone for threads, so threads keep working; unshare and setns answer
    EPERM (no new user, mount or network namespace from inside a job)."""
    ld_abs, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    kill, allow, enosys = 0x80000000, 0x7FFF0000, 0x00050000 | errno.ENOSYS  # RET_KILL_PROCESS, ALLOW, ERRNO
    eperm = 0x00050000 | errno.EPERM
    prog = [(ld_abs, 0, 0, 4), (jeq, 1, 0, arch["audit"]), (ret, 0, 0, kill), (ld_abs, 0, 0, 0)]
    if arch["x32"]:  # x32 syscalls alias the x86_64 numbers with this bit set
        prog += [(jge, 0, 1, 0x40000000), (ret, 0, 0, kill)]
    for name in ("fork", "vfork", "execve", "execveat"):
        if arch[name] is not None:
            prog += [(jeq, 0, 1, arch[name]), (ret, 0, 0, kill)]
    prog += [(jeq, 0, 1, arch["clone3"]), (ret, 0, 0, enosys)]
    for name in ("unshare", "setns"):
        prog += [(jeq, 0, 1, arch[name]), (ret, 0, 0, eperm)]
    prog += [(jeq, 0, 2, arch["clone"]),  # not clone: allow
             (ld_abs, 0, 0, 16),  # low 32 bits of args[0], the flags (little-endian)
             (jset, 0, 1, CLONE_THREAD),
             (ret, 0, 0, allow),
             (ret, 0, 0, kill)]
    return prog


def _install_seccomp() -> None:
    if _ARCH is None or _libc is None:
        raise OSError(errno.ENOSYS, f"seccomp: no filter for {platform.machine()}")
    prog = _seccomp_program(_ARCH)
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), filters)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    # seccomp(SET_MODE_FILTER, TSYNC) covers every thread; the older prctl form only this one.
    if _libc.syscall(_ARCH["seccomp"], 1, 1, ctypes.byref(fprog)) != 0:
        if _libc.prctl(PR_SET_SECCOMP, 2, ctypes.addressof(fprog), 0, 0) != 0:
            raise _oserror("seccomp")


# -- what the job sees: paths and environment ----------------------------------------------------
def _src_root() -> str:
    return str(Path(__file__).resolve().parents[2])  # .../src, the directory holding `alignlings`


def _package_dir() -> str:
    """The real alignlings package (in a job tree's copy of this module, the one it was made from)."""
    real = getattr(sys.modules.get("alignlings"), "_REAL_PACKAGE", None)
    return real or str(Path(__file__).resolve().parents[1])  # .../alignlings


JOB_MODULES = ("practice/sandbox.py", "practice/checks.py", "practice/values.py", "practice/casejob.py")
"""All of alignlings a job can import: the job side of the sandbox and of grading. The library (whose
losses are the exercises' answers), the packs (solutions, misconceptions) and the grader are not."""

_job_tree_path: str | None = None
_job_tree_lock = threading.Lock()


def job_tree() -> str:
    """A directory holding a minimal ``alignlings`` package made of ``JOB_MODULES``: what jobs import.

    Built once per content (a hash in its name) under the user's cache directory, world-readable
    (jobs run as a uid of their own), never under /tmp (each job gets a fresh /tmp)."""
    global _job_tree_path
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


def _masks(binds: Sequence[str]) -> list[str]:
    """Directories hidden under an empty read-only tmpfs: the real alignlings package, wherever an
    import path bound for the job (site-packages, for a non-editable install) would show it."""
    pkg = os.path.realpath(_package_dir())
    return [pkg] if _under(pkg, binds) else []


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


# -- inside the job process ----------------------------------------------------------------------
_forbidden_attempts: list[str] = []


def _forbid_new_processes() -> None:
    """Make the usual ways of starting a process raise a plain PermissionError (and remember the
    attempt, so the result says "forbidden"). The seccomp filter still stops the unusual ways."""
    import _posixsubprocess

    def blocked(name: str) -> Callable[..., Any]:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            _forbidden_attempts.append(name)
            raise PermissionError(errno.EPERM, f"starting a new process ({name}) is not allowed in the sandbox")
        return refuse

    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "execv", "execve"):
        if hasattr(os, name):
            setattr(os, name, blocked(f"os.{name}"))
    _posixsubprocess.fork_exec = blocked("subprocess")
    if "subprocess" in sys.modules:  # it copied the function at import (torch imports it)
        sys.modules["subprocess"]._fork_exec = _posixsubprocess.fork_exec


def _apply_rlimits(limits: Limits, *, nproc: bool) -> None:
    def cap(kind: int, soft: int, hard: int | None = None) -> None:
        hard = soft if hard is None else hard
        old_soft, old_hard = resource.getrlimit(kind)
        if old_hard != resource.RLIM_INFINITY:  # never try to raise a hard limit
            soft, hard = min(soft, old_hard), min(hard, old_hard)
        resource.setrlimit(kind, (soft, hard))

    # soft == hard: SIGKILL at the limit. (SIGXCPU first would be ignored by a pid namespace's init.)
    cap(resource.RLIMIT_CPU, limits.cpu_seconds)
    cap(resource.RLIMIT_DATA, limits.memory_bytes)
    cap(resource.RLIMIT_AS, _vm_size() + limits.memory_bytes + _AS_SLACK)
    cap(resource.RLIMIT_FSIZE, limits.file_size_bytes)
    cap(resource.RLIMIT_NOFILE, limits.open_files)
    cap(resource.RLIMIT_CORE, 0)
    if nproc:
        cap(resource.RLIMIT_NPROC, limits.processes)


def _vm_size() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _chown_tree(top: str, uid: int) -> None:
    os.chown(top, uid, uid)
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, uid, follow_symlinks=False)


def _drop_privileges(uid: int) -> None:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)  # from root: clears every capability as well


def _resolve(target: str) -> Callable[[dict], Any]:
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"target: expected 'package.module:function', got {target!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _traceback_tail(exc: BaseException, limit: int = 3000) -> str:
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:  # hide our own frames
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, tb)).rstrip()
    return text if len(text) <= limit else "...\n" + text[-limit:]


def _is_memory_error(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, MemoryError) or "can't allocate memory" in text or "Cannot allocate memory" in text


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _run_job_here(req: dict, result_fd: int, prepare: Callable[[], None] = lambda: None) -> None:
    """The job process from set-up to exit. Never returns: the process ends with os._exit, so no
    learner atexit hook or finaliser runs after the result is written."""
    limits = Limits(**req["limits"])
    uid = req.get("uid")
    try:
        prepare()
        workdir = req["workdir"]
        os.chdir(workdir)
        _write_job_files(workdir, req.get("files") or {})
        os.environ.clear()
        os.environ.update(req["env"])
        for p in reversed([workdir, *req["python_path"]]):
            if p not in sys.path:
                sys.path.insert(0, p)  # new entries get fresh finders: no cache to invalidate
        if uid is not None:
            _chown_tree(workdir, uid)
        _apply_rlimits(limits, nproc=uid is not None and limits.processes > 1)
        if uid is not None:
            _drop_privileges(uid)
            # the uid change made us non-dumpable, which hands /proc/self to root; the uid is ours alone
            _prctl(PR_SET_DUMPABLE, 1)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid change, which clears it
        if "torch" in sys.modules:  # a forked child hangs in OpenMP unless it stops using the pool
            sys.modules["torch"].set_num_threads(1)
        faulthandler.enable()
        if limits.processes <= 1 or not req["namespaces"]:
            _forbid_new_processes()
            try:
                _install_seccomp()
            except OSError:
                pass  # the Python guards still apply; the probe reports which
    except BaseException as exc:  # noqa: BLE001 - any failure here is the sandbox's, not the job's
        _write_all(result_fd, json.dumps({"status": "setup_error", "message": f"{type(exc).__name__}: {exc}"}).encode())
        os._exit(70)
    # Bound before learner code runs: patching json.dumps or os._exit cannot reroute the result.
    # (Code in this process can still forge its own return value by other means; the grader's
    # checks, which run alongside it, are what guard a verdict.)
    dumps, write_all, close, exit_now, flush = json.dumps, _write_all, os.close, os._exit, _flush_std
    try:
        value = _resolve(req["target"])(req["payload"])
        try:
            message = dumps({"status": "ok", "value": value})
        except (TypeError, ValueError) as exc:
            message = dumps({"status": "bad_value", "message": f"{type(exc).__name__}: {exc}"})
    except SystemExit as exc:  # sys.exit() inside the job: it ends without returning
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        flush()
        exit_now(code & 0xFF)
    except BaseException as exc:  # noqa: BLE001 - reported to the caller
        message = dumps({"status": "exception", "type": type(exc).__name__,
                         "forbidden": list(_forbidden_attempts), "memory": _is_memory_error(exc),
                         "traceback": _traceback_tail(exc)})
    flush()
    # Close stdout/stderr before the result goes out: the supervisor sees every pipe at EOF and can
    # return without waiting for the kernel to tear down this process (~5 ms for a torch process).
    for fd in (1, 2):
        try:
            close(fd)
        except OSError:  # the job closed it already
            pass
    try:
        write_all(result_fd, message.encode())
        close(result_fd)
    except OSError:  # the job closed the channel: the supervisor reports a missing result
        pass
    exit_now(0)


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - the job may have closed or replaced them
            pass


def _probe_job(payload: dict) -> dict:
    """The job run once to find out which layers apply."""
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    return {"uid": os.getuid(), "seccomp": status.get("Seccomp", "0").strip() == "2"}


def _cold_main(result_fd: int) -> None:
    """Entry point of the cold path's interpreter: the request arrives on stdin."""
    req = json.loads(sys.stdin.buffer.read())
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    _run_job_here(req, result_fd)


# -- the supervisor: watches one job from outside --------------------------------------------------
@dataclass
class _Outcome:
    status: int | None  # raw wait status
    cpu_seconds: float
    output: bytes
    result: bytes
    stopped_for: str | None  # "timeout" | "output_limit" | "memory" | "result_limit"


_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICK = os.sysconf("SC_CLK_TCK")


def _usage_of(pid: int) -> tuple[int, float]:
    """(resident bytes, CPU seconds) of one process, from /proc/<pid>/stat; zeros once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()  # after comm: state ppid pgrp session ...
        return int(fields[21]) * _PAGE, (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, IndexError, ValueError):
        return 0, 0.0


def _usage_of_session(sid: int) -> tuple[int, float]:
    """Summed (resident bytes, CPU seconds) of every process in session `sid`."""
    rss, cpu = 0, 0.0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                if int(fields[3]) == sid:
                    rss += int(fields[21]) * _PAGE
                    cpu += (int(fields[11]) + int(fields[12])) / _TICK
            except (OSError, IndexError, ValueError):
                continue
    return rss, cpu


def _supervise(*, out_fd: int, result_fd: int, limits: Limits, kill: Callable[[], None],
               collect_exit: Callable[[], tuple[int | None, float] | None], wake_fd: int | None,
               usage: Callable[[], tuple[int, float]], poll_every: float, stdin_fd: int | None = None,
               stdin_data: bytes = b"", finish_on_result: bool = False) -> _Outcome:
    """Watch one running job until it ends; stop it as soon as it breaks a limit.

    collect_exit() answers None while the job runs, then (raw wait status or None if it was lost,
    CPU seconds); wake_fd becomes readable when that answer may have changed. usage() is polled
    every poll_every seconds: (resident bytes, CPU seconds) of the job. With
    finish_on_result, a result followed by EOF on both pipes ends the watch at once (the job is
    killed on its way out; its exit status would change nothing)."""
    deadline = time.monotonic() + limits.wall_seconds
    output, result = bytearray(), bytearray()
    output_seen = 0
    stopped_for: str | None = None
    done, status, cpu = False, None, 0.0
    poller = select.poll()
    open_fds = {out_fd, result_fd}
    for fd in open_fds:
        os.set_blocking(fd, False)
        poller.register(fd, select.POLLIN)
    if wake_fd is not None:
        poller.register(wake_fd, select.POLLIN)
    pending = memoryview(stdin_data)
    if stdin_fd is not None:
        os.set_blocking(stdin_fd, False)
        poller.register(stdin_fd, select.POLLOUT)
    next_poll = time.monotonic() + poll_every
    exited_at, cpu_seen = 0.0, 0.0

    def stop(reason: str) -> None:
        nonlocal stopped_for
        if stopped_for is None:
            stopped_for = reason
        kill()

    while True:
        if not done and (answer := collect_exit()) is not None:
            done, (status, cpu), exited_at = True, answer, time.monotonic()
            if wake_fd is not None:
                poller.unregister(wake_fd)
        now = time.monotonic()
        if done and (not open_fds or now > exited_at + 0.5):
            break  # drained, or something the job started still holds a pipe: stop waiting
        if finish_on_result and not open_fds and result and stopped_for is None:
            kill()
            break
        if not done and now >= deadline:
            stop("timeout")
            deadline = now + 3600  # kill once; the next turns only wait for the exit
        wait = 0.05 if done else max(0.0, min(deadline, next_poll) - now)
        for fd, _ in poller.poll(wait * 1000):
            if fd == wake_fd:
                continue  # collect_exit at the top of the loop
            if fd == stdin_fd:
                try:
                    pending = pending[os.write(fd, pending[:65536]):]
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:  # the job died before reading its request
                    pending = memoryview(b"")
                if not pending:
                    poller.unregister(fd)
                    os.close(fd)
                    stdin_fd = None
                continue
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                poller.unregister(fd)
                open_fds.discard(fd)
            elif fd == out_fd:
                output_seen += len(chunk)
                if len(output) < limits.output_bytes:
                    output += chunk[: limits.output_bytes - len(output)]
                if output_seen > limits.output_bytes:
                    stop("output_limit")
            else:
                result += chunk
                if len(result) > _RESULT_CAP:
                    stop("result_limit")
                    del result[_RESULT_CAP:]
        if not done and time.monotonic() >= next_poll:
            rss, cpu_now = usage()
            cpu_seen = max(cpu_seen, cpu_now)
            if rss > limits.memory_bytes:
                stop("memory")
            next_poll = time.monotonic() + poll_every
    if stdin_fd is not None:
        os.close(stdin_fd)
    # the kernel's count where we have it; bwrap's status carries none of its child's, so the poll's
    return _Outcome(status=status, cpu_seconds=max(cpu, cpu_seen), output=bytes(output), result=bytes(result),
                    stopped_for=stopped_for)


def _wait_nohang(pid: int) -> tuple[int, float] | None:
    """Reap our child `pid` if it has ended: (raw wait status, CPU seconds), else None."""
    done, status, usage = os.wait4(pid, os.WNOHANG)
    return (status, usage.ru_utime + usage.ru_stime) if done else None


def _human_bytes(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:g} {unit}" if n % size == 0 else f"{n / size:.1f} {unit}"
    return f"{n} bytes"


_SIGNAL_WORDS = {signal.SIGSEGV: "segmentation fault", signal.SIGBUS: "bus error",
                 signal.SIGILL: "illegal instruction", signal.SIGFPE: "arithmetic error", signal.SIGABRT: "aborted"}


def _classify(outcome: _Outcome, limits: Limits, *,
              signal_from_exit_code: bool = False) -> tuple[bool, Any, str | None, str | None]:
    """(ok, value, error_kind, error_message) from what the supervisor saw. Our own stops come
    first, then the job's result if one came back, then how its process ended."""
    def fail(kind: str, message: str) -> tuple[bool, Any, str, str]:
        return False, None, kind, message

    memory = f"the code used more than {_human_bytes(limits.memory_bytes)} of memory and was stopped"
    stopped = {
        "timeout": ("timeout", f"the code ran longer than {limits.wall_seconds:g} s and was stopped"),
        "output_limit": ("output_limit", f"the code printed more than {_human_bytes(limits.output_bytes)} "
                                         "and was stopped"),
        "result_limit": ("output_limit", f"the job's return value was larger than {_human_bytes(_RESULT_CAP)}"),
        "memory": ("memory", memory),
    }
    if outcome.stopped_for in stopped:
        return fail(*stopped[outcome.stopped_for])
    if outcome.result:
        try:
            message = json.loads(outcome.result)
            status = message["status"]
        except (ValueError, KeyError, TypeError):
            return fail("crashed", "the job's result could not be read: the code overwrote or cut short "
                                   "the channel it comes back on")
        if status == "ok":
            return True, message.get("value"), None, None
        if status == "setup_error":
            return fail("crashed", f"the sandbox could not be set up: {message.get('message')}")
        if status == "bad_value":
            return fail("exception", "the job function returned a value that is not JSON-serialisable: "
                                     f"{message.get('message')}")
        tail = message.get("traceback", "")
        if message.get("memory"):
            return fail("memory", f"{memory}\n{tail}")
        if message.get("forbidden"):
            names = ", ".join(dict.fromkeys(message["forbidden"]))
            return fail("forbidden", f"the code tried to start a new process ({names}), "
                                     f"which is not allowed here\n{tail}")
        return fail("exception", f"the code raised an exception:\n{tail}")
    if outcome.status is None:
        return fail("killed", "the job was stopped: the sandbox's fork server ended unexpectedly")
    sig = os.WTERMSIG(outcome.status) if os.WIFSIGNALED(outcome.status) else None
    code = os.WEXITSTATUS(outcome.status) if os.WIFEXITED(outcome.status) else None
    if signal_from_exit_code and code is not None and 128 < code <= 128 + 64:  # bwrap reports a signal as 128+n
        sig, code = code - 128, None
    if code is not None:
        return fail("exited", f"the code exited (status {code}) before the job function returned, "
                              "e.g. via sys.exit() or os._exit()")
    if sig == signal.SIGSYS:
        return fail("forbidden", "the code tried to start a new process or program, which is not allowed here, "
                                 "and was stopped")
    # RLIMIT_CPU ends a job with SIGKILL; CPU use is known from a poll or a rounded rusage, hence 0.8
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and outcome.cpu_seconds >= 0.8 * limits.cpu_seconds):
        return fail("timeout", f"the code used more than {limits.cpu_seconds} s of CPU time and was stopped")
    if sig == signal.SIGXFSZ:
        return fail("crashed", f"the code wrote a file larger than {_human_bytes(limits.file_size_bytes)} "
                               "and was stopped")
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = f"signal {sig}"
    if sig in _SIGNAL_WORDS:
        return fail("crashed", f"the code crashed ({name}: {_SIGNAL_WORDS[sig]})")
    return fail("killed", f"the code was killed ({name}) before it returned")


def _result(outcome: _Outcome, limits: Limits, isolation: str, started: float, **kw: Any) -> SandboxResult:
    ok, value, kind, message = _classify(outcome, limits, **kw)
    return SandboxResult(ok=ok, value=value, error_kind=kind, error_message=message,
                         stdout=outcome.output.decode("utf-8", "replace"), isolation=isolation,
                         seconds=time.monotonic() - started)


class _JobDir:
    """A fresh temporary directory per job: work/ (the job's cwd and HOME) and root/ (where the warm
    path builds the job's file system). Deleted afterwards, whatever the job left there."""

    def __init__(self, files: dict[str, str] | None):
        for name in files or {}:
            if not isinstance(name, str) or os.path.isabs(name) or os.path.normpath(name).startswith(".."):
                raise ValueError(f"workdir_files: {name!r} is not a relative path inside the work dir")
        self.files = dict(files or {})
        _clean_stale_dirs()
        self.base = os.path.realpath(tempfile.mkdtemp(prefix=f"alignlings-job-{os.getpid()}-"))
        self.work = os.path.join(self.base, "work")
        self.root = os.path.join(self.base, "root")
        os.mkdir(self.work, 0o700)
        os.mkdir(self.root, 0o700)

    def close(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> _JobDir:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_STALE_PATTERN = re.compile(r"^alignlings-(?:job|sandbox)-(\d+)-")
_stale_cleaned = False


def _clean_stale_dirs() -> None:
    """Once per process: remove job and socket dirs left behind by an alignlings process that was
    killed (the pid in their name is gone), so a crashed server does not leak disk."""
    global _stale_cleaned
    if _stale_cleaned:
        return
    _stale_cleaned = True
    top = tempfile.gettempdir()
    try:
        names = os.listdir(top)
    except OSError:
        return
    for name in names:
        m = _STALE_PATTERN.match(name)
        if not m or int(m.group(1)) == os.getpid():
            continue
        try:
            os.kill(int(m.group(1)), 0)
            continue  # its owner still runs
        except ProcessLookupError:
            pass
        except PermissionError:
            continue  # someone else's live process
        path = os.path.join(top, name)
        try:
            if os.stat(path).st_uid == os.geteuid():
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass


def _write_job_files(workdir: str, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = os.path.normpath(os.path.join(workdir, name))
        if not path.startswith(workdir.rstrip("/") + "/"):
            continue  # validated by the caller already
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def _check_call(target: str, payload: dict) -> None:
    """Caller mistakes raise here, before any process starts."""
    module_name, sep, attr = target.partition(":")
    if not (module_name and sep and attr):
        raise ValueError(f"target: expected 'package.module:function', got {target!r}")
    try:
        json.dumps(payload)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"payload: must be JSON-serialisable ({exc})") from None


def _job_request(target: str, payload: dict, limits: Limits, jd: _JobDir, python_path: list[str]) -> dict:
    return {"target": target, "payload": payload, "limits": dataclasses.asdict(limits), "workdir": jd.work,
            "root": jd.root, "python_path": python_path, "env": _job_env(jd.work, python_path), "uid": None,
            "namespaces": False, "files": jd.files}


# -- cold path: a fresh interpreter per job, inside bubblewrap where it works ---------------------------
_COLD_CODE = "import sys; from alignlings.practice.sandbox import _cold_main; _cold_main(int(sys.argv[1]))"
_cold_probes: dict[str, tuple[bool, str, dict]] = {}
_cold_lock = threading.Lock()


def _bwrap_command(jd: _JobDir, python_path: list[str], readonly: Sequence[str], limits: Limits,
                   result_fd: int, bwrap: str) -> list[str]:
    binds, links = _visible_paths(python_path, readonly)
    cmd = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
           "--unshare-cgroup-try", "--hostname", "sandbox", "--dev", "/dev", "--proc", "/proc"]
    if _bwrap_has_size(bwrap):
        cmd += ["--size", str(limits.file_size_bytes)]
    cmd += ["--perms", "1777", "--tmpfs", "/tmp"]  # before the binds: an import path may live under /tmp
    # bwrap would create the directories above each bind with the host's modes (/root: 0700),
    # which the job's uid could not pass through
    parents = {str(a) for p in [*binds, *(link for link, _ in links), jd.work] for a in Path(p).parents}
    for path in sorted(parents - {"/", "/tmp"}, key=lambda p: p.count("/")):
        if not _under(path, binds):
            cmd += ["--perms", "0755", "--dir", path]
    for path in binds:
        cmd += ["--ro-bind", path, path]
    for path in _masks(binds):
        cmd += ["--tmpfs", path, "--remount-ro", path]
    for link, target in links:
        cmd += ["--symlink", target, link]
    if _bwrap_has_size(bwrap):  # the work dir: a tmpfs capped at disk_bytes, not the host's disk
        cmd += ["--perms", "0755", "--size", str(limits.disk_bytes), "--tmpfs", jd.work]
    else:
        cmd += ["--bind", jd.work, jd.work]
    cmd += ["--chdir", jd.work, "--", sys.executable, "-c", _COLD_CODE, str(result_fd)]
    return cmd


_bwrap_size: dict[str, bool] = {}


def _bwrap_has_size(bwrap: str) -> bool:
    if bwrap not in _bwrap_size:
        try:
            text = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            text = ""
        _bwrap_size[bwrap] = "--size" in text
    return _bwrap_size[bwrap]


def _cold_spawn(target: str, payload: dict, limits: Limits, files: dict[str, str] | None,
                python_path: list[str], readonly: Sequence[str], use_bwrap: bool, isolation_text: str) -> SandboxResult:
    started = time.monotonic()
    with _JobDir(files) as jd:
        req = _job_request(target, payload, limits, jd, python_path)
        req["namespaces"] = use_bwrap
        res_r, res_w = os.pipe()
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        if use_bwrap:
            cmd = _bwrap_command(jd, python_path, readonly, limits, res_w, shutil.which("bwrap") or "bwrap")
        else:
            cmd = [sys.executable, "-c", _COLD_CODE, str(res_w)]
        try:
            proc = subprocess.Popen(cmd, stdin=in_r, stdout=out_w, stderr=out_w, env=req["env"], cwd=jd.work,
                                    start_new_session=True, close_fds=True, pass_fds=(res_w,))
        finally:
            for fd in (res_w, in_r, out_w):
                os.close(fd)
        if use_bwrap and os.geteuid() == 0:
            req["uid"] = _JOB_UID_BASE + proc.pid  # the uid is set inside, by the still-privileged runner

        def kill() -> None:
            for fn in (os.killpg, os.kill):  # the group first; bwrap's --die-with-parent does the rest
                try:
                    fn(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

        try:
            pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):  # old kernel: the 0.1 s memory poll wakes us instead
            pidfd = None
        try:
            outcome = _supervise(out_fd=out_r, result_fd=res_r, limits=limits, kill=kill,
                                 collect_exit=lambda: _wait_nohang(proc.pid), wake_fd=pidfd,
                                 usage=lambda: _usage_of_session(proc.pid), poll_every=0.05,
                                 stdin_fd=in_w, stdin_data=json.dumps(req).encode())
        finally:
            if pidfd is not None:
                os.close(pidfd)
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the job's process group
            except ProcessLookupError:
                pass
            if proc.returncode is None:
                try:
                    os.waitpid(proc.pid, 0)
                except ChildProcessError:
                    pass
                proc.returncode = -1  # reaped by us; stops Popen from waiting on a reused pid
            os.close(out_r)
            os.close(res_r)
        return _result(outcome, limits, isolation_text, started, signal_from_exit_code=use_bwrap)


def _cold_probe(mode: str) -> tuple[bool, str, dict]:
    """Whether `mode` ("bubblewrap" or "rlimits") works here and what it applies; run once, cached."""
    with _cold_lock:
        if mode in _cold_probes:
            return _cold_probes[mode]
        if mode == "bubblewrap" and shutil.which("bwrap") is None:
            answer = (False, "bwrap not found on PATH", {})
        else:
            try:
                r = _cold_spawn("alignlings.practice.sandbox:_probe_job", {}, Limits(wall_seconds=60), None,
                                _python_path(), (), mode == "bubblewrap", mode)
            except OSError as exc:
                r = None
                answer = (False, f"{type(exc).__name__}: {exc}", {})
            if r is not None:
                if r.ok:
                    probe = {"uid_dropped": r.value["uid"] != os.geteuid(), "seccomp": r.value["seccomp"]}
                    answer = (True, "", probe)
                else:
                    lines = (r.stdout.strip() or r.error_message or "").strip().splitlines()
                    answer = (False, lines[-1] if lines else r.error_kind or "failed", {})
        _cold_probes[mode] = answer
        return answer


def run_job(target: str, payload: dict, *, limits: Limits = Limits(), workdir_files: dict[str, str] | None = None,
            isolation: str = "auto", extra_pythonpath: Sequence[str] = (),
            readonly_paths: Sequence[str] = ()) -> SandboxResult:
    """Run ``target(payload)`` ("package.module:function") in a fresh Python process and return its
    JSON-serialisable value, or a plain reason why it failed.

    isolation: "auto" (bubblewrap where it works, else rlimits only), "bubblewrap" (raise
    SandboxUnavailable where it does not work; "namespaces", the warm path's word, means the
    same) or "rlimits". ``workdir_files`` (relative path ->
    text) are written into the job's work dir first; ``extra_pythonpath`` directories are importable
    and ``readonly_paths`` readable (everything else of the host is hidden under bubblewrap)."""
    _check_call(target, payload)
    if isolation not in ("auto", "bubblewrap", "namespaces", "rlimits"):
        raise ValueError(f"isolation: expected 'auto', 'bubblewrap' or 'rlimits', got {isolation!r}")
    isolation = "bubblewrap" if isolation == "namespaces" else isolation  # one word for "isolated" on both paths
    mode, text, probe = "rlimits", "", {}
    if isolation in ("auto", "bubblewrap"):
        works, why, probe = _cold_probe("bubblewrap")
        if works:
            mode, text = "bubblewrap", _describe("bubblewrap", _features(True, probe, limits.processes))
        elif isolation == "bubblewrap":
            raise SandboxUnavailable(f"bubblewrap does not work here: {why}")
        else:
            text = f"rlimits only (bubblewrap unavailable: {why})"
    else:
        text = "rlimits only (asked for)"
    if mode == "rlimits":
        _, _, probe = _cold_probe("rlimits")
        text += "; " + ", ".join(_features(False, probe, limits.processes))
    return _cold_spawn(target, payload, limits, workdir_files, _python_path(extra_pythonpath), readonly_paths,
                       mode == "bubblewrap", text)


# -- warm path: a fork server -----------------------------------------------------------------
def _readable(fd: int, timeout: float) -> bool:
    """poll(), not select(): a busy web server's descriptors can be numbered past select's 1024."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


def _send_frame(sock: socket.socket, obj: Any) -> None:
    data = json.dumps(obj).encode()
    sock.sendall(struct.pack(">I", len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _recv_frame(sock: socket.socket) -> Any:
    head = _recv_exact(sock, 4)
    body = head and _recv_exact(sock, struct.unpack(">I", head)[0])
    return None if body is None else json.loads(body)


def _recv_frame_with_fds(sock: socket.socket, max_fds: int) -> tuple[Any, list[int]]:
    """A frame whose first bytes carry descriptors (SCM_RIGHTS): (decoded frame or None at EOF, fds)."""
    head, fds, _, _ = socket.recv_fds(sock, 4, max_fds)
    if head and len(head) < 4:
        head += _recv_exact(sock, 4 - len(head)) or b""
    if len(head) != 4:
        return None, fds
    body = _recv_exact(sock, struct.unpack(">I", head)[0])
    return (None if body is None else json.loads(body)), fds


def _populate_root(root: str, binds: Sequence[str], links: Sequence[tuple[str, str]]) -> None:
    """Fill the tmpfs at `root` with what a job sees: the visible paths bound (read-only once
    sealed), a few device nodes, and mount points for /tmp, /proc and /dev/shm."""
    os.makedirs(root + "/tmp", exist_ok=True)
    os.makedirs(root + "/proc")
    for path in binds:
        os.makedirs(root + path, exist_ok=True)
        _mount(path, root + path, None, MS_BIND | MS_REC)
    for path in _masks(binds):
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
            _populate_root(mount_point, binds, links)
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
    _populate_root(root, binds, links)
    os.makedirs(root + work, exist_ok=True)
    _mount("tmpfs", root + work, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0700,size={limits.disk_bytes}")
    os.chdir(root)
    _pivot_root_here()
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)  # shows only this pid namespace
    _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=1m")
    _seal_root({"/tmp", work, "/dev/shm"})


_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")  # mountinfo writes a space in a path as \040


def _mounts() -> list[tuple[str, int]]:
    """(mount point, flags to keep) for every mount this process sees."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = _OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[4])
            flags = 0
            for opt in fields[5].split(","):
                flags |= _MOUNT_OPTION_FLAGS.get(opt, 0)
            out.append((point, flags))
    return out


def _fork_job(req: dict, out_w: int, res_w: int, namespaces: bool, close_fds: Sequence[int]) -> int:
    """Fork the job from this (preloaded) process. Where `namespaces`, the child is pid 1 of a new
    pid namespace: we unshare one for our next child only, then step back into our own."""
    own_ns = os.open("/proc/self/ns/pid", os.O_RDONLY) if namespaces else -1
    try:
        if namespaces:
            _unshare(CLONE_NEWPID)
        pid = os.fork()
        if pid == 0:  # the job must not keep a handle on our pid namespace
            _become_job(req, out_w, res_w, namespaces, [*close_fds, own_ns] if namespaces else close_fds)
    finally:
        if namespaces:
            if _libc.setns(own_ns, CLONE_NEWPID) != 0:
                raise _oserror("setns back to our own pid namespace")
            os.close(own_ns)
    return pid


def _read_payload(fd: int) -> Any:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return json.loads(b"".join(chunks))


def _become_job(req: dict, out_w: int, res_w: int, namespaces: bool, close_fds: Sequence[int]) -> None:
    """In the forked child: drop what belongs to the server, wire up stdio, then run the job.

    The payload (learner or reference code) is read here, from a pipe only this child holds: the
    fork server never reads one, so no job inherits another job's code or values in its memory."""
    try:
        if req.get("payload_fd") is not None:
            req["payload"] = _read_payload(req.pop("payload_fd"))
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in close_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        os.close(devnull)
        os.close(out_w)
        sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__  # set up by the server
        req["namespaces"] = namespaces
        if namespaces and os.geteuid() == 0:
            # our pid on the host (the /proc mounted so far still shows the host's pids): unique
            # among live processes, so no two running jobs share a uid
            req["uid"] = _JOB_UID_BASE + int(os.readlink("/proc/self"))
        _run_job_here(req, res_w, (lambda: _enter_namespaces(req)) if namespaces else (lambda: None))
    finally:
        os._exit(70)


def _server_probe(namespaces: bool, python_path: list[str]) -> tuple[bool, str, dict]:
    """Run the probe job through the real warm pipeline, before the server takes requests."""
    limits = Limits(wall_seconds=30)
    with _JobDir(None) as jd:
        req = _job_request("alignlings.practice.sandbox:_probe_job", {}, limits, jd, python_path)
        out_r, out_w = os.pipe()
        res_r, res_w = os.pipe()
        try:
            pid = _fork_job(req, out_w, res_w, namespaces, (out_r, res_r))
        except OSError as exc:
            for fd in (out_r, out_w, res_r, res_w):
                os.close(fd)
            return False, str(exc), {}
        os.close(out_w)
        os.close(res_w)
        outcome = _supervise(out_fd=out_r, result_fd=res_r, limits=limits, kill=lambda: os.kill(pid, signal.SIGKILL),
                             collect_exit=lambda: _wait_nohang(pid), wake_fd=None, usage=lambda: (0, 0.0),
                             poll_every=0.01)
        os.close(out_r)
        os.close(res_r)
    ok, value, _, message = _classify(outcome, limits)
    if not ok:
        return False, (message or "probe failed").strip().splitlines()[-1], {}
    return True, "", {"uid_dropped": value["uid"] != os.geteuid(), "seccomp": value["seccomp"]}


def _serve_main() -> None:
    """Entry point of the fork server. One thread, one loop: accept a request (with the job's
    output and result pipes attached), fork the job, hand the caller a pidfd to it, and report its
    exit status when it is reaped. The caller supervises. stdin is a lifeline: at EOF, we end."""
    config = json.loads(sys.stdin.buffer.readline())
    os.umask(0o022)
    ready: dict[str, Any] = {"pid": os.getpid()}
    try:
        for item in config["preload"]:
            module_name, _, fn = item.partition(":")
            module = importlib.import_module(module_name)
            if fn:
                getattr(module, fn)()  # e.g. warm caches once, for every job
    except BaseException as exc:  # noqa: BLE001 - reported to the caller, which raises
        ready["error"] = f"preloading {item!r} failed: {type(exc).__name__}: {exc}"
    global _template
    namespaces, why, probe = False, "asked for rlimits only", {}
    _visible_paths(config["python_path"])  # computed once here, inherited by every job
    if "error" not in ready:
        if config["isolation"] != "rlimits":
            try:
                mount_point = os.path.join(os.path.dirname(config["socket"]), "root")
                _template = _make_template(config["python_path"], mount_point)
            except OSError:
                _template = None
            namespaces, why, probe = _server_probe(True, config["python_path"])
            if not namespaces and _template is not None:  # the template may be what failed
                os.close(_template["fd"])
                _template = None
                namespaces, why, probe = _server_probe(True, config["python_path"])
        if not namespaces:
            _, _, probe = _server_probe(False, config["python_path"])
    ready.update(namespaces=namespaces, why=why, probe=probe)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(config["socket"])
    listener.listen(64)
    wake_r, wake_w = socket.socketpair()
    wake_r.setblocking(False)
    wake_w.setblocking(False)
    signal.set_wakeup_fd(wake_w.fileno())
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler (not SIG_IGN), so wait4 sees statuses
    # Everything imported so far moves to a generation the collector never visits: a collection in a
    # job would otherwise write to every object's header and copy ~all the server's pages (~100 ms).
    gc.freeze()
    sys.stdout.write(json.dumps(ready) + "\n")
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    if "error" in ready:
        os._exit(1)
    for stream in (sys.stdout, sys.stderr):  # how every job's fds 1 and 2 will be written
        stream.reconfigure(line_buffering=True, write_through=True, errors="backslashreplace")
    jobs: dict[int, socket.socket] = {}
    while True:
        readable, _, _ = select.select([listener, wake_r, 0], [], [])
        if 0 in readable:  # EOF on the lifeline: the caller is gone
            for pid in jobs:
                os.kill(pid, signal.SIGKILL)
            os._exit(0)
        if wake_r in readable:
            while True:
                try:
                    if not wake_r.recv(4096):
                        break
                except BlockingIOError:
                    break
            _reap(jobs)
        if listener in readable:
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            own = [listener.fileno(), wake_r.fileno(), wake_w.fileno(), conn.fileno(),
                   *(c.fileno() for c in jobs.values())]
            pid = _start_job(conn, namespaces, own)
            if pid is None:
                conn.close()
            else:
                jobs[pid] = conn


def _start_job(conn: socket.socket, namespaces: bool, close_fds: list[int]) -> int | None:
    """Read one request and fork its job; answer with {"started": pid} and a pidfd to it."""
    conn.settimeout(10)
    fds: list[int] = []
    try:
        req, fds = _recv_frame_with_fds(conn, 3)
        if len(fds) != 3 or not isinstance(req, dict) or req.get("payload") is not None:
            raise ValueError("expected a request without its payload, and three descriptors")
        out_w, res_w, pay_r = fds
        req["payload_fd"] = pay_r
        pid = _fork_job(req, out_w, res_w, namespaces, close_fds)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        try:
            _send_frame(conn, {"error": f"{type(exc).__name__}: {exc}"})
        except OSError:
            pass
        return None
    finally:
        for fd in fds:
            os.close(fd)
    try:
        pidfd = [os.pidfd_open(pid)]
    except OSError:  # kernel before 5.3: the caller signals by pid instead
        pidfd = []
    try:
        body = json.dumps({"started": pid}).encode()
        socket.send_fds(conn, [struct.pack(">I", len(body))], pidfd)
        conn.sendall(body)
    except OSError:
        os.kill(pid, signal.SIGKILL)  # the caller is gone; the reaper still collects the child
    finally:
        for fd in pidfd:
            os.close(fd)
    return pid


def _reap(jobs: dict[int, socket.socket]) -> None:
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = jobs.pop(pid, None)
        if conn is not None:
            try:
                _send_frame(conn, {"exit": status, "cpu": usage.ru_utime + usage.ru_stime})
            except OSError:
                pass
            conn.close()


def _write_and_close(fd: int, data: bytes) -> None:
    try:
        _write_all(fd, data)
    except OSError:  # the job died before reading it all
        pass
    finally:
        os.close(fd)


@dataclass
class _Server:
    proc: subprocess.Popen
    socket_dir: str
    ready: dict | None = None

    @property
    def socket_path(self) -> str:
        return os.path.join(self.socket_dir, "server.sock")


def _stop_server(server: _Server) -> None:
    try:
        if server.proc.stdin:
            server.proc.stdin.close()  # the lifeline: the server exits on its own
        server.proc.wait(timeout=2)
    except (subprocess.TimeoutExpired, OSError):
        server.proc.kill()
        server.proc.wait()
    if server.proc.stdout:
        server.proc.stdout.close()
    shutil.rmtree(server.socket_dir, ignore_errors=True)


class WarmSandbox:
    """Runs jobs in children of a long-lived fork server that has imported ``preload`` once.

    ``preload`` entries are modules ("torch") or "module:function" to import and call once in the
    server (to warm caches every job then shares). isolation: "auto" (namespaces where they work,
    else rlimits only), "namespaces" (raise SandboxUnavailable where they do not; "bubblewrap",
    the cold path's word, means the same) or "rlimits".
    ``run`` is thread-safe; at most ``max_concurrent`` jobs run at once, the rest wait. If the
    server dies, the next ``run`` starts a new one."""

    def __init__(self, preload: Sequence[str] = ("torch",), isolation: str = "auto", *,
                 extra_pythonpath: Sequence[str] = (), max_concurrent: int | None = None,
                 start_timeout: float = 120.0):
        if isolation not in ("auto", "namespaces", "bubblewrap", "rlimits"):
            raise ValueError(f"isolation: expected 'auto', 'namespaces' or 'rlimits', got {isolation!r}")
        isolation = "namespaces" if isolation == "bubblewrap" else isolation  # the cold path's word
        self._preload = list(preload)
        self._isolation_mode = isolation
        self._extra_pythonpath = list(extra_pythonpath)
        self._python_path = _python_path(extra_pythonpath)
        self._start_timeout = start_timeout
        self._slots = threading.BoundedSemaphore(max_concurrent or max(1, os.cpu_count() or 1))
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._closed = False
        with self._lock:
            self._server = self._start()  # the server imports torch while the caller goes on

    # -- the server's life ------------------------------------------------------------------
    def _start(self) -> _Server:
        _clean_stale_dirs()
        socket_dir = tempfile.mkdtemp(prefix=f"alignlings-sandbox-{os.getpid()}-")
        env = _job_env("/", self._python_path)  # the server's environ is what every job inherits
        env["TMPDIR"] = tempfile.gettempdir()
        code = "from alignlings.practice.sandbox import _serve_main; _serve_main()"
        proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                env=env, cwd="/", start_new_session=True, close_fds=True)
        server = _Server(proc, socket_dir)
        config = {"preload": self._preload, "isolation": self._isolation_mode, "python_path": self._python_path,
                  "socket": server.socket_path}
        proc.stdin.write(json.dumps(config).encode() + b"\n")
        proc.stdin.flush()
        weakref.finalize(self, _stop_server, server)
        return server

    def _ready_server(self) -> _Server:
        """The running server, started or restarted as needed; waits until it is ready."""
        with self._lock:
            if self._closed:
                raise RuntimeError("WarmSandbox: used after close()")
            server = self._server
            if server is None or server.proc.poll() is not None:
                if server is not None:
                    _stop_server(server)
                server = self._server = self._start()
            if server.ready is None:
                line = b""
                if _readable(server.proc.stdout.fileno(), self._start_timeout):
                    line = server.proc.stdout.readline()
                if not line:
                    _stop_server(server)
                    self._server = None
                    raise RuntimeError("WarmSandbox: the fork server did not start")
                ready = json.loads(line)
                if "error" in ready:
                    _stop_server(server)
                    self._server = None
                    raise RuntimeError(f"WarmSandbox: {ready['error']}")
                if self._isolation_mode == "namespaces" and not ready["namespaces"]:
                    _stop_server(server)
                    self._server = None
                    raise SandboxUnavailable(f"namespaces do not work here: {ready['why']}")
                server.ready = ready
            return server

    def _discard(self, server: _Server) -> None:
        with self._lock:
            if self._server is server:
                _stop_server(server)
                self._server = None

    @property
    def server_pid(self) -> int:
        """The fork server's pid (starting it if needed)."""
        return self._ready_server().ready["pid"]

    def isolation_for(self, limits: Limits = Limits()) -> str:
        ready = self._ready_server().ready
        if ready["namespaces"]:
            return _describe("namespaces", _features(True, ready["probe"], limits.processes))
        why = ready["why"] if self._isolation_mode == "rlimits" else f"namespaces unavailable: {ready['why']}"
        return f"rlimits only ({why}); " + ", ".join(_features(False, ready["probe"], limits.processes))

    @property
    def isolation(self) -> str:
        return self.isolation_for()

    # -- jobs -------------------------------------------------------------------------------
    def run(self, target: str, payload: dict, *, limits: Limits = Limits(), workdir_files: dict[str, str] | None = None,
            extra_pythonpath: Sequence[str] = (), readonly_paths: Sequence[str] = ()) -> SandboxResult:
        """Run ``target(payload)`` in a child forked from the server; see ``run_job``."""
        _check_call(target, payload)
        started = time.monotonic()
        with self._slots, _JobDir(workdir_files) as jd:
            python_path = (_python_path([*extra_pythonpath, *self._extra_pythonpath]) if extra_pythonpath
                           else self._python_path)
            req = _job_request(target, payload, limits, jd, python_path)
            req["readonly_paths"] = [os.path.realpath(p) for p in readonly_paths]
            for _attempt in range(2):
                server = self._ready_server()
                result = self._run_once(server, req, limits, started)
                if result is not None:
                    return result
                self._discard(server)  # dead or dying: the next attempt starts a new one
            return SandboxResult(False, None, "crashed", "the sandbox's fork server could not start the job",
                                 "", self.isolation_for(limits), time.monotonic() - started)

    def _run_once(self, server: _Server, req: dict, limits: Limits, started: float) -> SandboxResult | None:
        """One job through `server`; None if the server could not start it (the caller retries)."""
        isolation = self.isolation_for(limits)
        out_r, out_w = os.pipe()
        res_r, res_w = os.pipe()
        pay_r, pay_w = os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        pidfd = None
        writer = None
        try:
            try:
                conn.settimeout(30)
                conn.connect(server.socket_path)
                body = json.dumps({**req, "payload": None}).encode()
                socket.send_fds(conn, [struct.pack(">I", len(body))], [out_w, res_w, pay_r])
                conn.sendall(body)
            except OSError:
                os.close(pay_w)
                return None
            finally:
                os.close(out_w)
                os.close(res_w)
                os.close(pay_r)
            writer = threading.Thread(target=_write_and_close, args=(pay_w, json.dumps(req["payload"]).encode()),
                                      daemon=True)
            writer.start()
            try:
                frame, fds = _recv_frame_with_fds(conn, 1)
                pidfd = fds[0] if fds else None
            except (OSError, ValueError):
                frame = None
            if not frame:
                return None
            if "error" in frame:
                return SandboxResult(False, None, "crashed", f"the sandbox could not start the job: {frame['error']}",
                                     "", isolation, time.monotonic() - started)
            pid = frame["started"]

            collect_exit_answer: tuple[int | None, float] | None = None

            def kill() -> None:
                try:  # pid 1 of its namespace: takes all of it along
                    if pidfd is not None:
                        signal.pidfd_send_signal(pidfd, signal.SIGKILL)  # cannot hit a reused pid
                    elif collect_exit_answer is None:
                        os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

            def collect_exit() -> tuple[int | None, float] | None:
                nonlocal collect_exit_answer
                if not _readable(conn.fileno(), 0):
                    return None
                try:
                    conn.settimeout(5)
                    message = _recv_frame(conn)
                except (OSError, ValueError):
                    message = None
                # None: the server died, and the job with it (its parent-death signal)
                collect_exit_answer = (None, 0.0) if message is None else (message["exit"], message["cpu"])
                return collect_exit_answer

            usage = (lambda: _usage_of(pid)) if limits.processes <= 1 else (lambda: _usage_of_session(pid))
            try:
                outcome = _supervise(out_fd=out_r, result_fd=res_r, limits=limits, kill=kill,
                                     collect_exit=collect_exit, wake_fd=conn.fileno(), usage=usage, poll_every=0.025,
                                     finish_on_result=True)
            finally:
                kill()  # no-op when it has ended; stops it if we are unwinding from an error
            return _result(outcome, limits, isolation, started)
        finally:
            conn.close()
            os.close(out_r)
            os.close(res_r)
            if pidfd is not None:
                os.close(pidfd)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._server is not None:
                _stop_server(self._server)
                self._server = None

    def __enter__(self) -> WarmSandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
