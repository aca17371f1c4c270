"""Steps per second and peak memory: alignlings' GRPOTrainer / DPOTrainer against TRL 1.16's.

    python benchmarks/bench_trainers.py                 # all four, side by side, 3 repeats each
    python benchmarks/bench_trainers.py --repeats 1 --steps 40
    python benchmarks/bench_trainers.py --profile ours-dpo   # one case in this process, cProfile'd

Same model, data and settings for both libraries: a tiny random GPT-2 (2 layers, 64 wide) over the
toy character vocabulary, saved to a temporary folder and loaded from there by both (TRL reloads its
DPO reference from ``config._name_or_path``). GRPO: G = 8 completions of one prompt per step, 16 new
tokens at temperature 1, beta = 0 (TRL's default), a cheap reward function. DPO: 8 pairs per step,
beta = 0.1, reference log-probs per batch. Both on the CPU in float32 (TRL: ``use_cpu=True``,
``bf16=False``), AdamW, logging every 10 steps, no checkpoints, one torch thread each (``--threads``;
for a 64-wide model a second thread costs more in hand-offs than it saves, for both libraries).

Each (library, trainer) pair runs in its own subprocess so peak RSS (``ru_maxrss``: imports, model,
optimiser, activations) is its own. Steps/s is measured over the steps after the first
``--warmup`` (allocator and first-call costs excluded), by the wall clock and by the process's own
CPU time (``time.process_time``; on a shared machine other jobs' time does not count there, so its
ratio is the steadier one). The 1-minute load average before and after each run is recorded.
Results: median over ``--repeats``, printed as a table and, when all four cases ran, written to
``benchmarks/results/bench_trainers.{json,md}``. Timing goals live here, not in the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
CASES = ("ours-grpo", "trl-grpo", "ours-dpo", "trl-dpo")


def _prepare(folder: Path) -> None:
    """Save the tiny model and tokenizer, and the prompt / pair datasets, into ``folder``."""
    from alignlings.trainers import toy

    tok = toy.make_tokenizer()
    model = toy.make_model(tok, n_layer=2, n_embd=64, n_head=4, n_positions=64, seed=0)
    model.save_pretrained(folder / "model")
    tok.save_pretrained(folder / "model")
    train, _ = toy.addition_rows(0)
    prompts = [{"prompt": r["prompt"], "answer": r["answer"]} for r in train[:512]]
    pairs = [{"prompt": r["prompt"], "chosen": r["answer"], "rejected": str(int(r["answer"]) + 1)} for r in train[:512]]
    (folder / "prompts.json").write_text(json.dumps(prompts))
    (folder / "pairs.json").write_text(json.dumps(pairs))


def digit_count_reward(prompts, completions, **kwargs):
    """A cheap reward: the number of digits in the completion (the model is random anyway)."""
    return [float(sum(ch.isdigit() for ch in c)) for c in completions]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _run_case(case: str, folder: Path, steps: int, warmup: int, threads: int, profile: bool = False) -> dict:
    """One measurement in this (fresh) process; with ``profile``, training runs under cProfile and the
    30 costliest calls (cumulative time) are printed to stderr."""
    t0 = time.perf_counter()
    import torch

    if threads:
        torch.set_num_threads(threads)
    lib, kind = case.split("-")
    if lib == "trl":
        import datasets
        import trl  # noqa: F401
    else:
        import alignlings.trainers  # noqa: F401  (takes plain lists: no datasets / pyarrow import)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import_s = time.perf_counter() - t0
    tok = AutoTokenizer.from_pretrained(folder / "model")
    model = AutoModelForCausalLM.from_pretrained(folder / "model")
    data = json.loads((folder / ("prompts.json" if kind == "grpo" else "pairs.json")).read_text())
    out = tempfile.mkdtemp(prefix=f"bench_{case}_")
    stamps: list[float] = []
    common = dict(output_dir=out, learning_rate=1e-6, per_device_train_batch_size=8, max_steps=steps, seed=0,
                  logging_steps=10)

    if lib == "trl":
        from transformers import TrainerCallback

        class Stamp(TrainerCallback):
            def on_step_end(self, args, state, control, **kw):
                stamps.append((time.perf_counter(), time.process_time()))

        trl_common = dict(common, use_cpu=True, bf16=False, save_strategy="no", report_to=[], disable_tqdm=True)
        if kind == "grpo":
            from trl import GRPOConfig, GRPOTrainer

            cfg = GRPOConfig(**trl_common, num_generations=8, max_completion_length=16, temperature=1.0, beta=0.0)
            trainer = GRPOTrainer(model=model, reward_funcs=digit_count_reward, args=cfg,
                                  train_dataset=datasets.Dataset.from_list(data), processing_class=tok,
                                  callbacks=[Stamp()])
        else:
            from trl import DPOConfig, DPOTrainer

            cfg = DPOConfig(**trl_common, beta=0.1)
            trainer = DPOTrainer(model=model, args=cfg, train_dataset=datasets.Dataset.from_list(data),
                                 processing_class=tok, callbacks=[Stamp()])
        setup_s = time.perf_counter() - t0 - import_s
        _train(trainer, profile)
    else:
        ours_common = dict(common, save_steps=0, disable_tqdm=True, save_final_model=False, use_cpu=True)
        if kind == "grpo":
            from alignlings.trainers import GRPOConfig, GRPOTrainer

            cfg = GRPOConfig(**ours_common, num_generations=8, max_completion_length=16, temperature=1.0, beta=0.0)
            trainer = GRPOTrainer(model, digit_count_reward, args=cfg, train_dataset=data, processing_class=tok)
        else:
            from alignlings.trainers import DPOConfig, DPOTrainer

            cfg = DPOConfig(**ours_common, beta=0.1)
            trainer = DPOTrainer(model, args=cfg, train_dataset=data, processing_class=tok)
        step = trainer.training_step

        def stamped(rows):
            result = step(rows)
            stamps.append((time.perf_counter(), time.process_time()))
            return result

        trainer.training_step = stamped
        setup_s = time.perf_counter() - t0 - import_s
        _train(trainer, profile)

    measured = stamps[warmup:]
    steps_per_s = (len(measured) - 1) / (measured[-1][0] - measured[0][0])
    # steps per second of this process's own CPU time: what other jobs on a shared machine steal
    # from the wall clock does not count (cache and memory-bandwidth contention still does)
    cpu_steps_per_s = (len(measured) - 1) / (measured[-1][1] - measured[0][1])
    return {"case": case, "steps_per_s": steps_per_s, "cpu_steps_per_s": cpu_steps_per_s, "peak_rss_mb": _peak_rss_mb(), "import_s": import_s,
            "setup_s": setup_s, "steps": len(stamps), "threads": torch.get_num_threads()}


def _train(trainer, profile: bool) -> None:
    if not profile:
        trainer.train()
        return
    import cProfile
    import pstats

    with cProfile.Profile() as prof:
        trainer.train()
    pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(30)


def _measure(case: str, folder: Path, steps: int, warmup: int, threads: int) -> dict:
    cmd = [sys.executable, __file__, "--one", case, "--folder", str(folder), "--steps", str(steps),
           "--warmup", str(warmup), "--threads", str(threads)]
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "TRANSFORMERS_VERBOSITY": "error"}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    load_before = os.getloadavg()[0]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    if proc.returncode != 0:
        raise RuntimeError(f"{case} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    # the machine's 1-minute load average around the run (on a shared machine it explains the spread)
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "load_before": load_before,
            "load_after": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="optimiser steps per run (default 60)")
    parser.add_argument("--warmup", type=int, default=10, help="first steps left out of the rate (default 10)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per case; the median is reported (default 3)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {','.join(CASES)}")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads for both libraries (default 1, fastest for this model; 0 = torch's default)")
    parser.add_argument("--profile", metavar="CASE", help="run one case in this process under cProfile "
                        "(where the time goes; the rate it prints is slowed by the profiler)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.one:
        print(json.dumps(_run_case(a.one, Path(a.folder), a.steps, a.warmup, a.threads)))
        return

    if a.profile:
        with tempfile.TemporaryDirectory() as tmp:
            _prepare(Path(tmp))
            print(json.dumps(_run_case(a.profile, Path(tmp), a.steps, a.warmup, a.threads, profile=True)))
        return
    cases = [c for c in a.cases.split(",") if c]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _prepare(folder)
        runs: dict[str, list[dict]] = {c: [] for c in cases}
        for r in range(a.repeats):  # interleaved, so a slow spell of the machine hits every case
            for case in cases:
                runs[case].append(_measure(case, folder, a.steps, a.warmup, a.threads))
                m = runs[case][-1]
                print(f"  run {r + 1} {case:10s} {m['steps_per_s']:7.1f} steps/s ({m['cpu_steps_per_s']:5.1f} per CPU s)  {m['peak_rss_mb']:6.0f} MB  "
                      f"load {m['load_before']:.1f} -> {m['load_after']:.1f}", flush=True)
    median = {c: {k: statistics.median(m[k] for m in runs[c]) for k in ("steps_per_s", "cpu_steps_per_s", "peak_rss_mb", "import_s", "setup_s")}
              for c in cases}

    lines = ["| trainer | alignlings steps/s | TRL steps/s | speed ratio | ratio by CPU time | alignlings peak RSS "
             "| TRL peak RSS | memory ratio |", "|---|---|---|---|---|---|---|---|"]
    for kind in ("grpo", "dpo"):
        ours, theirs = median.get(f"ours-{kind}"), median.get(f"trl-{kind}")
        if ours and theirs:
            lines.append(
                f"| {kind.upper()} | {ours['steps_per_s']:.1f} | {theirs['steps_per_s']:.1f} | "
                f"{ours['steps_per_s'] / theirs['steps_per_s']:.2f}x | "
                f"{ours['cpu_steps_per_s'] / theirs['cpu_steps_per_s']:.2f}x | {ours['peak_rss_mb']:.0f} MB | "
                f"{theirs['peak_rss_mb']:.0f} MB | {ours['peak_rss_mb'] / theirs['peak_rss_mb']:.2f}x |")
    table = "\n".join(lines)
    imports = ", ".join(f"{c} {median[c]['import_s']:.1f} s" for c in cases)
    per_run = "; ".join(
        f"{kind.upper()} " + ", ".join(f"{o['steps_per_s'] / t['steps_per_s']:.2f}x"
                                       for o, t in zip(runs[f"ours-{kind}"], runs[f"trl-{kind}"]))
        for kind in ("grpo", "dpo") if f"ours-{kind}" in runs and f"trl-{kind}" in runs)
    loads = [v for c in cases for m in runs[c] for v in (m["load_before"], m["load_after"])]
    load = f"{min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores"
    print(table)
    print(f"import time (median): {imports}")
    print(f"per-run speed ratios (run i of ours against run i of TRL): {per_run}")
    print(f"1-minute load average before/after each run: {load}")
    if set(cases) != set(CASES):
        return  # a partial run (a smoke test, one trainer) leaves the recorded results alone
    RESULTS.mkdir(exist_ok=True)
    import torch
    import transformers
    import trl

    meta = {"steps": a.steps, "warmup": a.warmup, "repeats": a.repeats, "torch": torch.__version__,
            "transformers": transformers.__version__, "trl": trl.__version__, "cpus": os.cpu_count(),
            "threads": a.threads or "torch default", "load_average": load}
    (RESULTS / "bench_trainers.json").write_text(json.dumps({"meta": meta, "median": median, "runs": runs}, indent=2))
    (RESULTS / "bench_trainers.md").write_text(
        table + f"\n\nimport time (median): {imports}\n\nper-run speed ratios: {per_run}\n\n"
        f"1-minute load average before/after each run: {load}\n\n{json.dumps(meta)}\n")


if __name__ == "__main__":
    main()
