"""Right answers do not fail on a busy machine, and a case that runs out of time says so (issue 19 §4).

- A case still running when the cases' time is up is reported by name, "timed out after N s"; the
  cases after it are reported as not run (before, the whole job was killed without a word).
- The time limits scale with the machine's measured speed and load (``machine_slowness``).
- Slow: with ten CPU burners on this machine, the reference fills of grpo-off-policy and toy-dpo
  still pass through the CLI's grader (a fork server per check), as they must on a 2-core machine
  at a load of 10.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from alignlings.grading import grader as gr
from alignlings.content import skeleton
from alignlings.grading.grader import Grader
from alignlings.content.pack import load_pack

SLOW_ON_ONE_BATCH = '''import time

import torch


def tiny_ex(x: torch.Tensor, beta: float = 0.1) -> torch.Tensor:
    if x.numel() == 16:  # the "random batch" case only
        while True:
            time.sleep(0.05)
    return (beta * x).mean()
'''


@pytest.fixture()
def tiny(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    skeleton.write(tmp_path / "pack", "tiny-ex")
    toml = tmp_path / "pack" / "tiny-ex" / "exercise.toml"
    toml.write_text(toml.read_text().replace("timeout = 10 ", "timeout = 2 "))
    return load_pack(tmp_path / "pack")


def test_a_case_that_runs_out_of_time_is_named(tiny, monkeypatch):
    monkeypatch.setattr(gr, "machine_slowness", lambda: 1.5)
    with Grader(tiny) as grader:
        verdict = grader.check("tiny-ex", SLOW_ON_ONE_BATCH, run_main=False)
        by_name = {c["name"]: c for c in verdict["cases"]}
        assert verdict["error"] is None and not verdict["passed"]
        assert by_name["statement data"]["passed"]
        assert by_name["random batch"]["message"] == "case 'random batch' timed out after 3.0 s"
        assert "was not run" in by_name["another batch"]["message"]
        zh = grader.check("tiny-ex", SLOW_ON_ONE_BATCH, run_main=False, lang="zh")
        assert "用例「random batch」运行超时：3.0 秒后被停止" in [c["message"] for c in zh["cases"]]


def _limits_at(grader, ex, monkeypatch, speed: float, load: float):
    monkeypatch.setattr(gr, "machine_speed", lambda: speed)
    monkeypatch.setattr(gr, "machine_load", lambda: load)
    return grader._limits(ex)


def test_wall_limits_scale_with_speed_and_load_cpu_limits_with_speed_only(tiny, monkeypatch):
    """Issue 29 §4: a runaway fill ran 5 min 20 s on a 10 s exercise under load (RLIMIT_CPU 1157 s).
    The CPU-time limit follows the calibrated speed only; the wall limit is the generous one."""
    ex = tiny.get("tiny-ex")
    with Grader(tiny) as grader:
        calm, calm_cases = _limits_at(grader, ex, monkeypatch, 1.0, 1.0)
        busy, busy_cases = _limits_at(grader, ex, monkeypatch, 1.0, 8.0)
        slow, _ = _limits_at(grader, ex, monkeypatch, 2.0, 1.0)
        trusted, _ = grader._limits(ex, trusted=True, variants=4)  # still at speed 2, load 1
    assert busy_cases == 8 * calm_cases == 8 * ex.timeout
    assert busy.wall_seconds == pytest.approx(8 * calm.wall_seconds)
    assert busy.cpu_seconds == calm.cpu_seconds  # the load never raises the CPU limit
    assert calm.cpu_seconds <= 2 * ex.timeout + 4  # near the stated limit (a margin and the job's start)
    assert slow.cpu_seconds > calm.cpu_seconds  # a slower machine (calibrated) gets more
    assert trusted.cpu_seconds <= 2 * (4 * 2 * ex.timeout + 4)  # once per variant


def test_a_timeout_says_which_limit_was_hit():
    from types import SimpleNamespace

    ex = SimpleNamespace(timeout=10.0)
    cpu = SimpleNamespace(error_message="the code used more than 17 s of CPU time and was stopped",
                          cpu_limit=17, case_seconds=40.0)
    wall = SimpleNamespace(error_message="the code ran longer than 42 s and was stopped", cpu_limit=17,
                           case_seconds=40.0)
    assert "17 s of CPU time" in gr._timed_out(cpu, ex, "en") and "speed only" in gr._timed_out(cpu, ex, "en")
    assert "CPU 时间" in gr._timed_out(cpu, ex, "zh")
    assert "wall-clock" in gr._timed_out(wall, ex, "en") and "40 s" in gr._timed_out(wall, ex, "en")
    assert "墙钟" in gr._timed_out(wall, ex, "zh")


def test_slowness_reads_the_load_and_is_bounded(monkeypatch):
    monkeypatch.setattr(gr, "_speed", 2.0)
    assert 2.0 <= gr.machine_slowness() <= 2.0 * 8
    assert 1.0 <= gr.machine_load() <= 8.0


def _cpu_ticks(pid: int) -> int:
    """utime + stime of a process, in clock ticks (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _wait_until_spinning(procs, ticks: int = 30) -> None:
    """Until every burner has spent ``ticks`` of CPU (0.3 s: beyond its start-up, so in its loop); a
    condition, not a fixed sleep."""
    deadline = time.monotonic() + 120
    while not all(_cpu_ticks(p.pid) >= ticks for p in procs):
        assert time.monotonic() < deadline, "the CPU burners never started spinning"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("exercise_id", ["grpo-off-policy", "toy-dpo"])
def test_reference_fills_pass_at_a_load_of_ten(exercise_id, tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    pack = load_pack("dpo-grpo")
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(10)]
    try:
        _wait_until_spinning(burners)  # the instantaneous load is about 10 on top of ours
        with Grader(pack) as grader:  # the CLI's path: a fork server for this check alone
            ex = pack.get(exercise_id)
            verdict = grader.check(exercise_id, fills=[b.answer for b in grader.blanks(ex)])  # as `check` runs it
        assert verdict["passed"], (verdict["error"], [c["message"] for c in verdict["cases"] if not c["passed"]],
                                   [b["message"] for b in verdict["blanks"] if b["passed"] is not True])
    finally:
        for p in burners:
            p.kill()
        for p in burners:
            p.wait()
