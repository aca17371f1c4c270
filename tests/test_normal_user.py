"""The sandbox, forgery and attack suites again, as a normal user (issue 19: isolation must not
depend on running as root).

As root (CI), each suite runs once more in a child pytest as uid 65534 through
``tests/normal_user.py`` (``unshare --mount`` + ``setpriv``; see there how the interpreter under
/root stays reachable), with ALIGNLINGS_STRICT=1 so that a skip fails there too, and must pass with
nothing skipped. Run as a normal user already, these suites are running as one in this very session;
what is checked then is that this user's warm grader really gets its namespaces.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from alignlings.grading.sandbox import Limits

pytestmark = pytest.mark.slow
TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
SUITES = ["test_sandbox.py", "test_forgery.py", "test_isolation_attacks.py", "test_stop.py", "test_trusted_judging.py"]


def _as_user(argv: list[str], timeout: float, **extra_env: str) -> subprocess.CompletedProcess:
    sys.path.insert(0, str(TESTS))
    try:
        from normal_user import NORMAL_GID, NORMAL_UID, user_command, user_env
    finally:
        sys.path.remove(str(TESTS))
    home = tempfile.mkdtemp(prefix="alignlings-user-home-")
    os.chown(home, NORMAL_UID, NORMAL_GID)
    try:
        env = user_env(home, ALIGNLINGS_HOME=os.path.join(home, "alignlings"), ALIGNLINGS_STRICT="1",
                       PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
                       **extra_env)
        return subprocess.run(user_command(argv), env=env, cwd=home, capture_output=True, text=True, timeout=timeout)
    finally:
        subprocess.run(["rm", "-rf", home], check=False)


_PROBE = ("import json\n"
          "from alignlings.grading.sandbox import WarmSandbox, run_job\n"
          "with WarmSandbox(preload=[]) as w:\n"
          "    warm = w.run('alignlings.grading.sandbox.job:_probe_job', {})\n"
          "cold = run_job('alignlings.grading.sandbox.job:_probe_job', {})\n"
          "print(json.dumps({k: [r.ok, r.isolation, r.value] for k, r in (('warm', warm), ('cold', cold))}))\n")


def test_a_normal_user_gets_namespaces_on_both_paths():
    """The point of it all: as a normal user (uid 65534 when we are root, else this user), warm
    and cold jobs run in namespaces, in a user namespace of their own without capabilities, under
    the task limit."""
    if os.geteuid() == 0:
        proc = _as_user([sys.executable, "-c", _PROBE], timeout=300)
    else:
        proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for path, (ok, isolation, value) in results.items():
        assert ok, (path, isolation, value)
        assert isolation.startswith("namespaces"), (path, isolation)
        assert "own user namespace without capabilities" in isolation, (path, isolation)
        assert f"at most {Limits().tasks} threads" in isolation, (path, isolation)
        assert value["uid"] != 0 and value["userns"] and not value["caps"], (path, value)
    # the warm job joined a copy of the server's sealed template (the fast path; its /proc lies over
    # the template's), rather than building its root: the template works in a user namespace too
    assert results["warm"][2]["proc_mounts"] == 2, results["warm"]


@pytest.mark.parametrize("suite", SUITES)
def test_suite_passes_as_a_normal_user(suite):
    """As root: the whole suite once more as uid 65534, nothing skipped. As a normal user: this
    session runs it as one already; the suite file must be there to be run."""
    if os.geteuid() != 0:
        assert (TESTS / suite).is_file()
        return
    proc = _as_user([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-rs",
                     str(TESTS / suite)], timeout=1800)
    tail = (proc.stdout + proc.stderr)[-6000:]
    assert proc.returncode == 0, tail
    summary = proc.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and "skipped" not in summary, summary


def test_root_without_cap_sys_admin_gets_namespaces_too():
    """Root without CAP_SYS_ADMIN (as in a container) used to fall back to rlimits only on both
    paths. It isolates through a user namespace now, and its jobs run as uids of their own (with
    CAP_SETUID, which a default container keeps): they stayed the host's uid 0, which RLIMIT_NPROC
    never binds."""
    prefix = ["setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin"] if os.geteuid() == 0 else []
    proc = subprocess.run([*prefix, sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"),
                                                                           os.environ.get("PYTHONPATH", "")])})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for path, (ok, isolation, value) in results.items():
        assert ok and isolation.startswith("namespaces"), (path, isolation, value)
        assert not value["caps"] and value["uid"] != 0, (path, value)
        assert f"at most {Limits().tasks} threads" in isolation, (path, isolation)
        own = "own unprivileged uid" if os.geteuid() == 0 else "own user namespace without capabilities"
        assert own in isolation, (path, isolation)


def test_root_of_a_rootless_container_is_under_the_task_limit():
    """Root of a user namespace that maps uid 0 to a normal user (a rootless container): the kernel
    binds its jobs to RLIMIT_NPROC (they are that user's uid outside), unlike the host's uid 0. The
    jobs get their own user namespace and the limit, and the isolation counts as isolated, so a class
    starts there. (Treating every uid 0 as the host's used to report "threads not limited".)"""
    argv = ["unshare", "--user", "--map-root-user", sys.executable, "-c", _PROBE]
    # a cache folder of its own, not under /tmp: else its job trees would go to the shared
    # /var/tmp/alignlings-0, a folder named for root's uid but owned by this user outside
    cache = tempfile.mkdtemp(prefix="alignlings-rootless-cache-", dir="/var/tmp")
    try:
        if os.geteuid() == 0:
            os.chown(cache, 65534, 65534)
            proc = _as_user(argv, timeout=300, XDG_CACHE_HOME=cache)
        else:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                                  env={**os.environ, "XDG_CACHE_HOME": cache})
    finally:
        subprocess.run(["rm", "-rf", cache], check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    from alignlings.grading.sandbox import is_isolated

    for path, (ok, isolation, value) in results.items():
        assert ok and is_isolated(isolation), (path, isolation, value)
        assert f"at most {Limits().tasks} threads (RLIMIT_NPROC)" in isolation, (path, isolation)
        assert value["userns"] and not value["caps"], (path, value)
