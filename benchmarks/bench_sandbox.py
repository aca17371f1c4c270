"""Per-job cost of the grader's sandbox: cold ``run_job`` against warm ``WarmSandbox``.

Each job does a small torch op, so the cold path pays the interpreter start and the torch import
(~1 s) every time, and the warm path only a fork from a server that imported torch once.
Timing goals are reported here, never asserted in tests.

    PYTHONPATH=src python3 benchmarks/bench_sandbox.py [--jobs 50]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Callable

# This file is also the jobs' module ("bench_sandbox:tiny_torch_job"): keep its imports light, or
# every warm job pays for them.

HERE = Path(__file__).resolve().parent
TARGET = "bench_sandbox:tiny_torch_job"


def tiny_torch_job(payload: dict) -> float:
    """The job: an 8x8 matmul, enough to touch torch's CPU kernels."""
    import torch

    x = torch.ones(8, 8) * payload.get("scale", 1.0)
    return float((x @ x).sum())


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile, q in [0, 100]."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def measure(run: Callable[[], object], jobs: int) -> tuple[list[float], object]:
    """Wall seconds of each of `jobs` calls, and the last result (to check it and read .isolation)."""
    times, result = [], None
    for _ in range(jobs):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
        if not result.ok:
            raise RuntimeError(f"benchmark job failed: {result.error_kind}: {result.error_message}")
    return times, result


def process_cpu(pid: int) -> float:
    """CPU seconds of `pid` and of its reaped children (the warm server and its jobs)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime


def summary(name: str, times: list[float]) -> dict[str, float]:
    row = {"p50": percentile(times, 50), "p95": percentile(times, 95), "mean": sum(times) / len(times)}
    print(f"{name:<6} p50 {row['p50'] * 1e3:8.1f} ms   p95 {row['p95'] * 1e3:8.1f} ms   "
          f"mean {row['mean'] * 1e3:8.1f} ms")
    return row


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50, help="jobs per path (default 50)")
    args = parser.parse_args(argv)

    from alignlings.grading.sandbox import Limits, WarmSandbox, run_job

    limits = Limits(wall_seconds=60)
    extra = [str(HERE)]
    print(f"{args.jobs} jobs per path, CPUs {os.cpu_count()}, load average before {os.getloadavg()[0]:.2f}")

    cold_times, cold = measure(lambda: run_job(TARGET, {"scale": 1.0}, limits=limits, extra_pythonpath=extra),
                               args.jobs)
    print(f"cold isolation: {cold.isolation}")
    cold_row = summary("cold", cold_times)

    started = time.perf_counter()
    # the job's module is preloaded too, as the grader preloads its runner: what is left is the
    # sandbox's own cost plus the op
    with WarmSandbox(preload=["torch", "bench_sandbox"], extra_pythonpath=extra) as warm:
        print(f"warm isolation: {warm.isolation} (server ready in {time.perf_counter() - started:.2f} s)")
        measure(lambda: warm.run(TARGET, {}, limits=limits), 3)  # first forks fault in shared pages
        server_cpu, own_cpu = process_cpu(warm.server_pid), os.times()
        warm_times, _ = measure(lambda: warm.run(TARGET, {"scale": 1.0}, limits=limits), args.jobs)
        server_cpu = (process_cpu(warm.server_pid) - server_cpu) / args.jobs
        own = os.times()
        own_cpu = (own.user + own.system - own_cpu.user - own_cpu.system) / args.jobs
    warm_row = summary("warm", warm_times)
    # CPU per job does not depend on what else the machine runs; wall time does
    print(f"warm CPU per job: server+job {server_cpu * 1e3:.1f} ms, caller {own_cpu * 1e3:.1f} ms")

    print(f"cold/warm: p50 x{cold_row['p50'] / warm_row['p50']:.1f}, p95 x{cold_row['p95'] / warm_row['p95']:.1f}")
    print(f"load average after {os.getloadavg()[0]:.2f} (other work on the machine inflates both paths)")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
