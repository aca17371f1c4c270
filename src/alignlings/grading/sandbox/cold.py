"""The cold path: a fresh interpreter per job, inside bubblewrap where it works."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from alignlings.grading.sandbox.limits import (
    _JOB_UID_BASE,
    _JOB_UID_COUNT,
    ISOLATION_MODES,
    Limits,
    SandboxResult,
    SandboxUnavailable,
)
from alignlings.grading.sandbox.linux import (
    CLONE_NEWNS,
    MS_PRIVATE,
    MS_REC,
    _can_switch_uid,
    _enter_user_namespace_with_ids,
    _host_root,
    _is_host_uid_0,
    _join_cgroup,
    _mount,
    _new_pids_cgroup,
    _pids_cgroup_parent,
    _remove_pids_cgroups,
    _unshare,
)
from alignlings.grading.sandbox.mounts import _describe, _features, _masks, _python_path, _reach, _under, _visible_paths
from alignlings.grading.sandbox.supervisor import (
    _check_call,
    _job_request,
    _JobDir,
    _result,
    _supervise,
    _usage_of_session,
    _wait_nohang,
)

_COLD_CODE = "import sys; from alignlings.grading.sandbox.job import _cold_main; _cold_main(int(sys.argv[1]))"


_cold_probes: dict[str, tuple[bool, str, dict]] = {}


_cold_lock = threading.Lock()


def _bwrap_command(jd: _JobDir, python_path: list[str], readonly: Sequence[str], limits: Limits,
                   result_fd: int, bwrap: str) -> list[str]:
    binds, links = _visible_paths(python_path, readonly)
    # not the host's root: bubblewrap makes the namespaces from a user namespace (as a user it does
    # so anyway; root without CAP_SYS_ADMIN must ask)
    cmd = [bwrap, "--die-with-parent", *([] if _host_root() else ["--unshare-user"]), "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
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
    for path in _masks(binds, python_path):
        cmd += ["--tmpfs", path, "--remount-ro", path]
    for link, target in links:
        cmd += ["--symlink", target, link]
    if _bwrap_has_size(bwrap):  # the work dir: a tmpfs capped at disk_bytes, not the host's disk
        cmd += ["--perms", "0755", "--size", str(limits.disk_bytes), "--tmpfs", jd.work]
    else:
        cmd += ["--bind", jd.work, jd.work]
    # As a normal user the job's uid owns bubblewrap's root and /dev (tmpfs of no set size) inside
    # its user namespace, so both would be writable: read-only, with a small /dev/shm of its own.
    cmd += ["--remount-ro", "/dev", *(["--size", str(2**20)] if _bwrap_has_size(bwrap) else []),
            "--perms", "1777", "--tmpfs", "/dev/shm", "--remount-ro", "/"]
    cmd += ["--chdir", jd.work, "--", sys.executable, "-c", _COLD_CODE, str(result_fd)]
    return cmd


_bwrap_help: dict[str, str] = {}


def _bwrap_has(bwrap: str, option: str) -> bool:
    if bwrap not in _bwrap_help:
        try:
            _bwrap_help[bwrap] = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            _bwrap_help[bwrap] = ""
    return option in _bwrap_help[bwrap]


def _bwrap_has_size(bwrap: str) -> bool:
    return _bwrap_has(bwrap, "--size")


def _bwrap_as_job_uid(bwrap: str) -> bool:
    """Whether bubblewrap runs as a job uid of its own (``_job_uid_main``): as root without
    CAP_SYS_ADMIN, bubblewrap makes a user namespace, whose processes keep the host uid of whoever
    started it, and the kernel never holds the host's uid 0 to RLIMIT_NPROC. Needs CAP_SETUID and
    CAP_SETGID (a default container has both) and a bubblewrap that sizes its tmpfs (the work dir
    is then not the host's 0700 folder, which that uid could not write)."""
    return _can_switch_uid() and not _host_root() and _bwrap_has_size(bwrap)


_LAUNCHER_CODE = "import sys; from alignlings.grading.sandbox.cold import _job_uid_main; _job_uid_main(sys.argv[1:])"


def _job_uid_main(argv: list[str]) -> None:
    """``python -c _LAUNCHER_CODE [--cgroup DIR] PATH... -- BWRAP ARGS...``, started by root.

    With ``--cgroup``: join that pids cgroup and exec bubblewrap as we are (root without
    CAP_SETUID, whose jobs stay uid 0: the cgroup is their task limit). Otherwise exec bubblewrap as
    uid/gid ``_JOB_UID_BASE`` + our pid (which stays bubblewrap's while the job lives, so no two
    running jobs share it), with no supplementary groups.

    bubblewrap opens its bind sources as the uid it runs as, and the paths to them may pass root's
    0700 folders (``/root`` holding the interpreter, the job tree's private folder). We make a user
    namespace that maps uid 0 and the job uids (``_enter_user_namespace_with_ids``), a mount
    namespace in it, and there cover each folder on the way to a PATH that the job uid cannot pass
    with a 0755 tmpfs holding only the entry on the way (``_reach``); the host's folders stay 0700.
    Where the uids cannot be mapped (no CAP_SETUID after all), bubblewrap runs as before, as uid 0,
    and the probe says that threads are not limited."""
    split = argv.index("--")
    paths, command = argv[:split], argv[split + 1:]
    if paths[:1] == ["--cgroup"]:
        _join_cgroup(paths[1])
        os.execv(command[0], command)
    uid = _JOB_UID_BASE + os.getpid()
    if _enter_user_namespace_with_ids(_JOB_UID_BASE, _JOB_UID_COUNT):
        _unshare(CLONE_NEWNS)
        _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we cover shows outside
        _reach(paths, uid, uid)
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # from root: clears every capability as well
    os.execv(command[0], command)


def _cold_spawn(target: str, payload: dict, limits: Limits, files: dict[str, str] | None,
                python_path: list[str], readonly: Sequence[str], use_bwrap: bool, isolation_text: str) -> SandboxResult:
    started = time.monotonic()
    with _JobDir(files) as jd:
        req = _job_request(target, payload, limits, jd, python_path)
        req["namespaces"] = use_bwrap
        if use_bwrap and not _host_root():
            req["extra_tasks"] = 1  # bubblewrap's init shares the job's user namespace, hence its count
        res_r, res_w = os.pipe()
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        bwrap = shutil.which("bwrap") or "bwrap"
        parent = _cold_pids_parent(use_bwrap)
        tasks = max(limits.tasks, limits.processes)
        # bubblewrap counts there too: its outer process and the init of its pid namespace
        cgroup = _new_pids_cgroup(parent, tasks + 2 if use_bwrap else tasks) if parent else None
        if use_bwrap:
            cmd = _bwrap_command(jd, python_path, readonly, limits, res_w, bwrap)
            if cgroup is not None:
                cmd = [sys.executable, "-S", "-c", _LAUNCHER_CODE, "--cgroup", cgroup, "--", *cmd]
            elif _bwrap_as_job_uid(bwrap):
                cmd = [sys.executable, "-S", "-c", _LAUNCHER_CODE, *_visible_paths(python_path, readonly)[0], "--", *cmd]
        else:
            req["pids_cgroup"] = cgroup  # joined by the job itself, first thing
            cmd = [sys.executable, "-c", _COLD_CODE, str(res_w)]
        try:
            proc = subprocess.Popen(cmd, stdin=in_r, stdout=out_w, stderr=out_w, env=req["env"], cwd=jd.work,
                                    start_new_session=True, close_fds=True, pass_fds=(res_w,))
        finally:
            for fd in (res_w, in_r, out_w):
                os.close(fd)
        if use_bwrap and _host_root():
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
            if cgroup is not None and parent is not None:
                _remove_pids_cgroups(parent, only=cgroup)
        return _result(outcome, limits, isolation_text, started, signal_from_exit_code=use_bwrap)


def _cold_pids_parent(use_bwrap: bool) -> str | None:
    """Where a cold job needs a pids cgroup, the folder for it (else None): its processes stay the
    host's uid 0, which RLIMIT_NPROC never binds (root without namespaces of its own to make a
    job uid in, i.e. without CAP_SYS_ADMIN nor CAP_SETUID, or without bubblewrap)."""
    if not _is_host_uid_0() or (use_bwrap and (_host_root() or _bwrap_as_job_uid(shutil.which("bwrap") or "bwrap"))):
        return None
    return _pids_cgroup_parent(os.getpid())


def _cold_probe(mode: str) -> tuple[bool, str, dict]:
    """Whether `mode` ("bubblewrap" or "rlimits") works here and what it applies; run once, cached."""
    with _cold_lock:
        if mode in _cold_probes:
            return _cold_probes[mode]
        if mode == "bubblewrap" and shutil.which("bwrap") is None:
            answer: tuple[bool, str, dict] = (False, "bwrap not found on PATH", {})
        else:
            try:
                r = _cold_spawn("alignlings.grading.sandbox.job:_probe_job", {}, Limits(wall_seconds=60), None,
                                _python_path(), (), mode == "bubblewrap", mode)
            except OSError as exc:
                r = None
                answer = (False, f"{type(exc).__name__}: {exc}", {})
            if r is not None:
                if r.ok:
                    probe = {"uid_dropped": r.value["uid"] != os.geteuid(), "seccomp": r.value["seccomp"],
                             "userns": r.value["userns"], "caps": r.value["caps"], "nproc": r.value["nproc"]}
                    if _is_host_uid_0() and r.value["uid"] == 0:  # the job stayed the host's uid 0,
                        probe["nproc"] = -1                         # which RLIMIT_NPROC never binds
                        probe["pids_cgroup"] = _cold_pids_parent(mode == "bubblewrap") is not None
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

    isolation: one of ``ISOLATION_MODES`` ("namespaces" are made by bubblewrap here; the result's
    isolation text starts "namespaces via bubblewrap"). ``workdir_files`` (relative path ->
    text) are written into the job's work dir first; ``extra_pythonpath`` directories are importable
    and ``readonly_paths`` readable (everything else of the host is hidden under bubblewrap)."""
    _check_call(target, payload)
    if isolation not in ISOLATION_MODES:
        raise ValueError(f"isolation: expected one of {ISOLATION_MODES}, got {isolation!r}")
    probe: dict[str, Any]
    mode, text, probe = "rlimits", "", {}
    if isolation in ("auto", "namespaces"):
        works, why, probe = _cold_probe("bubblewrap")
        if works:
            mode = "bubblewrap"
            text = _describe("namespaces via bubblewrap", _features(True, probe, limits.processes, limits.tasks))
        elif isolation == "namespaces":
            raise SandboxUnavailable(f"bubblewrap does not work here: {why}")
        else:
            text = f"rlimits only (bubblewrap unavailable: {why})"
    else:
        text = "rlimits only (asked for)"
    if mode == "rlimits":
        _, _, probe = _cold_probe("rlimits")
        text += "; " + ", ".join(_features(False, probe, limits.processes, limits.tasks))
    return _cold_spawn(target, payload, limits, workdir_files, _python_path(extra_pythonpath), readonly_paths,
                       mode == "bubblewrap", text)
