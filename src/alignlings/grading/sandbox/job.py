"""What runs inside the job process, from set-up (rlimits, uid, seccomp) to its one result."""

from __future__ import annotations

import errno
import faulthandler
import importlib
import json
import os
import resource
import signal
import sys
import traceback
from typing import Any, Callable

from alignlings.grading.sandbox.limits import _AS_SLACK, Limits
from alignlings.grading.sandbox.linux import (
    PR_SET_DUMPABLE,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    _drop_capabilities,
    _effective_caps,
    _enter_user_namespace,
    _in_initial_user_namespace,
    _install_seccomp,
    _join_cgroup,
    _prctl,
)

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
        sys.modules["subprocess"]._fork_exec = _posixsubprocess.fork_exec  # type: ignore[attr-defined]


def _apply_rlimits(limits: Limits, *, nproc: int | None) -> None:
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
    if nproc is not None:
        cap(resource.RLIMIT_NPROC, nproc)


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
        if req.get("pids_cgroup"):  # before anything else: from here every thread of ours counts there
            _join_cgroup(req["pids_cgroup"])
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
        # RLIMIT_NPROC counts tasks per uid and user namespace: the job needs one of its own for the
        # limit to count only its tasks. As root it gets a uid; under bubblewrap as a user, the user
        # namespace bubblewrap made for it. The warm server's user namespace is shared by every job,
        # and without namespaces we share the caller's: then one of its own, made before the limit
        # is set (the count above it, all jobs together, keeps the server's limit).
        userns = False
        if req.get("userns") or (uid is None and not req["namespaces"] and os.geteuid() != 0):
            try:
                _enter_user_namespace()
                userns = True
            except OSError:
                if req.get("userns"):
                    raise
        own_count = uid is not None or userns or (req["namespaces"] and not _in_initial_user_namespace())
        tasks = max(limits.tasks, limits.processes) + req.get("extra_tasks", 0)
        _apply_rlimits(limits, nproc=tasks if own_count else None)
        if uid is not None:
            _drop_privileges(uid)
            # the uid change made us non-dumpable, which hands /proc/self to root; the uid is ours alone
            _prctl(PR_SET_DUMPABLE, 1)
        elif userns or (req["namespaces"] and _effective_caps()):
            _drop_capabilities()  # what made our namespaces: no use to the job, and it could undo them
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid change, which clears it
        if "torch" in sys.modules:  # a forked child hangs in OpenMP unless it stops using the pool
            sys.modules["torch"].set_num_threads(1)
        faulthandler.enable()
        _prctl(PR_SET_NO_NEW_PRIVS, 1)  # no program it may start gains privileges (setuid bits)
        if limits.processes <= 1 or not req["namespaces"]:
            _forbid_new_processes()
            try:
                _install_seccomp()
            except OSError:
                pass  # the Python guards still apply; the probe reports which
        else:  # processes in its own namespaces: still no ptrace or reading another's memory
            try:
                _install_seccomp(new_processes=True)
            except OSError:
                pass  # the probe reports it (seccomp false)
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
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    with open("/proc/self/mountinfo") as f:  # 2 on the warm path's fast way: ours over the template's
        proc_mounts = sum(1 for line in f if " - proc " in line)
    return {"uid": os.getuid(), "seccomp": status.get("Seccomp", "0").strip() == "2",
            "userns": not _in_initial_user_namespace(), "caps": int(status.get("CapEff", "0").strip(), 16) != 0,
            "nproc": -1 if nproc == resource.RLIM_INFINITY else nproc, "proc_mounts": proc_mounts}


def _cold_main(result_fd: int) -> None:
    """Entry point of the cold path's interpreter: the request arrives on stdin."""
    req = json.loads(sys.stdin.buffer.read())
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    _run_job_here(req, result_fd)


def _write_job_files(workdir: str, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = os.path.normpath(os.path.join(workdir, name))
        if not path.startswith(workdir.rstrip("/") + "/"):
            continue  # validated by the caller already
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
