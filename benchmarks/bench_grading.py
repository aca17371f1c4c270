"""Grading latency of dpo-loss, cold vs warm, with per-blank verdicts and isolation included.

- cold: a fresh `alignlings check dpo-loss FILE --json` process each time (imports torch, starts the
  bubblewrap sandbox), compared with a bare `python -c "import torch"`;
- warm: one long-lived Grader(warm=True) (a fork server with torch imported) as used by watch mode
  and the web app.
The submission fills one blank wrongly (a known misconception): its blank is judged on the trusted
side and the misconception matched. Since every blank before it is right, its recorded scope is the
reference's own, whose trusted judgement is kept with the reference's values: no judging job. The
second warm line ("warm, 2 wrong") also fills blank 1 wrongly, so blank 4 sees other values than the
reference did and its records go to a trusted judging job after the learner's: what a check costs
when a job must judge.

    python benchmarks/bench_grading.py [--warm-n 50] [--cold-n 10] [--before GITREF]

With ``--before REF`` the same measurement also runs on that commit (checked out in a temporary git
worktree and imported through PYTHONPATH), in the same run, and the ratios are printed side by
side: e.g. ``--before 27edda3`` compares with the grader that judged in the learner's process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warm-n", type=int, default=50)
    ap.add_argument("--cold-n", type=int, default=10)
    ap.add_argument("--before", help="also measure this git commit, side by side")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one measurement, as JSON
    args = ap.parse_args()
    if args.before:
        return compare(args)
    measure(args)


def _run_measure(args, src: str | None) -> dict:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, __file__, "--json", "--warm-n", str(args.warm_n), "--cold-n",
                           str(args.cold_n)], capture_output=True, text=True, env=env, check=True)
    import json

    return json.loads(proc.stdout.strip().splitlines()[-1])


def compare(args) -> None:
    repo = Path(__file__).resolve().parents[1]
    tree = Path(tempfile.mkdtemp()) / "before"
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(tree), args.before], check=True,
                   capture_output=True)
    try:
        before = _run_measure(args, str(tree / "src"))
        after = _run_measure(args, None)
    finally:
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)], capture_output=True)
    print(f"{'':30} {'before p50':>11} {'after p50':>10} {'after/before':>13}")
    for key, label in (("torch", "python -c import torch"), ("cold", "cold: alignlings check"),
                       ("warm", "warm: Grader(warm=True)"), ("warm2", "warm, 2 wrong (judging job)")):
        if key not in before or key not in after:
            continue
        b, a = before[key]["p50"], after[key]["p50"]
        print(f"{label:30} {b * 1e3:9.0f}ms {a * 1e3:8.0f}ms {a / b:12.2f}x")
    print(f"cold - torch import: before {before['cold']['p50'] - before['torch']['p50']:.2f} s, "
          f"after {after['cold']['p50'] - after['torch']['p50']:.2f} s (goal <= 1 s); warm p50 goal < 50 ms")
    print(f"isolation after: {after['isolation']}")


def measure(args) -> None:
    from alignlings.content import blanks as bl
    from alignlings.grading.grader import Grader
    from alignlings.content.pack import load_pack

    pack = load_pack()
    ex = pack.get("dpo-loss")
    blanks = bl.find_blanks(ex.solution_source)
    fills = {b.index: b.answer for b in blanks}
    fills[4] = "-torch.log(torch.sigmoid(margin)).mean()"  # the log-of-sigmoid misconception
    code = bl.render(ex.solution_source, blanks, fills)
    fills[1] = "policy_chosen_logp"  # reference-free: every later blank sees other values
    code2 = bl.render(ex.solution_source, blanks, fills)
    tmp = Path(tempfile.mkdtemp())
    path = tmp / "dpo_loss.py"
    path.write_text(code)
    env = dict(os.environ, ALIGNLINGS_HOME=str(tmp / "home"))

    torch_import = []
    for _ in range(max(3, args.cold_n // 2)):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True, env=env)
        torch_import.append(time.perf_counter() - start)

    cold = []
    exe = Path(sys.executable).with_name("alignlings")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "alignlings"]
    for _ in range(args.cold_n):
        start = time.perf_counter()
        proc = subprocess.run([*cmd, "check", "dpo-loss", str(path), "--json"], capture_output=True, env=env)
        cold.append(time.perf_counter() - start)
        assert proc.returncode == 1, proc.stderr.decode()[-2000:]

    os.environ["ALIGNLINGS_HOME"] = str(tmp / "home")
    warm = []
    with Grader(pack, warm=True) as grader:
        verdict = grader.check("dpo-loss", code)  # starts the fork server
        isolation = verdict["isolation"]
        assert verdict["blanks"][3]["misconception"] == "log-of-sigmoid"
        for _ in range(args.warm_n):
            start = time.perf_counter()
            v = grader.check("dpo-loss", code)
            warm.append(time.perf_counter() - start)
            assert not v["passed"] and v["blanks"][3]["misconception"] == "log-of-sigmoid"
        warm2 = []
        for _ in range(args.warm_n):
            start = time.perf_counter()
            v = grader.check("dpo-loss", code2)
            warm2.append(time.perf_counter() - start)
            assert not v["passed"] and v["blanks"][0]["misconception"] == "reference-free"

    t_imp = statistics.median(torch_import)
    if args.json:
        import json

        print(json.dumps({"isolation": isolation, **{k: {"p50": statistics.median(v), "p95": pct(v, .95)}
                                                      for k, v in (("torch", torch_import), ("cold", cold),
                                                                   ("warm", warm), ("warm2", warm2))}}))
        return
    print(f"isolation (warm): {isolation}")
    print(f"{'':28} {'p50':>9} {'p95':>9}")
    print(f"{'python -c import torch':28} {t_imp * 1e3:8.0f}ms {pct(torch_import, .95) * 1e3:8.0f}ms")
    print(f"{'cold: alignlings check':28} {statistics.median(cold) * 1e3:8.0f}ms {pct(cold, .95) * 1e3:8.0f}ms")
    print(f"{'warm: Grader(warm=True)':28} {statistics.median(warm) * 1e3:8.0f}ms {pct(warm, .95) * 1e3:8.0f}ms")
    print(f"{'warm, 2 wrong (judging job)':28} {statistics.median(warm2) * 1e3:8.0f}ms {pct(warm2, .95) * 1e3:8.0f}ms")
    print(f"cold - torch import: {(statistics.median(cold) - t_imp):.2f} s (goal <= 1 s); "
          f"cold / warm: {statistics.median(cold) / statistics.median(warm):.0f}x; "
          f"warm p50 goal < 50 ms")


if __name__ == "__main__":
    main()
