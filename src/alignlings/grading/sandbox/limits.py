"""What one job may use (``Limits``) and what it gives back (``SandboxResult``)."""

from __future__ import annotations

import os
import threading
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

ISOLATION_MODES = ("auto", "namespaces", "rlimits")
"""The one vocabulary of both paths: "namespaces" (a private root, no network, own pid namespace,
own uid; made by bubblewrap on the cold path and by the fork server on the warm one, raising
SandboxUnavailable where they cannot be made), "rlimits" (resource limits only) or "auto" (namespaces
where they work, else rlimits only, which the result's isolation text says)."""

ERROR_KINDS = ("timeout", "memory", "output_limit", "crashed", "killed", "exited", "exception", "forbidden",
               "stopped")


"""Every value ``SandboxResult.error_kind`` takes besides None."""


STOP: ContextVar[threading.Event | None] = ContextVar("alignlings_sandbox_stop", default=None)
"""A job started while this holds an event is stopped as soon as the event is set (error_kind
"stopped"): the web page's "Stop", a file saved again under ``alignlings watch``. Set it in the
thread that runs the job (``Grader`` carries it into its worker threads)."""


_JOB_UID_BASE = 1_500_000_000


"""Jobs run as uid/gid ``_JOB_UID_BASE + pid`` (the job's host pid on the warm path, its bwrap's on
the cold path: live pids are unique, so concurrent jobs never share a uid); far above the ranges
distributions and subuid maps hand out."""


_JOB_UID_COUNT = 1 << 22


"""How many job uids there are: pids never exceed 2**22 (the kernel's largest ``pid_max``)."""


_RESULT_CAP = 32 * 2**20  # a job's JSON return value; more is reported as output_limit


_AS_SLACK = 2 * 2**30  # address space beyond memory_bytes: code mappings and reservations, not memory


_SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


_DEVICES = ("null", "zero", "full", "random", "urandom")


def default_tasks() -> int:
    """The default task limit of a job: ``max(64, 2 * cores + 16)``."""
    return max(64, 2 * (os.cpu_count() or 1) + 16)


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
    tasks: int = field(default_factory=lambda: default_tasks())
    """Threads the job may run, its processes' threads all counted together (at least
    ``processes``): RLIMIT_NPROC, which the kernel counts per uid and user namespace, so it applies
    where the job has one of its own (its own uid when we are root, its own user namespace
    otherwise). Past it, starting a thread fails (Python: RuntimeError "can't start new thread").
    Default: ``default_tasks()``, 64 or, on machines with many cores, room for a library pool of
    one thread per core (torch's inter-op pool, a tokenizer's) twice over."""

    def __post_init__(self) -> None:
        for name in ("wall_seconds", "cpu_seconds", "memory_bytes", "file_size_bytes", "open_files",
                     "disk_bytes", "processes", "output_bytes", "tasks"):
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
    """Which layers applied, e.g. "namespaces via bubblewrap (read-only file system except the work
    dir, ...)" or "namespaces (...)" (the warm path), or "rlimits only (...)"."""
    seconds: float
    """Wall time of the whole call, sandbox setup included."""


class SandboxUnavailable(RuntimeError):
    """The isolation asked for by name cannot be set up on this machine."""
