"""The fork server: a preloaded process that forks each job into its namespaces and reaps it."""

from __future__ import annotations

import gc
import importlib
import json
import os
import select
import signal
import socket
import struct
import sys
from typing import Any, Sequence

from alignlings.grading.sandbox import linux, mounts, supervisor
from alignlings.grading.sandbox.job import _run_job_here
from alignlings.grading.sandbox.limits import _JOB_UID_BASE, _JOB_UID_COUNT, Limits
from alignlings.grading.sandbox.linux import (
    CLONE_NEWPID,
    PR_SET_PDEATHSIG,
    _enter_user_namespace,
    _enter_user_namespace_with_ids,
    _fork_into_new_pid_namespace,
    _host_root,
    _is_host_uid_0,
    _new_pids_cgroup,
    _pids_cgroup_parent,
    _prctl,
    _remove_pids_cgroups,
    _unshare,
)
from alignlings.grading.sandbox.mounts import _enter_namespaces, _make_template, _visible_paths
from alignlings.grading.sandbox.supervisor import _classify, _job_request, _JobDir, _supervise, _wait_nohang


_server_userns = False


"""Whether this fork server made its namespaces from a user namespace of its own (not root)."""


_job_uids = False


"""Whether jobs run as uids of their own (``_JOB_UID_BASE`` + their host pid): as the host's root
with CAP_SYS_ADMIN, or as root without it whose user namespace maps those uids (CAP_SETUID)."""


_pids_parent: str | None = None


"""Root whose jobs stay uid 0 (no CAP_SETUID): the pids cgroup under which each job gets its own
(``linux._pids_cgroup_parent``), the task limit RLIMIT_NPROC cannot be for uid 0; None if none."""


_job_cgroups: dict[int, str] = {}


"""Each running job's pids cgroup, removed when the job is reaped."""


SPARES = 2
"""Processes forked ahead of their job and waiting for it (``_Spares``): forking this server (torch
and its caches, ~300 MB of pages to map again) takes 5-25 ms, which then falls between checks."""


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


def _fork_job(req: dict, out_w: int, res_w: int, namespaces: bool, close_fds: Sequence[int],
              spares: _Spares | None = None) -> int:
    """Fork the job from this (preloaded) process, or hand it to a spare forked earlier (the same
    process, forked before any request: it holds nothing of another job). Where `namespaces`, the
    child is pid 1 of a new pid namespace."""
    cgroup = None
    if _pids_parent is not None and not (namespaces and _job_uids):
        limits = req["limits"]
        cgroup = req["pids_cgroup"] = _new_pids_cgroup(_pids_parent, max(limits["tasks"], limits["processes"]))
    if spares is not None:  # a job forked here must not keep a way to send a spare its request
        close_fds = [*close_fds, *spares.fds()]
    try:
        spare = spares.hand_over(req, [out_w, res_w, req["payload_fd"]]) if spares is not None else None
        if spare is not None:
            pid = spare
        elif namespaces:
            pid = _fork_into_new_pid_namespace(lambda: _become_job(req, out_w, res_w, True, close_fds))
        else:
            pid = os.fork()
            if pid == 0:
                _become_job(req, out_w, res_w, False, close_fds)
    except OSError:
        if cgroup is not None and _pids_parent is not None:
            _remove_pids_cgroups(_pids_parent, only=cgroup)
        raise
    if cgroup is not None:
        _job_cgroups[pid] = cgroup
    return pid


class _Spares:
    """Up to ``SPARES`` children forked ahead of their job (into a pid namespace of their own where
    jobs get one), each waiting on a socket of its own for its request and the job's descriptors;
    then it becomes the job exactly as a child forked for it would (``_become_job``). Forked only
    from this server, before the request they will serve and after the preload: the same state a
    job forked on request starts from."""

    def __init__(self, namespaces: bool):
        self.namespaces = namespaces
        self.waiting: dict[int, socket.socket] = {}  # pid -> our end of its socket
        self.failed = False  # a fork failed (a process limit, say): jobs are forked on request only

    def fds(self) -> list[int]:
        return [s.fileno() for s in self.waiting.values()]

    def short(self) -> bool:
        return not self.failed and len(self.waiting) < SPARES

    def fill(self, close_fds: Sequence[int]) -> None:
        """Fork one more spare."""
        if self.short():
            ours, theirs = socket.socketpair()
            close = [*close_fds, ours.fileno(), *(s.fileno() for s in self.waiting.values())]

            def child(theirs: socket.socket = theirs, close: list[int] = close) -> None:
                _wait_for_job(theirs, close, self.namespaces)

            try:
                if self.namespaces:
                    pid = _fork_into_new_pid_namespace(child)
                else:
                    pid = os.fork()
                    if pid == 0:
                        try:
                            child()
                        finally:
                            os._exit(70)
            except OSError:
                ours.close()
                theirs.close()
                self.failed = True
                return
            theirs.close()
            self.waiting[pid] = ours

    def hand_over(self, req: dict, fds: list[int]) -> int | None:
        """Send ``req`` (its payload still in its pipe) and the job's descriptors to a waiting spare;
        its pid, or None where none took it."""
        while self.waiting:
            pid = next(iter(self.waiting))  # the oldest: the likeliest to be waiting already
            sock = self.waiting.pop(pid)
            try:
                body = json.dumps(req).encode()
                socket.send_fds(sock, [struct.pack(">I", len(body))], fds)
                sock.sendall(body)
                return pid
            except OSError:  # it died waiting: the reaper collects it
                continue
            finally:
                sock.close()
        return None

    def gone(self, pid: int) -> bool:
        sock = self.waiting.pop(pid, None)
        if sock is not None:
            sock.close()
        return sock is not None

    def stop(self) -> None:
        for pid, sock in self.waiting.items():
            sock.close()  # EOF: it exits; killed as well, for a spare still starting
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.waiting.clear()


def _wait_for_job(sock: socket.socket, close_fds: Sequence[int], namespaces: bool) -> None:
    """A spare: drop the server's descriptors and signal wiring, wait for one request, become its job.
    Ends at once if the server goes (EOF, or its death's signal)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    for fd in close_fds:
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        req, fds = _recv_frame_with_fds(sock, 3)
    except (OSError, ValueError):
        os._exit(0)
    if not isinstance(req, dict) or len(fds) != 3:
        os._exit(0)
    out_w, res_w, pay_r = fds
    req["payload_fd"] = pay_r
    _become_job(req, out_w, res_w, namespaces, [sock.fileno()])


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
        if namespaces and _job_uids:
            # our pid on the host (the /proc mounted so far still shows the host's pids): unique
            # among live processes, so no two running jobs share a uid
            req["uid"] = _JOB_UID_BASE + int(os.readlink("/proc/self"))
        # a user namespace of its own where it has no uid of its own (RLIMIT_NPROC counts per both)
        req["userns"] = namespaces and _server_userns and req.get("uid") is None
        _run_job_here(req, res_w, (lambda: _enter_namespaces(req)) if namespaces else (lambda: None))
    finally:
        os._exit(70)


def _become_init_of_own_pid_namespace() -> None:
    """Go on as pid 1 of a new pid namespace, which our user namespace owns: only over such a pid
    namespace do we hold the CAP_SYS_ADMIN that stepping back into it after forking each job takes
    (``_fork_into_new_pid_namespace``). This process stays behind, waits, and passes on the exit
    status; its death kills ours (and so every job) like the caller's loss of us would."""
    _unshare(CLONE_NEWPID)
    pid = os.fork()
    if pid:
        os.close(0)  # the lifeline is the server's to watch
        _, status = os.waitpid(pid, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF if os.WIFEXITED(status) else 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _server_probe(namespaces: bool, python_path: list[str]) -> tuple[bool, str, dict]:
    """Run the probe job through the real warm pipeline, before the server takes requests."""
    limits = Limits(wall_seconds=30)
    with _JobDir(None) as jd:
        req = _job_request("alignlings.grading.sandbox.job:_probe_job", {}, limits, jd, python_path)
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
        cgroup = _job_cgroups.pop(pid, None)
        if cgroup is not None and _pids_parent is not None:
            _remove_pids_cgroups(_pids_parent, only=cgroup)
    ok, value, _, message = _classify(outcome, limits)
    if not ok:
        return False, (message or "probe failed").strip().splitlines()[-1], {}
    return True, "", {"uid_dropped": value["uid"] != os.geteuid(), "seccomp": value["seccomp"],
                      "userns": value["userns"], "caps": value["caps"], "nproc": value["nproc"]}


def _serve_main() -> None:
    """Entry point of the fork server. One thread, one loop: accept a request (with the job's
    output and result pipes attached), fork the job, hand the caller a pidfd to it, and report its
    exit status when it is reaped. The caller supervises. stdin is a lifeline: at EOF, we end."""
    global _server_userns, _job_uids, _pids_parent
    # the caller cleans up after dead processes; we may live in a pid namespace of our own, where
    # every caller's pid looks dead
    supervisor._stale_cleaned = True
    config = json.loads(sys.stdin.buffer.readline())
    os.umask(0o022)
    ready: dict[str, Any] = {"pid": os.getpid()}
    userns_why = ""
    host_root = _is_host_uid_0()  # the uid RLIMIT_NPROC never binds (not root of a rootless container)
    _job_uids = _host_root()
    if config["isolation"] != "rlimits" and not _host_root():
        # not the host's root with CAP_SYS_ADMIN (a user; root in a default container, or in a
        # rootless one): make the namespaces from a user namespace of our own. Now, while we have
        # one thread (torch starts more). As root, that namespace also maps the job uids where
        # CAP_SETUID allows: the kernel never holds the host's uid 0 to RLIMIT_NPROC, so jobs
        # that stayed uid 0 could start threads without end. We stay uid 0 (owner of root's
        # 0700 folders, which the job roots bind from); each job changes to its uid.
        try:
            if host_root:
                _job_uids = _enter_user_namespace_with_ids(_JOB_UID_BASE, _JOB_UID_COUNT)
            else:
                _enter_user_namespace()
            _server_userns = True
            _become_init_of_own_pid_namespace()
        except OSError as exc:
            userns_why = f"no user namespace ({exc.strerror or exc})"
    # our pid as the caller sees it (in our own pid namespace we may be 1); /proc is still the host's
    ready["pid"] = int(os.readlink("/proc/self"))
    if host_root and (not _job_uids or config["isolation"] == "rlimits"):
        # jobs stay the host's uid 0, which RLIMIT_NPROC never binds
        _pids_parent = _pids_cgroup_parent(ready["pid"])
    try:
        for item in config["preload"]:
            module_name, _, fn = item.partition(":")
            module = importlib.import_module(module_name)
            if fn:
                getattr(module, fn)()  # e.g. warm caches once, for every job
    except BaseException as exc:  # noqa: BLE001 - reported to the caller, which raises
        ready["error"] = f"preloading {item!r} failed: {type(exc).__name__}: {exc}"
    probe: dict[str, Any]
    namespaces, why, probe = False, "asked for rlimits only", {}
    _visible_paths(config["python_path"])  # computed once here, inherited by every job
    for new_processes in (False, True):  # the jobs' seccomp filters, likewise
        if linux._ARCH is not None:
            linux._PROGRAMS[new_processes] = linux._seccomp_program(linux._ARCH, new_processes=new_processes)
    if "error" not in ready:
        if config["isolation"] != "rlimits" and userns_why:
            namespaces, why = False, userns_why  # not the host's root, and no user namespace either
        elif config["isolation"] != "rlimits":
            try:
                mount_point = os.path.join(os.path.dirname(config["socket"]), "root")
                mounts._template = _make_template(config["python_path"], mount_point)
            except OSError:
                mounts._template = None
            namespaces, why, probe = _server_probe(True, config["python_path"])
            if not namespaces and mounts._template is not None:  # the template may be what failed
                os.close(mounts._template["fd"])
                mounts._template = None
                namespaces, why, probe = _server_probe(True, config["python_path"])
        if not namespaces:
            _, _, probe = _server_probe(False, config["python_path"])
        if host_root and probe and not (namespaces and _job_uids):
            # root without CAP_SYS_ADMIN nor CAP_SETUID (or without namespaces): jobs stay the host's
            # uid 0, which RLIMIT_NPROC never binds; a pids cgroup each, where one can be made
            probe["nproc"] = -1
            probe["pids_cgroup"] = _pids_parent is not None
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
        stream.reconfigure(line_buffering=True, write_through=True, errors="backslashreplace")  # type: ignore[union-attr]
    jobs: dict[int, socket.socket] = {}
    spares = _Spares(namespaces)
    while True:
        watched: list[Any] = [listener, wake_r, 0]
        readable, _, _ = select.select(watched, [], [], 0 if spares.short() else None)
        if not readable:  # nothing asked of us: fork one child ahead for the next request
            spares.fill([listener.fileno(), wake_r.fileno(), wake_w.fileno(), *(c.fileno() for c in jobs.values())])
            continue
        if 0 in readable:  # EOF on the lifeline: the caller is gone
            spares.stop()
            for pid in jobs:
                os.kill(pid, signal.SIGKILL)
            if _pids_parent is not None:  # the jobs' cgroups go once their tasks have
                for pid in jobs:
                    try:
                        os.waitpid(pid, 0)
                    except ChildProcessError:
                        pass
                _remove_pids_cgroups(_pids_parent)
            os._exit(0)
        if wake_r in readable:
            while True:
                try:
                    if not wake_r.recv(4096):
                        break
                except BlockingIOError:
                    break
            _reap(jobs, spares)
        if listener in readable:
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            own = [listener.fileno(), wake_r.fileno(), wake_w.fileno(), conn.fileno(),
                   *(c.fileno() for c in jobs.values())]
            pid = _start_job(conn, namespaces, own, spares)  # type: ignore[assignment]  # None: refused, handled here
            if pid is None:
                conn.close()
            else:
                jobs[pid] = conn


def _start_job(conn: socket.socket, namespaces: bool, close_fds: list[int], spares: _Spares | None = None) -> int | None:
    """Read one request and fork its job; answer with {"started": pid} and a pidfd to it."""
    conn.settimeout(10)
    fds: list[int] = []
    try:
        req, fds = _recv_frame_with_fds(conn, 3)
        if len(fds) != 3 or not isinstance(req, dict) or req.get("payload") is not None:
            raise ValueError("expected a request without its payload, and three descriptors")
        out_w, res_w, pay_r = fds
        req["payload_fd"] = pay_r
        pid = _fork_job(req, out_w, res_w, namespaces, close_fds, spares)
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


def _reap(jobs: dict[int, socket.socket], spares: _Spares | None = None) -> None:
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if spares is not None and spares.gone(pid):
            continue  # a spare that died waiting (its socket is closed; a new one is forked)
        cgroup = _job_cgroups.pop(pid, None)
        if cgroup is not None and _pids_parent is not None:
            _remove_pids_cgroups(_pids_parent, only=cgroup)
        conn = jobs.pop(pid, None)
        if conn is not None:
            try:
                _send_frame(conn, {"exit": status, "cpu": usage.ru_utime + usage.ru_stime})
            except OSError:
                pass
            conn.close()
