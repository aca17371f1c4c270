"""Job functions for tests/test_sandbox.py: well-behaved ones and hostile ones.

Each is a sandbox target, "sandbox_targets:<name>", called as f(payload). Hostile ones do what a
careless or malicious submission would; the tests check the sandbox stops them with the right
plain reason and leaves nothing behind. Nothing here imports torch at module level, so the cold
path only pays for torch in the jobs that use it.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import signal
import socket
import sys
import time


# -- well-behaved --------------------------------------------------------------------------------
def echo(payload: dict) -> dict:
    print("hello from the job")
    print("to stderr", file=sys.stderr)
    files = {}
    for dirpath, _, names in os.walk("."):
        for name in names:
            path = os.path.join(dirpath, name)[2:]
            with open(path) as f:
                files[path] = f.read()
    return {"payload": payload, "cwd": os.getcwd(), "home": os.environ.get("HOME"), "files": files}


def environment(payload: dict) -> dict:
    with open("/proc/self/environ", "rb") as f:
        initial = f.read().decode("utf-8", "replace")
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    return {"env": dict(os.environ), "initial_environ": initial, "pids": pids, "uid": os.getuid()}


def torch_matmul(payload: dict) -> float:
    """A parallel op: in a child forked from a process that used OpenMP, this hangs unless the
    child first calls torch.set_num_threads(1)."""
    import torch

    a = torch.ones(256, 256)
    return float((a @ a).sum())


def use_openmp() -> None:
    """Preloaded into the warm server: run a parallel op with several threads, like a server that
    warmed up torch, so forked jobs inherit an initialised OpenMP pool."""
    import torch

    torch.set_num_threads(2)
    a = torch.ones(512, 512)
    (a @ a).sum().item()


def write_in_workdir(payload: dict) -> str:
    with open("out.txt", "w") as f:
        f.write("fine")
    with open(os.path.join(os.environ["TMPDIR"], "tmp.txt"), "w") as f:
        f.write("fine")
    with open("out.txt") as f:
        return f.read()


# -- hostile -------------------------------------------------------------------------------------
def spin(payload: dict) -> None:
    while True:
        pass


def allocate(payload: dict) -> int:
    chunks = []
    while True:
        chunks.append(bytearray(16 * 2**20))


def allocate_torch(payload: dict) -> float:
    import torch

    return float(torch.ones(2**40, dtype=torch.uint8).sum())


def allocate_shared(payload: dict) -> None:
    """Shared anonymous memory: RLIMIT_DATA does not count it, the resident-memory poll does."""
    size = payload["bytes"]
    region = mmap.mmap(-1, size, flags=mmap.MAP_SHARED)
    while True:
        for offset in range(0, size, 4096):
            region[offset] = 1
        time.sleep(0.05)


def flood(payload: dict) -> None:
    while True:
        print("x" * 1000)


def fork_bomb(payload: dict) -> None:
    while True:
        os.fork()


def run_subprocess(payload: dict) -> int:
    import subprocess

    return subprocess.run(["/bin/sh", "-c", "echo hi"], check=False).returncode


def raw_fork(payload: dict) -> int:
    """fork(2) through libc, past any Python-level guard."""
    return ctypes.CDLL(None).fork()


def spawn_sleepers(payload: dict) -> list[int]:
    """With Limits(processes > 1): children that would outlive the job if nothing killed them."""
    pids = []
    for _ in range(payload.get("n", 3)):
        pid = os.fork()
        if pid == 0:
            os.setsid()  # try to leave the job's process group too
            time.sleep(120)
            os._exit(0)
        pids.append(pid)
    return pids


def write_outside(payload: dict) -> dict[str, str]:
    outcome = {}
    for path in payload["paths"]:
        try:
            with open(path, "w") as f:
                f.write("escaped")
            outcome[path] = "written"
        except OSError as exc:
            outcome[path] = f"{type(exc).__name__}: {exc}"
    return outcome


def connect(payload: dict) -> dict[str, str]:
    outcome = {}
    for host, port in payload["addresses"]:
        try:
            with socket.create_connection((host, port), timeout=1):
                outcome[f"{host}:{port}"] = "connected"
        except OSError as exc:
            outcome[f"{host}:{port}"] = f"{type(exc).__name__}: {exc}"
    return outcome


def kill_parent(payload: dict) -> str:
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(0.2)
    return "survived"


def exit_early(payload: dict) -> None:
    sys.exit(0)


def hard_exit(payload: dict) -> None:
    os._exit(0)


def boom(payload: dict) -> None:
    raise ValueError("boom from the job")


def segfault(payload: dict) -> None:
    ctypes.string_at(0)


def not_json(payload: dict) -> object:
    return object()


def corrupt_result(payload: dict) -> None:
    """Write junk into every pipe but stdio (one of them carries the result), then leave."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            try:
                if os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                    os.write(fd, b"{not json")
            except OSError:
                pass
    os._exit(0)


def sleep_then_return(payload: dict) -> str:
    time.sleep(payload["seconds"])
    return "done"


def read_text(payload: dict) -> str:
    with open(payload["path"]) as f:
        return f.read()


# -- attacks of issue 19 -------------------------------------------------------------------------
def probe_identity(payload: dict) -> dict:
    """Who the job is: uid, gid and supplementary groups (as its user namespace numbers them)."""
    return {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups()}


def loot_processes(payload: dict) -> dict:
    """Walk /proc up from this process to its parents, and through every process it can see,
    reading command lines and environments: where a server keeps its token and ALIGNLINGS_HOME."""
    found: dict[str, str] = {}
    pids = {p for p in os.listdir("/proc") if p.isdigit()}
    pid = os.getpid()
    while pid > 1:  # the parent chain, even where /proc lists nothing
        pids.add(str(pid))
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    for p in sorted(pids):
        for part in ("cmdline", "environ"):
            try:
                with open(f"/proc/{p}/{part}", "rb") as f:
                    found[f"{p}/{part}"] = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
    return {"ppid": os.getppid(), "found": found}


def read_paths(payload: dict) -> dict:
    """Read (or list) each path: the progress database, the caller's folders, sys.path entries."""
    out: dict[str, str] = {}
    for path in payload["paths"]:
        try:
            if os.path.isdir(path):
                out[path] = "listed: " + ", ".join(sorted(os.listdir(path)))
            else:
                with open(path, "rb") as f:
                    out[path] = "read: " + f.read().decode("utf-8", "replace")
        except OSError as exc:
            out[path] = f"{type(exc).__name__}: {exc.strerror}"
    return {"results": out, "sys_path": list(sys.path)}


def start_threads(payload: dict) -> dict:
    """Start sleeping threads until the system says no (or `most`)."""
    import threading

    stop = threading.Event()
    started, error = 0, None
    try:
        for _ in range(payload.get("most", 3000)):
            threading.Thread(target=stop.wait, daemon=True).start()
            started += 1
    except RuntimeError as exc:
        error = str(exc)
    stop.set()
    return {"started": started, "error": error}


def undo_the_sandbox(payload: dict) -> dict:
    """With whatever capabilities the job kept: unmount the mask over the real package, remount the
    root writable, make new namespaces."""
    libc = ctypes.CDLL(None, use_errno=True)
    out: dict[str, object] = {}
    for name, call in (
        ("umount mask", lambda: libc.umount2(payload["mask"].encode(), 2)),
        ("remount / rw", lambda: libc.mount(None, b"/", None, 32 | 4096, None)),  # MS_REMOUNT | MS_BIND
        ("unshare user+mount", lambda: libc.unshare(0x10000000 | 0x00020000)),
    ):
        rc = call()
        out[name] = "done" if rc == 0 else os.strerror(ctypes.get_errno())
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    out["CapEff"] = status["CapEff"].strip()
    out["NoNewPrivs"] = status.get("NoNewPrivs", "?").strip()
    return out


def _write_result_pipes(data: bytes) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            try:
                if os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view):]
            except OSError:
                pass
    os._exit(0)


def nested_result(payload: dict) -> None:
    """A result of 200 000 nested brackets: json.loads in the caller raises RecursionError."""
    _write_result_pipes(b"[" * payload.get("depth", 200_000) + b"]" * payload.get("depth", 200_000))


def garbage_result(payload: dict) -> None:
    _write_result_pipes(bytes(range(256)) * 64)


def odd_result(payload: dict) -> None:
    """A well-formed message whose fields have the wrong types."""
    import json

    _write_result_pipes(json.dumps(payload["message"]).encode())


def read_other_processes(payload: dict) -> dict:
    """Issue 29 §4: ptrace (attach, seize) every process the job can see, bubblewrap's init and the
    job's parent among them, read their memory with process_vm_readv, take a descriptor with
    pidfd_getfd; and the same calls on a pid that does not exist (ESRCH without a filter, EPERM with
    one). Returns call -> errno (0: it worked, and an attached process was let go at once)."""
    import errno as errno_

    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    libc.ptrace.restype = ctypes.c_long
    ptrace_attach, ptrace_detach, ptrace_seize = 16, 17, 0x4206
    nr = {"x86_64": {"process_vm_readv": 310, "pidfd_open": 434, "pidfd_getfd": 438},
          "aarch64": {"process_vm_readv": 270, "pidfd_open": 434, "pidfd_getfd": 438}}[os.uname().machine]

    class IoVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    buf = ctypes.create_string_buffer(64)
    local, remote = IoVec(ctypes.addressof(buf), 64), IoVec(ctypes.addressof(buf), 64)

    def err(rc: int) -> int:
        return 0 if rc >= 0 else ctypes.get_errno()

    out = {}
    pids = sorted({int(p) for p in os.listdir("/proc") if p.isdigit()} - {os.getpid()}) + [os.getppid(), 1]
    for pid in [*dict.fromkeys(pids), 4_000_000]:
        for name, request in (("attach", ptrace_attach), ("seize", ptrace_seize)):
            rc = err(libc.ptrace(request, pid, None, None))
            if rc == 0:
                libc.ptrace(ptrace_detach, pid, None, None)
            out[f"ptrace {name} {pid}"] = rc
        out[f"process_vm_readv {pid}"] = err(libc.syscall(nr["process_vm_readv"], pid, ctypes.byref(local), 1,
                                                           ctypes.byref(remote), 1, 0))
    out["process_vm_readv self"] = err(libc.syscall(nr["process_vm_readv"], os.getpid(), ctypes.byref(local), 1,
                                                     ctypes.byref(remote), 1, 0))
    pidfd = libc.syscall(nr["pidfd_open"], os.getpid(), 0)
    if pidfd >= 0:
        out["pidfd_getfd self"] = err(libc.syscall(nr["pidfd_getfd"], pidfd, 0, 0))
    out["EPERM"] = errno_.EPERM
    return out


def stop_answering(payload: dict) -> None:
    """A job tree that stops answering: the job stops itself (SIGSTOP), as a traced or stopped
    process would; the supervisor must end it at the wall limit."""
    os.kill(os.getpid(), signal.SIGSTOP)
    time.sleep(3600)


def own_start(payload: dict) -> dict:
    """When this process was forked (clock ticks since boot: the same clock as the host's /proc),
    and what its open descriptors are."""
    with open("/proc/self/stat") as f:
        start = int(f.read().rsplit(")", 1)[1].split()[19])
    fds = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return {"start": start, "fds": fds}


def hold(payload: dict) -> str:
    time.sleep(float(payload.get("seconds", 1.0)))
    return "held"
