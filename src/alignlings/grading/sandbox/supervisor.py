"""The supervisor: watches one job from outside (time, output, memory), classifies how it ended,
and the per-job directory."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import select
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable

from alignlings.grading.sandbox.limits import _RESULT_CAP, STOP, Limits, SandboxResult
from alignlings.grading.sandbox.mounts import _job_env


@dataclass
class _Outcome:
    status: int | None  # raw wait status
    cpu_seconds: float
    output: bytes
    result: bytes
    stopped_for: str | None  # "timeout" | "output_limit" | "memory" | "result_limit" | "stopped"


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
    asked_to_stop = STOP.get()
    if asked_to_stop is not None:  # seen within a tenth of a second
        poll_every = min(poll_every, 0.1)
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
        if not done and asked_to_stop is not None and asked_to_stop.is_set() and stopped_for is None:
            stop("stopped")
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


_SIGNAL_WORDS: dict[int, str] = {signal.SIGSEGV: "segmentation fault", signal.SIGBUS: "bus error",
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
        "stopped": ("stopped", "the check was stopped before it finished"),
    }
    if outcome.stopped_for in stopped:
        return fail(*stopped[outcome.stopped_for])
    if outcome.result:
        message, why = _decode_result(outcome.result)
        if message is None:
            return fail("crashed", f"the job's result could not be read ({why}): the code overwrote or cut "
                                   "short the channel it comes back on")
        status = message["status"]
        if status == "ok":
            return True, message.get("value"), None, None
        if status == "setup_error":
            return fail("crashed", f"the sandbox could not be set up: {_text(message.get('message'))}")
        if status == "bad_value":
            return fail("exception", "the job function returned a value that is not JSON-serialisable: "
                                     f"{_text(message.get('message'))}")
        tail = _text(message.get("traceback", ""))
        if message.get("memory") is True:
            return fail("memory", f"{memory}\n{tail}")
        forbidden = message.get("forbidden")
        if forbidden:
            names = ", ".join(dict.fromkeys(_text(n, 80) for n in (forbidden if isinstance(forbidden, list) else [forbidden])))
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
        name = signal.Signals(sig).name  # type: ignore[arg-type]  # None (neither): the ValueError below
    except ValueError:
        name = f"signal {sig}"
    if sig in _SIGNAL_WORDS:
        return fail("crashed", f"the code crashed ({name}: {_SIGNAL_WORDS[sig]})")
    return fail("killed", f"the code was killed ({name}) before it returned")


_MAX_DEPTH = 100


"""Deepest nesting of lists and objects a job's result may have. The job writes the channel the
result comes back on, so learner code can write anything there: 200,000 nested brackets would make
``json.loads`` (or whatever walks the value later) raise RecursionError in the caller."""


_STATUSES = ("ok", "setup_error", "bad_value", "exception")


def _decode_result(raw: bytes) -> tuple[dict | None, str]:
    """(the job's decoded message, "") or (None, why it is not one). Never raises: every decoding
    error (bad UTF-8, bad JSON, RecursionError, a value nested past ``_MAX_DEPTH``, the wrong shape)
    is a reason, since the bytes come from the job."""
    try:
        message = json.loads(raw)
    except RecursionError:
        return None, "nested too deeply"
    except (ValueError, TypeError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None, f"not JSON: {type(exc).__name__}"
    except Exception as exc:  # noqa: BLE001 - the job's bytes must never become our traceback
        return None, f"{type(exc).__name__}"
    if not isinstance(message, dict) or message.get("status") not in _STATUSES:
        return None, "not a result message"
    if _depth_exceeds(message, _MAX_DEPTH):
        return None, f"nested more than {_MAX_DEPTH} levels deep"
    return message, ""


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether lists/dicts in `value` nest deeper than `limit` (iterative: no recursion to exhaust)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return False


def _text(value: Any, limit: int = 4000) -> str:
    """A field of the job's message as text, whatever type the job wrote there."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


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
