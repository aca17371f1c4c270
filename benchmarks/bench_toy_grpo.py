"""Benchmark: ``alignlings train toy-grpo --json`` against a plain script running the same algorithm.

Both are timed as whole processes (interpreter start, imports, model building, 40 iterations,
JSON output), interleaved so that load on the machine hits both alike. The plain script is written
to a temporary file: torch + transformers, the identical exercise-6 steps, one torch thread (as the
library uses), no typer, rich or alignlings. The CLI pays on top for typer (which coerces every
option through pydantic, so pydantic is imported too), rich's progress bar and the alignlings
package, about 0.2-0.3 s; it wins that back by pausing the garbage collector during the torch +
transformers import (alignlings.cli.train_toy._gc_paused), which the plain script does not do.

Usage: python benchmarks/bench_toy_grpo.py [--runs 5] [--seed 0]
Reports (never asserts): median and min wall and CPU seconds of each, the ratios CLI / plain, the
bare CLI start (``alignlings --help``), and whether both produced the same P("a") curve. CPU time
is the steadier number on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLAIN_SCRIPT = r'''
import copy, json, sys, time
import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel

seed = int(sys.argv[1]); iterations = 40; G = 32; TARGET, BOS = 0, 9
torch.set_num_threads(1)
torch.manual_seed(seed)
policy = GPT2LMHeadModel(GPT2Config(vocab_size=10, n_positions=4, n_embd=16, n_layer=1, n_head=2,
                                    bos_token_id=BOS, eos_token_id=BOS)).eval()
ref = copy.deepcopy(policy).requires_grad_(False)
old = copy.deepcopy(policy).requires_grad_(False)
prompt = torch.tensor([[BOS]])
opt = torch.optim.Adam(policy.parameters(), lr=3e-3)
last = lambda m: m(input_ids=prompt, use_cache=False).logits[0, -1]
with torch.no_grad():
    ref_lp_all = F.log_softmax(last(ref), -1)
    p_target = [F.softmax(last(policy), -1)[TARGET].item()]
losses = []
start = time.perf_counter()
for it in range(iterations):
    with torch.no_grad():
        old_logits = last(old)
        samples = torch.multinomial(F.softmax(old_logits, -1), G, replacement=True)
        old_lp = F.log_softmax(old_logits, -1)[samples]
        ref_lp = ref_lp_all[samples]
    rewards = (samples == TARGET).float()
    adv = (rewards - rewards.mean()) / (rewards.std() + 1e-8)
    step = []
    for _ in range(2):
        lp = F.log_softmax(last(policy), -1)[samples]
        ratio = torch.exp(lp - old_lp)
        pg = torch.min(ratio * adv, torch.clamp(ratio, 0.8, 1.2) * adv)
        log_r = ref_lp - lp
        kl = torch.expm1(log_r) - log_r  # k3 = r - log r - 1, as alignlings.losses.kl.kl_k3
        loss = -(pg - 0.04 * kl).mean()
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
        step.append(loss.item())
    old.load_state_dict(policy.state_dict())
    with torch.no_grad():
        p_target.append(F.softmax(last(policy), -1)[TARGET].item())
    losses.append(sum(step) / len(step))
print(json.dumps({"p_target_initial": p_target[0], "p_target_final": p_target[-1], "iterations": iterations,
                  "train_seconds": time.perf_counter() - start, "seed": seed, "p_target": p_target, "loss": losses}))
'''


def _cli_command() -> list[str]:
    # The console script next to this interpreter: a version manager's shim on PATH (pyenv's is a
    # bash script that execs pyenv) would add its own start-up to the CLI's time.
    script = Path(sys.executable).parent / "alignlings"
    if script.is_file():
        return [str(script)]
    return [shutil.which("alignlings") or "alignlings"]


def _time(cmd: list[str]) -> tuple[float, float, dict | None]:
    """Wall seconds, CPU seconds (user + sys of the child) and the JSON of the last stdout line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = proc.stdout.strip().splitlines()
    return elapsed, cpu, (json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each (default 5)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    wall: dict[str, list[float]] = {"cli": [], "plain": [], "help": []}
    cpu: dict[str, list[float]] = {"cli": [], "plain": [], "help": []}
    outputs: dict[str, dict | None] = {}
    with tempfile.TemporaryDirectory() as tmp:
        plain_path = Path(tmp) / "plain_toy_grpo.py"
        plain_path.write_text(PLAIN_SCRIPT)
        commands = {
            "cli": _cli_command() + ["train", "toy-grpo", "--json", "--seed", str(args.seed)],
            "plain": [sys.executable, str(plain_path), str(args.seed)],
            "help": _cli_command() + ["--help"],
        }
        _time(commands["plain"])  # warm the file cache for torch/transformers so run 1 is not an outlier
        for i in range(args.runs):
            # alternate which goes first so slow phases of a busy machine fall on both
            order = ["cli", "plain", "help"] if i % 2 == 0 else ["plain", "cli", "help"]
            for name in order:
                w, c, out = _time(commands[name])
                wall[name].append(w)
                cpu[name].append(c)
                outputs[name] = out

    def row(label: str, name: str) -> str:
        out = outputs.get(name)
        train = f"   train {out['train_seconds']:.3f} s" if out else ""
        return (f"{label:<27} wall median {statistics.median(wall[name]):6.2f} s (min {min(wall[name]):5.2f})   "
                f"CPU median {statistics.median(cpu[name]):6.2f} s (min {min(cpu[name]):5.2f}){train}")

    print(f"toy GRPO, seed {args.seed}, {args.runs} interleaved runs each, whole process")
    print(row("alignlings train toy-grpo", "cli"))
    print(row("plain script", "plain"))
    print(row("alignlings --help", "help"))
    for what, data in (("wall", wall), ("CPU", cpu)):
        med = statistics.median(data["cli"]) / statistics.median(data["plain"])
        low = min(data["cli"]) / min(data["plain"])
        print(f"ratio CLI / plain ({what}): median {med:.3f}, min {low:.3f}")
    cli_out, plain_out = outputs.get("cli"), outputs.get("plain")
    if cli_out and plain_out:
        same = cli_out["p_target"] == plain_out["p_target"]
        print(f"P(a) final: CLI {cli_out['p_target_final']:.4f}, plain {plain_out['p_target_final']:.4f} "
              f"({'identical curves' if same else 'curves differ'})")


if __name__ == "__main__":
    main()
