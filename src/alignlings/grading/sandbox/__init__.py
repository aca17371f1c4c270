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
   concurrent jobs never share one): it cannot signal our processes or read root's files, and
   RLIMIT_NPROC binds it (never the host's uid 0). Without CAP_SYS_ADMIN, through a user namespace
   that maps those uids (CAP_SETUID); without CAP_SETUID either, a pids cgroup per job instead.
4. rlimits: CPU time, data size and address space, file size, open files, core dumps.
5. No new processes: Python-level guards raise ``PermissionError`` with a plain message, and a
   seccomp filter (the kernel) kills the job if it forks or execs some other way (ctypes).

Everything is Linux-only; where a layer cannot be set up the run falls back and says so.

The package is split along the process boundary:

- ``limits``: what a job may use and what it gives back (``Limits``, ``SandboxResult``);
- ``linux``: namespaces, mounts, prctl and the seccomp filter, through ctypes;
- ``mounts``: what a job sees (the job tree, visible and hidden paths, environment, mount namespace);
- ``job``: what runs inside the job process;
- ``supervisor``: what watches a job from outside, and its work dir;
- ``cold``: a fresh interpreter per job under bubblewrap (``run_job``);
- ``forkserver``: the preloaded process that forks jobs;
- ``warm``: the client that talks to a fork server (``WarmSandbox``).
"""

from __future__ import annotations

from alignlings.grading.sandbox.cold import run_job
from alignlings.grading.sandbox.limits import (
    ERROR_KINDS,
    ISOLATION_MODES,
    STOP,
    Limits,
    SandboxResult,
    SandboxUnavailable,
)
from alignlings.grading.sandbox.mounts import JOB_MODULES, job_tree
from alignlings.grading.sandbox.supervisor import _classify, _Outcome
from alignlings.grading.sandbox.warm import MISSING_ISOLATION, WarmSandbox, is_isolated, warm_isolation

__all__ = ["ERROR_KINDS", "ISOLATION_MODES", "JOB_MODULES", "MISSING_ISOLATION", "STOP", "Limits", "SandboxResult",
           "SandboxUnavailable", "WarmSandbox", "is_isolated", "job_tree", "run_job", "warm_isolation", "_classify", "_Outcome"]
