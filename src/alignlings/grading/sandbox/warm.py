"""The warm client: ``WarmSandbox`` talks to a fork server and supervises the jobs it starts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Sequence

from alignlings.grading.sandbox.forkserver import _readable, _recv_frame, _recv_frame_with_fds
from alignlings.grading.sandbox.job import _write_all
from alignlings.grading.sandbox.limits import ISOLATION_MODES, Limits, SandboxResult, SandboxUnavailable
from alignlings.grading.sandbox.mounts import NO_TASK_LIMIT, _describe, _features, _job_env, _python_path
from alignlings.grading.sandbox.supervisor import (
    _check_call,
    _clean_stale_dirs,
    _job_request,
    _JobDir,
    _result,
    _supervise,
    _usage_of,
    _usage_of_session,
)


def _write_and_close(fd: int, data: bytes) -> None:
    try:
        _write_all(fd, data)
    except OSError:  # the job died before reading it all
        pass
    finally:
        os.close(fd)


def _pid_of_pidfd(pidfd: int) -> int | None:
    """The pid, in our pid namespace, of the process a pidfd refers to (None once it is gone)."""
    try:
        with open(f"/proc/self/fdinfo/{pidfd}") as f:
            for line in f:
                if line.startswith("Pid:"):
                    pid = int(line.split()[1])
                    return pid if pid > 0 else None
    except (OSError, ValueError):
        pass
    return None


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
    server (to warm caches every job then shares). isolation: one of ``ISOLATION_MODES`` (the fork
    server makes the namespaces itself).
    ``run`` is thread-safe; at most ``max_concurrent`` jobs run at once, the rest wait. If the
    server dies, the next ``run`` starts a new one."""

    def __init__(self, preload: Sequence[str] = ("torch",), isolation: str = "auto", *,
                 extra_pythonpath: Sequence[str] = (), max_concurrent: int | None = None,
                 start_timeout: float = 120.0):
        if isolation not in ISOLATION_MODES:
            raise ValueError(f"isolation: expected one of {ISOLATION_MODES}, got {isolation!r}")
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
        code = "from alignlings.grading.sandbox.forkserver import _serve_main; _serve_main()"
        proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                env=env, cwd="/", start_new_session=True, close_fds=True)
        server = _Server(proc, socket_dir)
        config = {"preload": self._preload, "isolation": self._isolation_mode, "python_path": self._python_path,
                  "socket": server.socket_path}
        assert proc.stdin is not None and proc.stdout is not None  # both PIPE
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
                assert server.proc.stdout is not None
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
        ready = self._ready_server().ready
        assert ready is not None  # _ready_server waits for it
        return ready["pid"]

    def isolation_for(self, limits: Limits = Limits()) -> str:
        ready = self._ready_server().ready
        assert ready is not None  # _ready_server waits for it
        if ready["namespaces"]:
            return _describe("namespaces", _features(True, ready["probe"], limits.processes, limits.tasks))
        why = ready["why"] if self._isolation_mode == "rlimits" else f"namespaces unavailable: {ready['why']}"
        return f"rlimits only ({why}); " + ", ".join(_features(False, ready["probe"], limits.processes, limits.tasks))

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
            if pidfd is not None:  # the server's pid may be of its own pid namespace; the pidfd knows ours
                pid = _pid_of_pidfd(pidfd) or pid

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


def warm_isolation(timeout: float = 60.0) -> tuple[bool, str]:
    """Whether the warm path's jobs get namespaces on this machine, as this user: (True, the
    isolation text) or (False, why not). Starts a fork server without preloads (well under a second)
    and runs the same probe a real one does, so the answer is what the web app's grader will get."""
    try:
        with WarmSandbox(preload=[], isolation="auto", start_timeout=timeout) as sandbox:
            text = sandbox.isolation
    except (RuntimeError, OSError) as exc:
        return False, f"the fork server did not start ({exc})"
    return is_isolated(text), text


def is_isolated(isolation: str) -> bool:
    """Whether a job with this isolation text (``SandboxResult.isolation``) is isolated: in
    namespaces, and under a task limit. Root without CAP_SYS_ADMIN *and* without CAP_SETUID gets
    namespaces (through a user namespace) whose jobs stay the host's uid 0, which the kernel never
    holds to RLIMIT_NPROC: one job could start threads until the machine has none left."""
    return isolation.startswith("namespaces") and NO_TASK_LIMIT not in isolation


MISSING_ISOLATION = ("grading needs Linux namespaces to keep learner code away from this server's files, "
                     "token and processes: run as root with CAP_SYS_ADMIN, or where unprivileged user "
                     "namespaces are allowed (sysctl kernel.unprivileged_userns_clone=1 and "
                     "user.max_user_namespaces > 0; in a container, a seccomp profile and AppArmor policy "
                     "that let unshare(CLONE_NEWUSER) through); and, as root without CAP_SYS_ADMIN, "
                     "CAP_SETUID and CAP_SETGID, so that jobs run as uids of their own that the task "
                     "limit (RLIMIT_NPROC) binds")
"""What to fix when ``warm_isolation`` answers False (``serve`` and ``watch`` say it)."""
