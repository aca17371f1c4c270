"""Linux primitives through ctypes: namespaces, mounts, prctl, pivot_root and the seccomp filter."""

from __future__ import annotations

import atexit
import ctypes
import errno
import itertools
import os
import platform
import re
import threading
from typing import Any, Callable

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000


CLONE_NEWPID, CLONE_NEWNET, CLONE_THREAD, CLONE_NEWUSER = 0x20000000, 0x40000000, 0x00010000, 0x10000000


MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32


MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 18, 1 << 21


MNT_DETACH = 2


PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP = 1, 4, 38, 22


PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4


CAP_SETGID, CAP_SETUID, CAP_SYS_ADMIN = 6, 7, 21


_MOUNT_OPTION_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
                       "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}


_ARCHES: dict[str, dict[str, Any]] = {
    "x86_64": {"audit": 0xC000003E, "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "execve": 59,
               "execveat": 322, "seccomp": 317, "capset": 126, "pivot_root": 155, "unshare": 272, "setns": 308, "x32": True,
               "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438},
    "aarch64": {"audit": 0xC00000B7, "fork": None, "vfork": None, "clone": 220, "clone3": 435, "execve": 221,
                "execveat": 281, "seccomp": 277, "capset": 91, "pivot_root": 41, "unshare": 97, "setns": 268, "x32": False,
                "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438},
}


_ARCH = _ARCHES.get(platform.machine())


try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    _libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    _libc.unshare.argtypes = [ctypes.c_int]
    _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
except (OSError, AttributeError):  # not glibc/Linux: namespaces and seccomp are simply unavailable
    _libc = None  # type: ignore[assignment]  # every caller checks it first


def _oserror(what: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"{what}: {os.strerror(err)}")


def _unshare(flags: int) -> None:
    if _libc is None or _libc.unshare(flags) != 0:
        raise _oserror("unshare") if _libc else OSError(errno.ENOSYS, "unshare: no libc")


def _write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _enter_user_namespace() -> None:
    """Become the only member of a new user namespace that maps our own uid and gid to themselves
    (what any user may do where unprivileged user namespaces are on): we keep our identity and gain
    every capability, but only over namespaces that this one owns (the mount, pid and network
    namespaces made after it), never over the host. Must run while the process has one thread."""
    uid, gid = os.geteuid(), os.getegid()
    _unshare(CLONE_NEWUSER)
    try:
        _write_file("/proc/self/setgroups", "deny")  # needed to write gid_map without CAP_SETGID outside
    except OSError:
        pass  # a parent namespace denied it already
    _write_file("/proc/self/uid_map", f"{uid} {uid} 1\n")
    _write_file("/proc/self/gid_map", f"{gid} {gid} 1\n")


def _enter_user_namespace_with_ids(first: int, count: int) -> bool:
    """As the host's root with CAP_SETUID and CAP_SETGID (CAP_SYS_ADMIN not needed): a new user
    namespace that maps uid and gid 0 to themselves *and* the ids ``[first, first + count)`` to
    themselves, so that processes in it can become those (unprivileged, host) uids. A process may
    map only its own id in a namespace it has just made; more takes CAP_SETUID in the parent
    namespace, so a child forked first stays behind there and writes the maps (what ``newuidmap``
    does). True if so; False if the child could not (no CAP_SETUID): then the namespace maps only
    our own ids, as ``_enter_user_namespace`` does. Must run while the process has one thread."""
    uid, gid, me = os.geteuid(), os.getegid(), os.getpid()
    go_r, go_w = os.pipe()
    helper = os.fork()
    if helper == 0:  # stays in our user namespace, where CAP_SETUID/CAP_SETGID count
        code = 1
        try:
            os.close(go_w)
            if os.read(go_r, 1) == b"1":
                maps = f"{uid} {uid} 1\n{first} {first} {count}\n"
                _write_file(f"/proc/{me}/uid_map", maps)
                _write_file(f"/proc/{me}/gid_map", maps.replace(f"{uid} {uid} 1", f"{gid} {gid} 1"))
                code = 0
        finally:
            os._exit(code)
    os.close(go_r)
    try:
        _unshare(CLONE_NEWUSER)
    except OSError:
        os.close(go_w)  # EOF: the helper ends without writing
        os.waitpid(helper, 0)
        raise
    os.write(go_w, b"1")
    os.close(go_w)
    _, status = os.waitpid(helper, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        return True
    try:
        _write_file("/proc/self/setgroups", "deny")
    except OSError:
        pass
    _write_file("/proc/self/uid_map", f"{uid} {uid} 1\n")
    _write_file("/proc/self/gid_map", f"{gid} {gid} 1\n")
    return False


def _is_host_uid_0() -> bool:
    """Whether we are the host's uid 0 (the kernel's ``INIT_USER``, which it never holds to
    RLIMIT_NPROC): root of the initial user namespace, or root of one that maps uid 0 to its
    parent's uid 0. Not root of a rootless container (uid 0 there is a normal user's uid outside),
    whose jobs the limit does bind."""
    if os.geteuid() != 0:
        return False
    with open("/proc/self/uid_map") as f:
        for line in f:
            inside, outside, count = (int(x) for x in line.split())
            if inside <= 0 < inside + count:
                return outside - inside == 0
    return False


def _can_switch_uid() -> bool:
    """Root of the host's user namespace that may change its uid and gid (CAP_SETUID and
    CAP_SETGID: in a default container's capability set, unlike CAP_SYS_ADMIN)."""
    caps = _effective_caps()
    return (os.geteuid() == 0 and bool(caps >> CAP_SETUID & 1) and bool(caps >> CAP_SETGID & 1)
            and _in_initial_user_namespace())


def _effective_caps() -> int:
    """This process's effective capabilities (a bit mask), from /proc/self/status."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def _has_cap_sys_admin() -> bool:
    return bool(_effective_caps() >> CAP_SYS_ADMIN & 1)


def _host_root() -> bool:
    """Root of the host with CAP_SYS_ADMIN: namespaces and job uids can be made directly. Anyone
    else (a user, root without CAP_SYS_ADMIN as in a container, root of a user namespace) makes
    them from a user namespace of its own."""
    return os.geteuid() == 0 and _has_cap_sys_admin() and _in_initial_user_namespace()


def _in_initial_user_namespace() -> bool:
    with open("/proc/self/uid_map") as f:
        return f.read().split() == ["0", "0", "4294967295"]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_capabilities() -> None:
    """Give up every capability for good: the bounding and ambient sets, then the effective,
    permitted and inheritable ones (what a change from uid 0 does; here the uid stays the same)."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            raise _oserror("prctl(PR_CAPBSET_DROP)")
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL on kernels without ambient caps
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3: two 32-bit words
    data = (_CapData * 2)()
    if _ARCH is None or _libc.syscall(_ARCH["capset"], ctypes.byref(header), data) != 0:
        raise _oserror("capset") if _ARCH else OSError(errno.ENOSYS, "capset: unknown architecture")
    if _effective_caps():
        raise OSError(errno.EPERM, "capabilities remain after dropping them")


def _fork_into_new_pid_namespace(child: Callable[[], None]) -> int:
    """fork(), the child being pid 1 of a new pid namespace and running ``child()`` (which must end
    the process, never return); answers the child's pid. We unshare a pid namespace for our next
    child only, then step back into our own, which takes CAP_SYS_ADMIN over the user namespace that
    owns our pid namespace: root's, or (see ``forkserver``) a fork server's own."""
    own_ns = os.open("/proc/self/ns/pid", os.O_RDONLY)
    pid = 0
    try:
        _unshare(CLONE_NEWPID)
        pid = os.fork()
        if pid == 0:  # the job must not keep a handle on our pid namespace
            try:
                os.close(own_ns)
                child()
            finally:
                os._exit(70)
    finally:
        back = _libc.setns(own_ns, CLONE_NEWPID) == 0
        error = None if back else _oserror("setns back to our own pid namespace")
        os.close(own_ns)
        if error is not None:
            if pid > 0:  # a child we could not hand on: stop it (its namespace goes with it)
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            raise error
    return pid


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


# no job reads or writes another process's memory or descriptors: not its own children, not the
# supervisor, not bubblewrap's init (the same uid on a normal user's cold path)
PROCESS_ACCESS_SYSCALLS = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd")


def _seccomp_program(arch: dict, *, new_processes: bool = False) -> list[tuple[int, int, int, int]]:
    """A classic-BPF filter: ptrace, process_vm_readv/writev and pidfd_getfd answer EPERM in every
    job; unless ``new_processes``, it also kills the process on fork, vfork, execve(at) and on clone
    without CLONE_THREAD; clone3 answers ENOSYS (its flags sit behind a pointer BPF cannot read),
    which makes glibc fall back to clone for threads, so threads keep working; unshare and setns
    answer EPERM (no new user, mount or network namespace from inside a job)."""
    ld_abs, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    kill, allow, enosys = 0x80000000, 0x7FFF0000, 0x00050000 | errno.ENOSYS  # RET_KILL_PROCESS, ALLOW, ERRNO
    eperm = 0x00050000 | errno.EPERM
    prog = [(ld_abs, 0, 0, 4), (jeq, 1, 0, arch["audit"]), (ret, 0, 0, kill), (ld_abs, 0, 0, 0)]
    if arch["x32"]:  # x32 syscalls alias the x86_64 numbers with this bit set
        prog += [(jge, 0, 1, 0x40000000), (ret, 0, 0, kill)]
    for name in PROCESS_ACCESS_SYSCALLS:
        prog += [(jeq, 0, 1, arch[name]), (ret, 0, 0, eperm)]
    if new_processes:  # a job that may start processes (in its own namespaces): the rest is allowed
        return [*prog, (ret, 0, 0, allow)]
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


_PROGRAMS: dict[bool, list] = {}  # built once per process (a fork server's jobs inherit them)


def _install_seccomp(*, new_processes: bool = False) -> None:
    if _ARCH is None or _libc is None:
        raise OSError(errno.ENOSYS, f"seccomp: no filter for {platform.machine()}")
    prog = _PROGRAMS.get(new_processes)
    if prog is None:
        prog = _PROGRAMS[new_processes] = _seccomp_program(_ARCH, new_processes=new_processes)
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), filters)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    # seccomp(SET_MODE_FILTER, TSYNC) covers every thread; the older prctl form only this one.
    if _libc.syscall(_ARCH["seccomp"], 1, 1, ctypes.byref(fprog)) != 0:
        if _libc.prctl(PR_SET_SECCOMP, 2, ctypes.addressof(fprog), 0, 0) != 0:
            raise _oserror("seccomp")


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


_pids_parent_found: list[str | None] = []  # [the folder, or None], once looked for


_pids_lock = threading.Lock()


_pids_counter = itertools.count()


def _our_pids_cgroup() -> str | None:
    """The folder of the cgroup that holds us in a hierarchy with the pids controller (v1's pids
    hierarchy, else v2's, whose children have pids.max where it is enabled), or None."""
    with open("/proc/self/cgroup") as f:
        entries = [line.rstrip("\n").split(":", 2) for line in f]
    mounts = _cgroup_mounts()
    for version in ("cgroup", "cgroup2"):
        for mount_root, point, fstype, options in mounts:
            for _, controllers, path in entries:
                v1 = fstype == "cgroup" and "pids" in options.split(",") and "pids" in controllers.split(",")
                v2 = fstype == "cgroup2" and controllers == ""
                if fstype == version and (v1 or v2) and _under_path(path, mount_root):
                    return os.path.join(point, os.path.relpath(path, mount_root))
    return None


def _under_path(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _cgroup_mounts() -> list[tuple[str, str, str, str]]:
    """(root inside the hierarchy, mount point, fstype, super options) of each cgroup mount."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                point = _OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[4])
                out.append((fields[3], point, tail[0], tail[2]))
    return out


def _pids_cgroup_parent(tag: int) -> str | None:
    """A pids cgroup made for this process's jobs (``alignlings-TAG`` under ours, TAG our host
    pid), where one can be made and its children get ``pids.max``; None elsewhere. Removed (with
    what jobs left) at exit. The task limit of last resort: root without CAP_SYS_ADMIN nor
    CAP_SETUID, whose jobs stay the host's uid 0, which RLIMIT_NPROC never binds. Looked for once
    per process."""
    with _pids_lock:
        if _pids_parent_found:
            return _pids_parent_found[0]
        found = None
        try:
            ours = _our_pids_cgroup()
            if ours is not None:
                _remove_stale_pids_cgroups(ours)
                parent = os.path.join(ours, f"alignlings-{tag}")
                os.mkdir(parent, 0o755)
                if os.path.exists(os.path.join(parent, "pids.max")):
                    found = parent
                    atexit.register(_remove_pids_cgroups, parent)
                else:
                    os.rmdir(parent)
        except OSError:
            found = None
        _pids_parent_found.append(found)
        return found


def _remove_stale_pids_cgroups(ours: str) -> None:
    """Those of killed processes (the host pid in their name is gone; /proc is the host's here):
    a fork server killed before its lifeline ended leaves its folder behind."""
    for name in os.listdir(ours):
        if name.startswith("alignlings-") and name[11:].isdigit() and not os.path.exists(f"/proc/{name[11:]}"):
            _remove_pids_cgroups(os.path.join(ours, name))


def _new_pids_cgroup(parent: str, tasks: int) -> str:
    """A child of `parent` that lets at most `tasks` tasks (threads) live in it at once."""
    path = os.path.join(parent, f"job-{next(_pids_counter)}")
    os.mkdir(path, 0o755)
    _write_file(os.path.join(path, "pids.max"), str(tasks))
    return path


def _join_cgroup(path: str) -> None:
    """Move this process (one thread yet) into the cgroup at `path`: its threads count there."""
    _write_file(os.path.join(path, "cgroup.procs"), "0")


def _remove_pids_cgroups(parent: str, only: str | None = None) -> None:
    """rmdir job cgroups whose tasks are gone (all, or `only`), then `parent` when no `only`."""
    try:
        names = [os.path.basename(only)] if only else [n for n in os.listdir(parent) if n.startswith("job-")]
    except OSError:
        return
    for name in names:
        try:
            os.rmdir(os.path.join(parent, name))
        except OSError:
            pass
    if only is None:
        try:
            os.rmdir(parent)
        except OSError:
            pass
