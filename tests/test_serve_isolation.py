"""`alignlings serve` never grades without isolation quietly (issue 19).

A machine where grading cannot make namespaces is made for real: the server runs inside a user
namespace whose own limit on user namespaces is 0 (``unshare --user`` and
``/proc/sys/user/max_user_namespaces``), so neither the root path (no host root there) nor a user
namespace of the fork server's own works, as in a default container. There a class or a server on
a non-loopback address refuses to start and says what is missing; ``--allow-unisolated`` starts it
with a banner on every page; on loopback it starts with a warning.
"""

from __future__ import annotations


import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
from markupsafe import escape
import pytest

from alignlings import i18n

pytestmark = pytest.mark.slow
SRC = str(Path(__file__).resolve().parents[1] / "src")
SERVE = [sys.executable, "-c", "from alignlings.cli.app import main; main()", "serve", "--port", "0", "--no-browser"]
NO_NAMESPACES = ["unshare", "--user", "--map-root-user", "sh", "-c",
                 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"', "sh"]


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "ALIGNLINGS_HOME": str(home), "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


def test_the_no_namespace_machine_is_real():
    """The set-up above does take namespaces away (else the tests below prove nothing)."""
    assert shutil.which("unshare"), "util-linux's unshare is needed"
    code = "from alignlings.grading.sandbox import warm_isolation; print(warm_isolation())"
    proc = subprocess.run([*NO_NAMESPACES, sys.executable, "-c", code], env=_env(Path("/")), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("(False, 'rlimits only"), proc.stdout


@pytest.mark.parametrize("args", [["--classroom"], ["--host", "0.0.0.0"]], ids=["classroom", "lan"])
def test_a_shared_server_refuses_to_grade_without_isolation(tmp_path, args):
    proc = subprocess.run([*NO_NAMESPACES, *SERVE, *args], env=_env(tmp_path), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Refusing to serve" in proc.stderr and "without isolation" in proc.stderr, proc.stderr
    assert "user namespaces" in proc.stderr and "--allow-unisolated" in proc.stderr, proc.stderr
    assert "serving at" not in proc.stdout


ROOT_WITHOUT_SETUID = ["unshare", "--mount", "--propagation", "private", "sh", "-c",  # no writable pids cgroup either
                       'mount -t tmpfs -o ro tmpfs /sys/fs/cgroup && exec "$@"', "sh",
                       "setpriv", "--bounding-set=-sys_admin,-setuid,-setgid", "--inh-caps=-sys_admin,-setuid,-setgid"]


def _as_root() -> bool:
    with open("/proc/self/uid_map") as f:
        return os.geteuid() == 0 and f.read().split() == ["0", "0", "4294967295"]


def test_a_class_refuses_to_start_where_no_task_limit_binds(tmp_path):
    """Root without CAP_SYS_ADMIN and without CAP_SETUID, where no pids cgroup can be made either
    (the cgroups hidden under a read-only tmpfs): jobs get namespaces (through a user namespace) but
    stay the host's uid 0, which RLIMIT_NPROC never binds, so one learner could start threads
    without end. That is not isolated: a class refuses, and says what is missing."""
    if not _as_root():  # a normal user's jobs always have their own user namespace, hence a task limit
        from alignlings.grading.sandbox import is_isolated
        assert not is_isolated("namespaces (own pid namespace, threads not limited (no uid of its own))")
        return
    code = "from alignlings.grading.sandbox import warm_isolation; print(warm_isolation())"
    probe = subprocess.run([*ROOT_WITHOUT_SETUID, sys.executable, "-c", code], env=_env(Path("/")),
                           capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.startswith("(False, 'namespaces") and "threads not limited" in probe.stdout, probe.stdout
    proc = subprocess.run([*ROOT_WITHOUT_SETUID, *SERVE, "--classroom"], env=_env(tmp_path), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Refusing to serve" in proc.stderr and "threads not limited" in proc.stderr, proc.stderr
    assert "CAP_SETUID" in proc.stderr and "--allow-unisolated" in proc.stderr, proc.stderr


def _serve_and_get(cmd: list[str], home: Path, paths: list[str]) -> tuple[list[str], list[str]]:
    """Start the server, GET each path once it serves, stop it: (page texts, its output)."""
    proc = subprocess.Popen(cmd, env=_env(home), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            lines.append(line)
            if "serving at" in line:
                found.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert found.wait(120), "".join(lines)
        url = re.search(r"(http://[^/\s]+)", next(x for x in lines if "serving at" in x)).group(1)
        pages = []
        for path in paths:
            deadline = time.time() + 60
            while True:
                try:
                    pages.append(httpx.get(url + path, timeout=10).text)
                    break
                except httpx.HTTPError:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.3)
        return pages, lines
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_allow_unisolated_starts_the_class_with_a_banner_on_every_page(tmp_path):
    en, zh = (str(escape(i18n.t("web.ui.unisolated_banner", lang))) for lang in ("en", "zh"))
    pages, lines = _serve_and_get([*NO_NAMESPACES, *SERVE, "--classroom", "--allow-unisolated"], tmp_path,
                                  ["/join", "/join?lang=zh"])
    assert en in pages[0] and 'id="unisolated-banner"' in pages[0], pages[0][:2000]
    assert zh in pages[1], pages[1][:2000]
    assert any("without isolation" in line for line in lines), lines


def test_a_loopback_server_warns_and_an_isolated_class_shows_no_banner(tmp_path):
    pages, lines = _serve_and_get([*NO_NAMESPACES, *SERVE], tmp_path / "a", ["/"])
    assert any("Warning: learner code is graded without isolation" in line for line in lines), lines
    assert 'id="unisolated-banner"' not in pages[0]  # no flag given: a warning in the terminal only
    pages, lines = _serve_and_get([*SERVE, "--classroom"], tmp_path / "b", ["/join"])
    assert 'id="unisolated-banner"' not in pages[0]
    assert not any("without isolation" in line for line in lines), lines
