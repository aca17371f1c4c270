"""Issue 19's attacks on the sandbox, each as a hostile learner file would try it, on the warm and the
cold path. tests/test_normal_user.py runs this file again as a normal user, where the warm path used
to fall back to rlimits only (and every attack here got through).

- walk /proc up to the server and read its command line (the teacher's token) and environment;
- read the progress database in the folder `python -m alignlings` was started from, the script's
  folder, and anything else the caller had on sys.path;
- plant a job tree where the fork server would import it before any sandbox applies;
- start threads without end;
- undo the sandbox with the capabilities that made it;
- send back a result the caller cannot decode (200 000 nested brackets, garbage, fields of the
  wrong type).

As root, the whole file runs once more in a child pytest without CAP_SYS_ADMIN (as in a default
container: the namespaces then come from a user namespace, whose processes keep the host uid of
whoever made it, and the kernel never holds the host's uid 0 to RLIMIT_NPROC; 509 threads were
started there), through ``setpriv``; and once more without CAP_SETUID either, where the jobs cannot
get a uid of their own and a pids cgroup each limits their threads; and once more where the cgroups
cannot be written either, where the isolation text must say that threads are not limited.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from alignlings.grading.sandbox import Limits, WarmSandbox, is_isolated, run_job
from alignlings.grading.sandbox.linux import _effective_caps, _in_initial_user_namespace
from alignlings.grading.sandbox.mounts import _job_tree_files, _package_dir

pytestmark = pytest.mark.slow
TESTS = str(Path(__file__).resolve().parent)
SRC = str(Path(__file__).resolve().parents[1] / "src")
SECRET = "teacher-token-3c9e1f-never-shown"
CAP_SETGID, CAP_SETUID, CAP_SYS_ADMIN = 6, 7, 21


@pytest.fixture(scope="module")
def warm():
    with WarmSandbox(preload=["torch"], extra_pythonpath=[TESTS]) as sandbox:
        sandbox.server_pid
        yield sandbox


@pytest.fixture(params=["cold", "warm"])
def run(request):
    if request.param == "warm":
        sandbox = request.getfixturevalue("warm")
        return lambda name, payload=None, **kw: sandbox.run(f"sandbox_targets:{name}", payload or {}, **kw)
    return lambda name, payload=None, **kw: run_job(f"sandbox_targets:{name}", payload or {},
                                                    extra_pythonpath=[TESTS], **kw)


# -- a server's secrets and a learner's files -----------------------------------------------------
DRIVER = textwrap.dedent("""
    import json, sys
    from alignlings.grading.sandbox import WarmSandbox, run_job

    tests, payloads = sys.argv[1], json.loads(sys.argv[2])  # argv[3:]: the "--token SECRET" a server has
    out = {}
    with WarmSandbox(preload=[], extra_pythonpath=[tests]) as sandbox:
        for name, payload in payloads.items():
            out["warm " + name] = sandbox.run("sandbox_targets:" + name, payload).__dict__
    for name, payload in payloads.items():
        out["cold " + name] = run_job("sandbox_targets:" + name, payload, extra_pythonpath=[tests]).__dict__
    print(json.dumps(out))
""")


@pytest.mark.parametrize("started", ["python -m, in the folder of the progress database", "python script.py"])
def test_a_job_sees_no_server_secret_and_no_file_of_the_caller(tmp_path, started):
    """A server started with its token on the command line and ALIGNLINGS_HOME in its environment,
    from the folder holding the progress database (`-m`: that folder is on sys.path) or as a script
    (its folder is): a job finds neither the token nor the database nor those folders."""
    home, scripts = tmp_path / "home", tmp_path / "scripts"
    home.mkdir()
    scripts.mkdir()
    db = home / "progress.sqlite3"
    db.write_text(f"every learner's code, and {SECRET}")
    (scripts / "attack_driver.py").write_text(DRIVER)
    (scripts / "notes.txt").write_text(SECRET)
    paths = [str(db), str(home), str(scripts), str(scripts / "notes.txt")]
    payloads = {"loot_processes": {}, "read_paths": {"paths": paths}}
    env = {**os.environ, "ALIGNLINGS_HOME": str(home), "ALIGNLINGS_TEACHER_TOKEN": SECRET,
           "PYTHONPATH": os.pathsep.join([SRC, str(scripts)])}
    if started.startswith("python -m"):
        argv, cwd = [sys.executable, "-m", "attack_driver"], home
    else:
        argv, cwd = [sys.executable, str(scripts / "attack_driver.py")], tmp_path
        env["PYTHONPATH"] = SRC
    proc = subprocess.run([*argv, TESTS, json.dumps(payloads), "--token", SECRET], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for key, result in results.items():
        assert result["ok"], (key, result)
        assert result["isolation"].startswith("namespaces"), (key, result["isolation"])
        assert SECRET not in json.dumps(result["value"]), (key, result["value"])
    for path_kind in ("warm", "cold"):
        seen = results[f"{path_kind} read_paths"]["value"]
        for path in paths:
            assert seen["results"][path].startswith(("FileNotFoundError", "PermissionError")), (path, seen)
        assert not any(p in (str(home), str(scripts)) for p in seen["sys_path"]), seen["sys_path"]
        loot = results[f"{path_kind} loot_processes"]["value"]
        assert loot["ppid"] in (0, 1), loot  # the job is the first process of its pid namespace (or bwrap's)


# -- a planted job tree ----------------------------------------------------------------------------
PLANTED_INIT = 'open({marker!r}, "w").write("imported"); _REAL_PACKAGE = "/planted"\n'

TREE_DRIVER = textwrap.dedent("""
    import json, os, stat
    from alignlings.grading.sandbox import WarmSandbox, job_tree

    with WarmSandbox(preload=[]) as sandbox:
        r = sandbox.run("alignlings.grading.sandbox.job:_probe_job", {})
    st = os.lstat(os.path.dirname(job_tree()))  # the folder made for the tree (removed at our exit)
    print(json.dumps({"tree": job_tree(), "ok": r.ok, "isolation": r.isolation, "error": r.error_message,
                      "folder": [stat.S_ISDIR(st.st_mode), st.st_uid, stat.S_IMODE(st.st_mode)]}))
""")


def _plant(top: Path, marker: Path) -> Path:
    """What another local user could leave at a computable path: a job tree whose package runs code."""
    _, digest = _job_tree_files()
    tree = top / f"jobtree-{digest}"
    (tree / "alignlings" / "practice").mkdir(parents=True)
    (tree / "alignlings" / "__init__.py").write_text(PLANTED_INIT.format(marker=str(marker)))
    (tree / "alignlings" / "practice" / "__init__.py").write_text("")
    for p in [top, *tree.rglob("*"), tree]:
        p.chmod(0o777)
    return tree


def _tree_run(cache: Path) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PYTHONPATH": SRC}
    proc = subprocess.run([sys.executable, "-c", TREE_DRIVER], env=env, cwd="/", capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _check_not_used(result: dict, planted: Path, marker: Path) -> None:
    assert result["ok"], result
    assert not marker.exists(), "the planted tree was imported"
    tree = Path(result["tree"])
    assert planted not in (tree, *tree.parents), result["tree"]
    assert result["folder"] == [True, os.geteuid(), 0o700], result  # made by that process: 0700, its own


def test_a_tree_planted_at_the_shared_temp_path_is_never_imported(tmp_path):
    """The cache folder under the temp dir (CI, containers, service accounts) sends job trees to
    /var/tmp/alignlings-UID, a path anyone can compute and anyone can create first."""
    top = Path(f"/var/tmp/alignlings-{os.geteuid()}")
    marker = tmp_path / "imported"
    made_top = not top.exists()
    if made_top:
        top.mkdir(mode=0o777)
    old_mode = stat.S_IMODE(top.lstat().st_mode)
    planted = _plant(top, marker)
    try:
        result = _tree_run(tmp_path / "cache")  # under /tmp: the shared path applies
        _check_not_used(result, planted, marker)
        assert stat.S_IMODE(top.lstat().st_mode) == 0o700  # ours: closed to others from now on
    finally:
        shutil.rmtree(planted, ignore_errors=True)
        if made_top:
            shutil.rmtree(top, ignore_errors=True)
        else:
            top.chmod(old_mode)


def test_a_cache_folder_someone_else_made_is_never_used(tmp_path):
    """The per-user folder itself planted: a symlink to the attacker's folder (any user can make
    one), or, as root, a folder another uid owns. Neither is used; a fresh private folder is."""
    base = Path(tempfile.mkdtemp(dir="/var/tmp"))  # not under /tmp: the cache folder is used as given
    try:
        marker = tmp_path / "imported"
        (base / "cache").mkdir()
        attacker = base / "attacker"
        attacker.mkdir()
        planted = _plant(attacker, marker)
        (base / "cache" / "alignlings").symlink_to(attacker)
        _check_not_used(_tree_run(base / "cache"), planted, marker)
        if os.geteuid() == 0:
            (base / "cache" / "alignlings").unlink()
            shutil.move(str(attacker), str(base / "cache" / "alignlings"))
            os.chown(base / "cache" / "alignlings", 65534, 65534)
            planted = base / "cache" / "alignlings" / planted.name
            _check_not_used(_tree_run(base / "cache"), planted, marker)
    finally:
        shutil.rmtree(base, ignore_errors=True)


# -- tasks, capabilities, results ------------------------------------------------------------------
def _no_uid_for_jobs() -> bool:
    """Root without CAP_SYS_ADMIN nor CAP_SETUID: jobs stay the host's uid 0, which RLIMIT_NPROC never binds."""
    return (_host_root_missing(CAP_SYS_ADMIN)
            and (_host_root_missing(CAP_SETUID) or _host_root_missing(CAP_SETGID)))


def _expected_task_limit() -> str:
    """The task limit this run's jobs must be under: "RLIMIT_NPROC", "pids cgroup" (jobs stay uid 0
    and a pids cgroup can be made) or "none" (then the isolation must say so). Set by the parent
    run that started this one (``test_the_attacks_hold_as_root_without``); else from our
    capabilities and whether our pids cgroup is writable."""
    given = os.environ.get("ALIGNLINGS_TEST_TASK_LIMIT")
    if given:
        return given
    if not _no_uid_for_jobs():
        return "RLIMIT_NPROC"
    return "pids cgroup" if _pids_cgroup_writable() else "none"


def _pids_cgroup_writable() -> bool:
    """Whether the cgroup holding us in a pids hierarchy can take child cgroups (root's to write)."""
    from alignlings.grading.sandbox.linux import _our_pids_cgroup

    ours = _our_pids_cgroup()
    return ours is not None and os.path.isfile(os.path.join(ours, "cgroup.procs")) and os.access(ours, os.W_OK)


def test_threads_are_limited(run):
    """1500 threads started before the task limit applied to jobs that may not fork; 509 as root
    without CAP_SYS_ADMIN, before its jobs got uids of their own."""
    result = run("start_threads", {"most": 3000}, limits=Limits(wall_seconds=30))
    assert result.ok, result
    expected = _expected_task_limit()
    if expected == "none":  # no limit can bind: said, and not counted as isolated
        assert "threads not limited" in result.isolation and not is_isolated(result.isolation), result.isolation
        return
    assert result.value["started"] < Limits().tasks, result.value
    assert "can't start new thread" in (result.value["error"] or ""), result.value
    assert f"at most {Limits().tasks} threads ({expected})" in result.isolation, result.isolation


def test_threads_are_limited_with_processes_allowed(run):
    result = run("start_threads", {"most": 3000}, limits=Limits(wall_seconds=30, processes=4, tasks=8))
    assert result.ok, result
    if _expected_task_limit() == "none":
        assert "threads not limited" in result.isolation, result.isolation
        return
    assert result.value["started"] < 8, result.value


def test_the_sandbox_cannot_be_undone_from_inside(run):
    result = run("undo_the_sandbox", {"mask": _package_dir()})
    assert result.ok, result
    value = result.value
    for attempt in ("umount mask", "remount / rw", "unshare user+mount"):
        assert value[attempt] != "done", (attempt, value)
    assert int(value["CapEff"], 16) == 0, value
    assert value["NoNewPrivs"] == "1", value


@pytest.mark.parametrize("processes", [1, 4])
def test_a_job_cannot_trace_or_read_any_other_process(run, processes):
    """Issue 29 §4: on a normal user's cold path bubblewrap's init has the job's uid; PTRACE_ATTACH
    worked and a stopped init hung the check. Every job's seccomp filter answers EPERM to ptrace,
    process_vm_readv/writev and pidfd_getfd, whatever the target (a pid that does not exist too, and
    the job itself, which the kernel would allow)."""
    result = run("read_other_processes", limits=Limits(wall_seconds=30, processes=processes))
    assert result.ok, result
    value = result.value
    eperm = value.pop("EPERM")
    assert value and all(rc == eperm for rc in value.values()), value


def test_a_job_that_stops_answering_ends_at_its_wall_limit(run):
    result = run("stop_answering", limits=Limits(wall_seconds=3, cpu_seconds=30))
    assert not result.ok and result.error_kind == "timeout", result
    assert result.error_message == "the code ran longer than 3 s and was stopped", result.error_message


@pytest.mark.parametrize("target", ["nested_result", "garbage_result"])
def test_an_unreadable_result_is_a_crash_with_a_reason(run, target):
    result = run(target)
    assert not result.ok and result.error_kind == "crashed", result
    assert "result could not be read" in result.error_message, result.error_message


@pytest.mark.parametrize(("message", "kind"), [
    ({"status": "exception", "forbidden": 5, "traceback": ["not", "text"], "memory": "yes"}, "forbidden"),
    ({"status": "exception", "forbidden": [{"a": 1}], "traceback": None}, "forbidden"),
    ({"status": "setup_error", "message": {"deep": [1, 2]}}, "crashed"),
    ({"status": "bad_value", "message": 3}, "exception"),
    ({"status": "weird"}, "crashed"),
    ({"no": "status"}, "crashed"),
])
def test_a_result_with_fields_of_the_wrong_type_is_reported_not_raised(run, message, kind):
    result = run("odd_result", {"message": message})
    assert not result.ok and result.error_kind == kind, result
    assert result.error_message


def test_a_valid_result_nested_too_deeply_is_a_crash(run):
    """500 levels decode fine but would break the caller's code that walks the value."""
    result = run("nested_result", {"depth": 500})
    assert not result.ok and result.error_kind == "crashed", result


# -- root without CAP_SYS_ADMIN (a default container) -----------------------------------------------
ROOT_WITHOUT = {  # what the child run lacks: (setpriv's capabilities, hide the cgroups, the task limit expected)
    "CAP_SYS_ADMIN": ("-sys_admin", False, "RLIMIT_NPROC"),
    "CAP_SYS_ADMIN and CAP_SETUID": ("-sys_admin,-setuid,-setgid", False, "pids cgroup"),  # "none" where not writable
    "CAP_SYS_ADMIN, CAP_SETUID and a writable cgroup": ("-sys_admin,-setuid,-setgid", True, "none"),
}


def _host_root_missing(cap: int) -> bool:
    return os.geteuid() == 0 and _in_initial_user_namespace() and not _effective_caps() >> cap & 1


def test_jobs_never_run_as_the_hosts_root(run):
    """The kernel never holds the host's uid 0 to RLIMIT_NPROC: a job that stays uid 0 (root
    without CAP_SYS_ADMIN, isolated through a user namespace) is under no task limit. As root, jobs
    get a uid of their own, with CAP_SYS_ADMIN or without; only without CAP_SETUID too can they not:
    then a pids cgroup each where one can be made, else the isolation says that threads are not
    limited and does not count as isolated."""
    result = run("probe_identity")
    assert result.ok, result
    if _no_uid_for_jobs():
        assert result.value["uid"] == 0, result.value
        limited = _expected_task_limit() == "pids cgroup"
        assert is_isolated(result.isolation) == limited, result.isolation
        assert ("threads not limited" in result.isolation) != limited, result.isolation
        return
    assert result.value["uid"] != 0 and result.value["gid"] != 0, result.value
    assert 0 not in result.value["groups"], result.value
    assert is_isolated(result.isolation), result.isolation


@pytest.mark.parametrize("without", list(ROOT_WITHOUT))
def test_the_attacks_hold_as_root_without(without):
    """As root: this whole file once more as root without `without` (``setpriv`` drops it from the
    bounding set, so the child never has it), nothing skipped. The thread attack there started 509
    threads on both paths before jobs got uids of their own. Without CAP_SETUID as well, jobs stay
    uid 0: a pids cgroup each is their task limit; where the cgroups cannot be written either (here
    hidden under a read-only tmpfs, in a mount namespace of the child's), none binds and the tests
    there check that the isolation says so."""
    if os.geteuid() != 0 or not _in_initial_user_namespace() or _host_root_missing(CAP_SYS_ADMIN):
        assert (Path(TESTS) / "test_isolation_attacks.py").is_file()  # this is such a run (or not root)
        return
    caps, hide_cgroups, expected = ROOT_WITHOUT[without]
    if expected == "pids cgroup" and not _pids_cgroup_writable():  # e.g. a read-only /sys/fs/cgroup
        expected = "none"
    env = {**os.environ, "ALIGNLINGS_STRICT": "1", "ALIGNLINGS_TEST_TASK_LIMIT": expected,
           "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    prefix = (["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs -o ro tmpfs /sys/fs/cgroup && exec "$@"', "sh"] if hide_cgroups else [])
    proc = subprocess.run([*prefix, "setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}", sys.executable, "-m",
                           "pytest", "-q", "-x", "-p", "no:cacheprovider", "-rs", "-k", "not as_root_without", __file__],
                          env=env, cwd="/", capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and "skipped" not in summary, summary
