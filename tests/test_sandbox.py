"""The grader's sandbox, on both paths: cold (run_job) and warm (WarmSandbox).

Well-behaved jobs come back with their value and output; hostile ones (tests/sandbox_targets.py)
fail with the right plain reason within seconds, and after every test no process is left behind.
Where a layer is unavailable on the machine (no bubblewrap, not root), the tests that need it
skip and say why; the result's `isolation` is what they read.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from alignlings.grading.sandbox import (
    Limits,
    SandboxResult,
    SandboxUnavailable,
    WarmSandbox,
    _classify,
    _Outcome,
    run_job,
)
from alignlings.grading.sandbox.forkserver import SPARES

TESTS = str(Path(__file__).resolve().parent)
SECRET = "alignlings-test-secret-7f3a"
pytestmark = pytest.mark.slow


# -- processes left behind -------------------------------------------------------------------
PR_SET_CHILD_SUBREAPER = 36


def _process_table() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, state) for every process."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            table[int(name)] = (int(fields[1]), fields[0].decode())
    return table


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants() -> dict[int, str]:
    """Live descendants of this process (pid -> state). While this module runs, we are a child
    subreaper, so orphans of a job (a daemonised child) are re-parented to us, not to init."""
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, stack = {}, list(children.get(os.getpid(), []))
    while stack:
        pid = stack.pop()
        found[pid] = table[pid][1]
        stack += children.get(pid, [])
    return found


def new_processes(before: set[int]) -> list[str]:
    """Descendants that did not exist before the test, except warm fork servers (a server's own
    children are jobs, and count). Zombies re-parented to us are reaped and do not count."""
    left = []
    for pid, state in descendants().items():
        if pid in before:
            continue
        if state == "Z":
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            continue
        if "_serve_main" in _cmdline(pid):
            continue
        left.append(f"{pid} ({state}): {_cmdline(pid)[:80]}")
    return left


@pytest.fixture(scope="module", autouse=True)
def subreaper():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    yield
    libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


@pytest.fixture(autouse=True)
def no_leftovers(subreaper):
    """After every test: nothing the test started is still running (waits until the exits are seen,
    at most 30 s: a loaded machine reaps slowly, and a process still there after that is a leak)."""
    before = set(descendants())
    yield
    deadline = time.monotonic() + 30.0
    while (left := new_processes(before)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"processes left behind: {left}"


def test_leftover_check_sees_orphans():
    """The check above is only worth something if it sees a daemonised process."""
    import subprocess

    before = set(descendants())
    out = subprocess.run(["/bin/sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True)
    orphan = int(out.stdout)
    try:
        assert any(line.startswith(f"{orphan} ") for line in new_processes(before))
    finally:
        os.kill(orphan, signal.SIGKILL)
        os.waitpid(orphan, 0)


# -- the two paths -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def warm():
    os.environ["ALIGNLINGS_TEST_SECRET"] = SECRET  # the server must not pass it on
    try:
        with WarmSandbox(preload=["torch", "sandbox_targets:use_openmp"], extra_pythonpath=[TESTS]) as sandbox:
            sandbox.server_pid  # wait until it is ready, so no test's timing includes the start
            yield sandbox
    finally:
        del os.environ["ALIGNLINGS_TEST_SECRET"]


@pytest.fixture(params=["cold", "warm"])
def run(request):
    """run(name, payload, **kw) on the path under test; a bare name is one in sandbox_targets."""
    def target(name: str) -> str:
        return name if ":" in name else f"sandbox_targets:{name}"

    if request.param == "warm":
        sandbox = request.getfixturevalue("warm")
        return lambda name, payload=None, **kw: sandbox.run(target(name), payload or {}, **kw)
    return lambda name, payload=None, **kw: run_job(target(name), payload or {}, extra_pythonpath=[TESTS], **kw)


def needs(result: SandboxResult, layer: str) -> None:
    if layer not in result.isolation:
        pytest.skip(f"this machine's sandbox lacks {layer!r}: {result.isolation}")


def check_failure(result: SandboxResult, kind: str) -> None:
    """The job failed the way ``kind`` says. No wall-clock bound: the kind itself says how it ended
    (a job stopped for output, memory or a forbidden call was not the one killed at its time limit,
    which would read "timeout"), so the tests give generous limits and hold on a loaded machine."""
    assert not result.ok, result
    assert result.value is None
    assert result.error_kind == kind, (result.error_kind, result.error_message, result.stdout[-500:])
    assert result.error_message


# -- well-behaved jobs ---------------------------------------------------------------------------
def test_value_output_and_workdir(run):
    result = run("echo", {"x": [1, 2]}, workdir_files={"data/in.txt": "héllo", "top.txt": "t"})
    assert result.ok, result
    assert result.error_kind is None and result.error_message is None
    assert result.value["payload"] == {"x": [1, 2]}
    assert result.value["files"] == {"data/in.txt": "héllo", "top.txt": "t"}
    assert result.value["home"] == result.value["cwd"]
    assert "hello from the job" in result.stdout and "to stderr" in result.stdout
    assert not os.path.exists(result.value["cwd"]), "the work dir is deleted afterwards"


def test_target_module_from_the_workdir(run):
    files = {"solution.py": "def answer(payload):\n    return payload['q'] * 2\n"}
    result = run("solution:answer", {"q": 21}, workdir_files=files)
    assert result.ok, result
    assert result.value == 42


def test_workdir_and_tmp_are_writable(run):
    result = run("write_in_workdir")
    assert result.ok, result
    assert result.value == "fine"


def test_clean_environment(run, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_TEST_SECRET", SECRET)
    result = run("environment")
    assert result.ok, result
    assert SECRET not in json.dumps(result.value)
    env = result.value["env"]
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert TESTS in env["PYTHONPATH"].split(os.pathsep)


def test_isolation_is_reported(run):
    result = run("environment")
    assert result.ok, result
    base = result.isolation.split(" ", 1)[0]
    assert base in ("namespaces", "rlimits"), result.isolation
    if base == "rlimits":
        assert "unavailable" in result.isolation or "asked for" in result.isolation
    else:
        assert "no network" in result.isolation and "read-only file system" in result.isolation
    if "own pid namespace" in result.isolation:
        assert len(result.value["pids"]) <= 2, result.value["pids"]  # the job (and bwrap's init)
    if "unprivileged uid" in result.isolation:
        assert result.value["uid"] != 0


def test_torch_parallel_op_in_forked_child(run):
    """The warm server ran a multi-threaded op before forking; the job must not hang."""
    result = run("torch_matmul", limits=Limits(wall_seconds=60))
    assert result.ok, result
    assert result.value == 256.0 * 256 * 256


# -- hostile jobs ------------------------------------------------------------------------------
def test_infinite_loop_times_out(run):
    result = run("spin", limits=Limits(wall_seconds=2))
    check_failure(result, "timeout")
    assert "longer than 2 s" in result.error_message


def test_cpu_time_limit(run):
    result = run("spin", limits=Limits(wall_seconds=20, cpu_seconds=1))
    check_failure(result, "timeout")
    assert "CPU time" in result.error_message


def test_unbounded_allocation(run):
    result = run("allocate", limits=Limits(memory_bytes=768 * 2**20))
    check_failure(result, "memory")
    assert "768 MiB" in result.error_message


def test_huge_torch_allocation(run):
    result = run("allocate_torch", limits=Limits(wall_seconds=60))
    check_failure(result, "memory")


def test_shared_memory_is_counted(run):
    limit = 512 * 2**20
    result = run("allocate_shared", {"bytes": 2 * limit}, limits=Limits(memory_bytes=limit, wall_seconds=60))
    check_failure(result, "memory")


def test_output_flood_is_stopped_quickly(run):
    result = run("flood", limits=Limits(wall_seconds=20))
    check_failure(result, "output_limit")
    assert len(result.stdout.encode()) <= 64 * 1024
    assert result.stdout.startswith("x" * 1000)


def test_fork_bomb_is_forbidden(run):
    result = run("fork_bomb", limits=Limits(wall_seconds=60))
    check_failure(result, "forbidden")
    assert "os.fork" in result.error_message


def test_subprocess_is_forbidden(run):
    result = run("run_subprocess", limits=Limits(wall_seconds=60))
    check_failure(result, "forbidden")
    assert "subprocess" in result.error_message


def test_raw_fork_syscall_is_forbidden(run):
    result = run("raw_fork", limits=Limits(wall_seconds=60))
    needs(result, "(seccomp)")
    check_failure(result, "forbidden")


def test_allowed_processes_are_killed_at_the_end(run):
    result = run("spawn_sleepers", {"n": 3}, limits=Limits(processes=16, wall_seconds=10))
    assert result.ok, result
    assert len(result.value) == 3
    # the autouse fixture then checks that none of the sleepers is still alive


def test_writing_outside_the_workdir_fails(run, tmp_path):
    outside = [str(tmp_path / "escaped.txt"), os.path.join(TESTS, "_sandbox_escaped.txt"),
               "/etc/_alignlings_sandbox_escaped", "/_alignlings_sandbox_escaped"]
    try:
        result = run("write_outside", {"paths": outside})
        assert result.ok, result
        needs(result, "read-only file system")
        for path in outside:
            assert result.value[path] != "written", (path, result.value)
            assert not os.path.exists(path), path
    finally:
        for path in outside:
            if os.path.exists(path):
                os.remove(path)


def test_no_network(run):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.1)
    port = server.getsockname()[1]
    try:
        result = run("connect", {"addresses": [["127.0.0.1", port], ["10.255.255.1", 80]]})
        assert result.ok, result
        needs(result, "no network")
        assert all(outcome != "connected" for outcome in result.value.values()), result.value
        with pytest.raises(socket.timeout):
            server.accept()  # nothing reached the host's loopback
    finally:
        server.close()


def test_killing_the_parent_leaves_the_caller_and_server_alive(run, request):
    result = run("kill_parent", limits=Limits(wall_seconds=60))
    assert result.error_kind != "timeout", result  # it ended by itself, not at the limit
    # the job's parent is bwrap's init (another uid: EPERM) or nobody (pid 1: getppid() is 0, and
    # kill(0) signals its own group, which the kernel ignores for a namespace's init)
    assert result.ok or result.error_kind in ("killed", "exception"), result
    if "warm" in request.node.callspec.id:
        server_pid = request.getfixturevalue("warm").server_pid
        os.kill(server_pid, 0)  # alive (or transparently restarted)
    again = run("echo", {"after": "kill"})
    assert again.ok, again


def test_sys_exit_before_returning(run):
    result = run("exit_early")
    check_failure(result, "exited")
    assert "exited" in result.error_message


def test_os_exit_before_returning(run):
    check_failure(run("hard_exit"), "exited")


def test_exception_carries_the_traceback_tail(run):
    result = run("boom")
    check_failure(result, "exception")
    assert "ValueError: boom from the job" in result.error_message
    assert "sandbox_targets.py" in result.error_message and "in boom" in result.error_message
    assert "sandbox.py" not in result.error_message.replace("sandbox_targets.py", "")


def test_segfault_is_a_crash(run):
    result = run("segfault")
    check_failure(result, "crashed")
    assert "SIGSEGV" in result.error_message
    assert "Fatal Python error" in result.stdout  # faulthandler's stack, for the learner


def test_value_that_is_not_json(run):
    result = run("not_json")
    check_failure(result, "exception")
    assert "JSON" in result.error_message


def test_corrupted_result(run):
    result = run("corrupt_result")
    check_failure(result, "crashed")
    assert "result could not be read" in result.error_message


# -- warm path only ------------------------------------------------------------------------------
def test_warm_server_restarts_after_it_is_killed():
    with WarmSandbox(preload=[], extra_pythonpath=[TESTS]) as sandbox:  # no torch: restarts fast
        first = sandbox.server_pid
        os.kill(first, signal.SIGKILL)
        result = sandbox.run("sandbox_targets:echo", {"n": 1})
        assert result.ok, result
        assert sandbox.server_pid != first


def test_warm_runs_concurrently_from_threads(warm):
    results: dict[int, SandboxResult] = {}

    def worker(i: int) -> None:
        for j in range(3):
            results[i * 10 + j] = warm.run("sandbox_targets:echo", {"i": i, "j": j})

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 12
    for key, result in results.items():
        assert result.ok, result
        assert result.value["payload"] == {"i": key // 10, "j": key % 10}


def test_warm_timeout_leaves_server_usable(warm):
    result = warm.run("sandbox_targets:sleep_then_return", {"seconds": 30}, limits=Limits(wall_seconds=1))
    check_failure(result, "timeout")
    assert warm.run("sandbox_targets:sleep_then_return", {"seconds": 0}).value == "done"


def test_warm_per_run_paths(warm, tmp_path):
    """Paths beyond the server's own take the slower way (a root built for this job, not a copy
    of the server's template); the job sees them, read-only, and its isolation is the same."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "extra_job.py").write_text("def run(payload):\n    return open(payload['path']).read()\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "note.txt").write_text("readable")
    result = warm.run("extra_job:run", {"path": str(tmp_path / "data" / "note.txt")},
                      extra_pythonpath=[str(tmp_path / "lib")], readonly_paths=[str(tmp_path / "data")])
    assert result.ok, result
    assert result.value == "readable"
    outside = warm.run("sandbox_targets:write_outside", {"paths": [str(tmp_path / "data" / "x.txt")]},
                       readonly_paths=[str(tmp_path / "data")])
    assert outside.ok, outside
    needs(outside, "read-only file system")
    assert outside.value[str(tmp_path / "data" / "x.txt")] != "written"
    assert not (tmp_path / "data" / "x.txt").exists()


def test_warm_isolation_can_be_required():
    try:
        sandbox = WarmSandbox(preload=[], isolation="namespaces", extra_pythonpath=[TESTS])
        with sandbox:
            result = sandbox.run("sandbox_targets:environment", {})
    except SandboxUnavailable as exc:
        pytest.skip(str(exc))
    assert result.ok, result
    assert result.isolation.startswith("namespaces")


def test_warm_rlimits_only():
    with WarmSandbox(preload=[], isolation="rlimits", extra_pythonpath=[TESTS]) as sandbox:
        ok = sandbox.run("sandbox_targets:echo", {"a": 1})
        spin = sandbox.run("sandbox_targets:spin", {}, limits=Limits(wall_seconds=1))
        bomb = sandbox.run("sandbox_targets:fork_bomb", {}, limits=Limits(wall_seconds=60))
    assert ok.ok and ok.isolation.startswith("rlimits only"), ok
    check_failure(spin, "timeout")
    check_failure(bomb, "forbidden")


# -- cold path fallbacks -------------------------------------------------------------------------
def test_cold_rlimits_only():
    kw = {"extra_pythonpath": [TESTS], "isolation": "rlimits"}
    ok = run_job("sandbox_targets:echo", {"a": 1}, **kw)
    assert ok.ok and ok.isolation.startswith("rlimits only"), ok
    check_failure(run_job("sandbox_targets:spin", {}, limits=Limits(wall_seconds=1), **kw), "timeout")
    check_failure(run_job("sandbox_targets:flood", {}, **kw), "output_limit")
    check_failure(run_job("sandbox_targets:fork_bomb", {}, **kw), "forbidden")
    check_failure(run_job("sandbox_targets:boom", {}, **kw), "exception")
    # without a pid namespace nothing could kill a child that left the group: forking stays off
    sleepers = run_job("sandbox_targets:spawn_sleepers", {}, limits=Limits(processes=8), **kw)
    check_failure(sleepers, "forbidden")
    assert "more need a pid namespace" in sleepers.isolation


def test_cold_isolation_can_be_required():
    try:
        result = run_job("sandbox_targets:echo", {}, extra_pythonpath=[TESTS], isolation="namespaces")
    except SandboxUnavailable as exc:
        pytest.skip(str(exc))
    assert result.ok and result.isolation.startswith("namespaces via bubblewrap"), result


# -- small pure pieces -----------------------------------------------------------------------------
def _outcome(status=None, cpu=0.0, result=b"", stopped_for=None) -> _Outcome:
    return _Outcome(status=status, cpu_seconds=cpu, output=b"", result=result, stopped_for=stopped_for)


@pytest.mark.parametrize(("outcome", "kwargs", "kind"), [
    (_outcome(status=signal.SIGSEGV), {}, "crashed"),  # raw status: killed by signal 11
    (_outcome(status=(128 + signal.SIGSEGV) << 8), {"signal_from_exit_code": True}, "crashed"),  # bwrap's 128+n
    (_outcome(status=signal.SIGKILL, cpu=3.5), {}, "timeout"),  # the hard RLIMIT_CPU
    (_outcome(status=signal.SIGKILL, cpu=0.1), {}, "killed"),
    (_outcome(status=signal.SIGSYS), {}, "forbidden"),  # the seccomp filter
    (_outcome(status=3 << 8), {}, "exited"),
    (_outcome(status=0, result=b'{"status": "ok", "value": [1]}', stopped_for="output_limit"), {}, "output_limit"),
    (_outcome(status=0, result=b'{"status": "ok"'), {}, "crashed"),
    (_outcome(status=None), {}, "killed"),
])
def test_classify(outcome, kwargs, kind):
    ok, value, error_kind, message = _classify(outcome, Limits(cpu_seconds=3), **kwargs)
    assert (ok, value, error_kind) == (False, None, kind)
    assert message


def test_classify_ok_value():
    outcome = _outcome(status=0, result=b'{"status": "ok", "value": {"a": 1}}')
    assert _classify(outcome, Limits()) == (True, {"a": 1}, None, None)


def test_limits_are_validated():
    with pytest.raises(ValueError, match="wall_seconds"):
        Limits(wall_seconds=0)


def test_caller_mistakes_raise_before_anything_runs(warm):
    with pytest.raises(ValueError, match="target"):
        run_job("sandbox_targets.echo", {})
    with pytest.raises(TypeError, match="payload"):
        warm.run("sandbox_targets:echo", {"x": object()})


def test_workdir_files_must_stay_inside():
    with pytest.raises(ValueError, match="workdir_files"):
        run_job("sandbox_targets:echo", {}, workdir_files={"../escape.txt": "x"}, extra_pythonpath=[TESTS])


# -- spares: children the fork server forks ahead of their job ------------------------------------
def _spares_of(server: int) -> dict[int, int]:
    """The fork server's children now (spares, and jobs that run): {host pid: start in clock ticks}."""
    out = {}
    for task in os.listdir(f"/proc/{server}/task"):
        try:
            with open(f"/proc/{server}/task/{task}/children") as f:
                pids = [int(p) for p in f.read().split()]
        except OSError:
            continue
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    out[pid] = int(f.read().rsplit(")", 1)[1].split()[19])
            except OSError:
                pass
    return out


def _wait_for_spares(server: int) -> dict[int, int]:
    deadline = time.monotonic() + 60
    while len(spares := _spares_of(server)) < SPARES and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(spares) >= SPARES, spares
    return spares


def _ticks_now() -> int:
    with open("/proc/uptime") as f:
        return int(float(f.read().split()[0]) * os.sysconf("SC_CLK_TCK"))


def test_warm_jobs_run_in_children_forked_ahead_of_them(warm):
    """Forking the server (torch imported) is most of a warm job's start, so it keeps ``SPARES``
    children forked ahead; a job is one of them, forked before its request was sent, and holds no
    socket (no way to hand a spare a request of its own)."""
    spares = _wait_for_spares(warm.server_pid)
    time.sleep(0.2)  # the clock moves on: a job forked on request would start after this
    sent = _ticks_now()
    result = warm.run("sandbox_targets:own_start", {})
    assert result.ok, result
    assert result.value["start"] < sent and result.value["start"] in spares.values(), (result.value, spares, sent)
    assert not [t for t in result.value["fds"].values() if t.startswith("socket:")], result.value["fds"]
    _wait_for_spares(warm.server_pid)  # and the spare used is replaced


def test_warm_jobs_beyond_the_spares_are_forked_on_request_and_hold_no_socket(warm):
    """More jobs at once than spares: the rest are forked on request, and they too hold no
    descriptor to a spare's socket (with one, a job could send a spare a request of its own)."""
    _wait_for_spares(warm.server_pid)
    results: list[SandboxResult] = []
    threads = [threading.Thread(target=lambda: results.append(warm.run("sandbox_targets:own_start", {})))
               for _ in range(SPARES + 2)]
    holders = [threading.Thread(target=lambda: warm.run("sandbox_targets:hold", {"seconds": 1.0}))
               for _ in range(SPARES)]
    for t in holders + threads:
        t.start()
    for t in holders + threads:
        t.join(120)
    assert len(results) == SPARES + 2 and all(r.ok for r in results), results
    for r in results:
        assert not [t for t in r.value["fds"].values() if t.startswith("socket:")], r.value["fds"]


def test_a_spare_that_died_waiting_is_replaced():
    """A spare killed while it waits (the kernel's OOM killer, say) is reaped and replaced."""
    with WarmSandbox(preload=[], extra_pythonpath=[TESTS]) as sandbox:
        server = sandbox.server_pid
        spares = _wait_for_spares(server)
        for pid in spares:
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30  # reaped by the server (a job handed over meanwhile dies with it)
        while set(_spares_of(server)) & set(spares) and time.monotonic() < deadline:
            time.sleep(0.05)
        result = sandbox.run("sandbox_targets:echo", {"n": 1})
        assert result.ok, result
        assert not set(_wait_for_spares(server)) & set(spares)


def test_spares_end_with_their_server():
    with WarmSandbox(preload=[], extra_pythonpath=[TESTS]) as sandbox:
        spares = _wait_for_spares(sandbox.server_pid)
    deadline = time.monotonic() + 30
    while (alive := [p for p in spares if _process_table().get(p, (0, "Z"))[1] != "Z"]) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive
