"""Grading latency of dpo-loss, cold vs warm, with per-blank verdicts and isolation included.

- cold: a fresh `alignlings check dpo-loss FILE --json` process each time (imports torch, starts the
  bubblewrap sandbox), compared with a bare `python -c "import torch"`;
- warm: one long-lived Grader(warm=True) (a fork server with torch imported) as used by watch mode
  and the web app.
The submission fills one blank wrongly (a known misconception), so every check also runs the
per-blank splices and the misconception matching.

    python benchmarks/bench_grading.py [--warm-n 50] [--cold-n 10]
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
    args = ap.parse_args()

    from alignlings.practice import blanks as bl
    from alignlings.practice.grader import Grader
    from alignlings.practice.pack import load_pack

    pack = load_pack()
    ex = pack.get("dpo-loss")
    blanks = bl.find_blanks(ex.solution_source)
    fills = {b.index: b.answer for b in blanks}
    fills[4] = "-torch.log(torch.sigmoid(margin)).mean()"  # the log-of-sigmoid misconception
    code = bl.render(ex.solution_source, blanks, fills)
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

    t_imp = statistics.median(torch_import)
    print(f"isolation (warm): {isolation}")
    print(f"{'':28} {'p50':>9} {'p95':>9}")
    print(f"{'python -c import torch':28} {t_imp * 1e3:8.0f}ms {pct(torch_import, .95) * 1e3:8.0f}ms")
    print(f"{'cold: alignlings check':28} {statistics.median(cold) * 1e3:8.0f}ms {pct(cold, .95) * 1e3:8.0f}ms")
    print(f"{'warm: Grader(warm=True)':28} {statistics.median(warm) * 1e3:8.0f}ms {pct(warm, .95) * 1e3:8.0f}ms")
    print(f"cold - torch import: {(statistics.median(cold) - t_imp):.2f} s (goal <= 0.5 s); "
          f"cold / warm: {statistics.median(cold) / statistics.median(warm):.0f}x; "
          f"warm p50 goal < 50 ms")


if __name__ == "__main__":
    main()
