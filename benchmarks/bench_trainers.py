"""Steps per second, memory and achieved FLOP/s: alignlings' GRPOTrainer / DPOTrainer against TRL 1.16's.

    python benchmarks/bench_trainers.py                    # three sizes, ours vs TRL fair vs TRL default
    python benchmarks/bench_trainers.py --sizes tiny --repeats 3       # the tiny model only, 3 repeats
    python benchmarks/bench_trainers.py --sizes tiny --cases ours-dpo,trl-dpo --steps 30
    python benchmarks/bench_trainers.py --profile ours-dpo --sizes mid  # one case here, cProfile'd
    python benchmarks/bench_trainers.py --repeats 6       # the recorded table: medians of 6 paired runs

A fair comparison: the same model, data and settings for both libraries; the same work per step
where ours shares no prompt (tiny), and a "sharing off" case of ours for the same work elsewhere.

* Three sizes of GPT-2 (``--sizes``): ``tiny`` (2 layers x 64, the toy character vocabulary of 14
  tokens, the toy addition data: short sequences, where per-call overheads dominate), ``mid``
  (6 x 256, a word vocabulary of 8,192, sequences of 128 tokens) and ``gpt2`` (GPT-2 small's shape:
  12 x 768, 50,257 tokens, sequences of 128). Random weights, saved to a temporary folder and loaded
  from there by both libraries (TRL reloads its DPO reference from ``config._name_or_path``).
* DPO: beta 0.1, reference log-probs per batch, 8 pairs per step (2 at ``gpt2``); at ``mid`` and
  ``gpt2`` each sequence is 96 prompt tokens + 32 completion tokens. GRPO: G = 8 completions of one
  prompt per step (4 at ``gpt2``), temperature 1, beta 0 (TRL's default), a cheap reward function;
  16 new tokens at ``tiny``, 64 (after a 64-token prompt) at the larger sizes, where the word
  vocabulary makes an early EOS rare, so both libraries generate nearly full-length completions.
* Sampling: TRL 1.16 calls transformers' ``generate`` (``torch.multinomial``: one exponential per
  vocabulary entry per token); ours, by default, its lean KV-cache loop drawing by inverse CDF (one
  uniform per row: the same distribution, not the same tokens; ``generation_backend="cache_exact"``
  draws as ``generate`` does).
* Both on the CPU in float32 (TRL: ``use_cpu=True``, ``bf16=False``), AdamW, logging every 10 steps,
  no checkpoints, one torch thread each (``--threads``).
* Activation checkpointing: TRL 1.16's configs default to ``gradient_checkpointing=True`` (recompute
  activations in backward: less memory, more time); ours defaults to False. ``trl`` cases run TRL with
  it off (the fair comparison), ``trl_default`` cases with TRL's defaults as they ship.

Each case runs in its own subprocess. Memory: resident memory after the imports, after setup (model,
trainer, optimiser not yet allocated) and at its peak (``ru_maxrss``); "beyond imports" is peak minus
the imports (TRL imports datasets, pyarrow and accelerate; we do not), "training" is peak minus setup.
Steps/s is measured over the steps after the first ``--warmup``, by the wall clock and by the
process's own CPU time (``time.process_time``: on a shared machine other jobs' time does not count,
so its ratio is the steadier one). Where the time goes: each step's wall time split into sampling,
rewards, scoring without gradient (DPO's reference; GRPO's old/reference log-probs), backward and the
optimiser step; the rest is the forward with gradient, the loss, metrics and the libraries' own
per-step machinery. Achieved FLOP/s: the model FLOPs of a step (2 per weight per token forward, 4
backward, plus attention's ``4 L T d`` per token forward; the LM head only at positions whose logits
are used, see ``_flops_per_step``) times steps per CPU second, as a fraction of this machine's
float32 matmul rate measured in the same run with the same threads (a 1024^3 ``torch.mm``).
Two FLOP counts: the nominal work, the whole rows, which TRL computes; and the work performed:
where a prompt repeats (GRPO's G rows of one prompt; a DPO pair's chosen and rejected rows) and the
repeat is large enough (``decode.SHARE_MIN_WORK``: the mid and GPT-2 sizes), ours runs it once, so
it performs less than the nominal work (mid GRPO: 568 of 1016 sampled positions per step; mid DPO:
1280 of 2048 positions per pass). The nominal rate is the one that would do TRL's work in our time;
the performed rate is what our kernels reach. Ours' ratio to TRL at those sizes is then not the same
work: the ``ours_noshare`` cases run ours with sharing off (``decode.PREFIX_SHARING = False``: every
row its whole sequence, TRL's work), and their ratio stands next to it ("sharing off").

Ratios: the median of the per-run ratios (run r of ours against run r of the other library, which ran
right after it), with their range; steps/s and memory: medians over ``--repeats``. Printed as tables
and, for a full run (all sizes and cases), written to ``benchmarks/results/bench_trainers.{json,md}``.
Timing goals live here, not in the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
CASES = ("ours-grpo", "ours_noshare-grpo", "trl-grpo", "trl_default-grpo",
         "ours-dpo", "ours_noshare-dpo", "trl-dpo", "trl_default-dpo")
#: ours with prompt sharing off (``decode.PREFIX_SHARING = False``): every row runs its whole
#: sequence, the work TRL does, so its ratio to TRL compares the same work
NOSHARE = "ours_noshare"
SIZES = {
    # n_layer, n_embd, n_head, vocabulary (None: the toy characters), steps, warmup, DPO pairs per step,
    # GRPO completions per step (= G), GRPO prompt words, new tokens
    "tiny": dict(n_layer=2, n_embd=64, n_head=4, vocab=None, steps=150, warmup=10, pairs=8, gens=8,
                 prompt=None, new=16),
    "mid": dict(n_layer=6, n_embd=256, n_head=8, vocab=8192, steps=10, warmup=2, pairs=8, gens=8,
                prompt=64, new=64),
    "gpt2": dict(n_layer=12, n_embd=768, n_head=12, vocab=50257, steps=4, warmup=1, pairs=2, gens=4,
                 prompt=64, new=64),
}
DPO_PROMPT, DPO_COMPLETION = 96, 31  # words; the completion gets an EOS: 96 + 32 = 128 tokens


# -- data and models -----------------------------------------------------------------------------------

def word_tokenizer(vocab: int):
    """A word-level ``PreTrainedTokenizerFast``: <pad>, <eos>, then words w2 .. w{vocab-1}."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = {"<pad>": 0, "<eos>": 1, **{f"w{i}": i for i in range(2, vocab)}}
    backend = Tokenizer(models.WordLevel(words, unk_token="<pad>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>")


def _text(rng: random.Random, vocab: int, n: int) -> str:
    return " ".join(f"w{rng.randrange(2, vocab)}" for _ in range(n))


def _prepare(folder: Path, size: str) -> None:
    """Save the model and tokenizer of ``size``, and the prompt / pair datasets, into ``folder``."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from alignlings.trainers import toy

    s = SIZES[size]
    if s["vocab"] is None:
        tok = toy.make_tokenizer()
        model = toy.make_model(tok, n_layer=s["n_layer"], n_embd=s["n_embd"], n_head=s["n_head"], n_positions=64, seed=0)
        train, _ = toy.addition_rows(0)
        # 2,048 rows: the measured steps stay inside the first epoch (256 DPO batches; 2,048 GRPO prompts),
        # so no library's epoch change (a new sampler, TRL's dataloader re-created) is in the rate
        prompts = [{"prompt": r["prompt"], "answer": r["answer"]} for r in train[:2048]]
        pairs = [{"prompt": r["prompt"], "chosen": r["answer"], "rejected": str(int(r["answer"]) + 1)} for r in train[:2048]]
    else:
        tok = word_tokenizer(s["vocab"])
        config = GPT2Config(vocab_size=s["vocab"], n_positions=128, n_embd=s["n_embd"], n_layer=s["n_layer"],
                            n_head=s["n_head"], bos_token_id=1, eos_token_id=1, pad_token_id=0, resid_pdrop=0.0,
                            embd_pdrop=0.0, attn_pdrop=0.0)
        torch.manual_seed(0)
        model = GPT2LMHeadModel(config)
        rng = random.Random(0)
        n = 64
        prompts = [{"prompt": _text(rng, s["vocab"], s["prompt"])} for _ in range(n)]
        # completions open with a space: both libraries tokenize prompt + completion as one text
        pairs = [{"prompt": _text(rng, s["vocab"], DPO_PROMPT), "chosen": " " + _text(rng, s["vocab"], DPO_COMPLETION),
                  "rejected": " " + _text(rng, s["vocab"], DPO_COMPLETION)} for _ in range(n)]
    model.save_pretrained(folder / "model")
    tok.save_pretrained(folder / "model")
    (folder / "prompts.json").write_text(json.dumps(prompts))
    (folder / "pairs.json").write_text(json.dumps(pairs))


def digit_count_reward(prompts, completions, **kwargs):
    """A cheap reward: the number of digits in the completion (the model is random anyway)."""
    return [float(sum(ch.isdigit() for ch in c)) for c in completions]


# -- one measurement -------------------------------------------------------------------------------------

def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class PhaseClock:
    """Cumulative wall time per phase, for methods wrapped with ``wrap``."""

    def __init__(self) -> None:
        self.total: dict[str, float] = {}
        self.depth = 0

    def wrap(self, obj, name: str, phase: str) -> None:
        original = getattr(obj, name)

        def timed(*a, **k):
            start = time.perf_counter()
            try:
                return original(*a, **k)
            finally:
                self.total[phase] = self.total.get(phase, 0.0) + time.perf_counter() - start

        setattr(obj, name, timed)

    def snapshot(self) -> dict[str, float]:
        return dict(self.total)


def _model_flops(n_layer: int, d: int, vocab: int, tokens: float, head_tokens: float, seq: float,
                 passes: float) -> float:
    """FLOPs of ``passes`` forward-equivalents: the layers (12 L d^2 weights, at 2 FLOPs per weight per
    token, plus attention's 4 L seq d per token) over ``tokens`` tokens, the LM head (d V weights)
    over ``head_tokens`` of them."""
    layers = tokens * (2 * 12 * n_layer * d * d + 4 * n_layer * seq * d)
    return passes * (layers + head_tokens * 2 * d * vocab)


def _shares_prompt(size: str, kind: str, data: list[dict], tok) -> bool:
    """Whether ours runs each repeated prompt once at ``size`` (``decode.may_share``'s rule with the
    step's rows: GRPO's G rows of one prompt, DPO's 2b rows of b prompts, the mean prompt length)."""
    from alignlings.trainers import decode

    s = SIZES[size]
    if kind == "dpo":
        P = statistics.mean(len(tok(r["prompt"])["input_ids"]) for r in data)
        B, U = 2 * s["pairs"], s["pairs"]
    else:
        P = statistics.mean(len(tok(r["prompt"])["input_ids"]) for r in data)
        B, U = s["gens"], 1
    return (B - U) * P * s["n_embd"] >= decode.SHARE_MIN_WORK


def _flops_per_step(size: str, kind: str, data: list[dict], tok, completion_len: float,
                    shared: bool = False) -> float:
    """Model FLOPs of one step (the same for both libraries). The LM head counts only at positions
    whose logits are used, where both libraries stop (TRL 1.16's fused head and ``logits_to_keep``,
    our completion-only scoring): DPO, the positions that predict a completion token; GRPO, one per
    generated token. DPO: policy forward + backward (3 passes) and the reference forward (1) over 2b
    sequences. GRPO: generation (1 pass over P + C tokens: the prompt once, then one token per row
    per step) and the loss pass forward + backward (3). Lengths: the data's means, and the
    completions' logged mean.

    ``shared``: the work performed when each distinct prompt runs once (ours at the mid and GPT-2
    sizes): the prompt's tokens count once per distinct prompt instead of once per row (DPO: b of
    the 2b rows; GRPO: 1 of the G rows, in sampling and in the loss pass). Otherwise the nominal
    work, the whole rows, which is what TRL computes."""
    s = SIZES[size]
    vocab = s["vocab"] or len(tok)
    if kind == "dpo":
        total = [len(tok(r["prompt"] + r["chosen"])["input_ids"]) + 1 for r in data]  # + EOS
        completion = [len(tok(r["chosen"])["input_ids"]) + 1 for r in data]
        T, C = statistics.mean(total), statistics.mean(completion)
        rows = 2 * s["pairs"]
        tokens = rows * T - (s["pairs"] * (T - C) if shared else 0)  # the prompt once per pair
        return _model_flops(s["n_layer"], s["n_embd"], vocab, tokens, rows * C, T, 4)
    P = statistics.mean(len(tok(r["prompt"])["input_ids"]) for r in data)
    T = P + completion_len
    tokens = s["gens"] * T - ((s["gens"] - 1) * P if shared else 0)  # the prompt once per group
    return _model_flops(s["n_layer"], s["n_embd"], vocab, tokens, s["gens"] * completion_len, T, 1 + 3)


def _run_case(case: str, size: str, folder: Path, steps: int, warmup: int, threads: int, profile: bool = False) -> dict:
    """One measurement in this (fresh) process; with ``profile``, training runs under cProfile and the
    30 costliest calls (cumulative time) are printed to stderr."""
    t0 = time.perf_counter()
    import torch

    if threads:
        torch.set_num_threads(threads)
    lib, kind = case.split("-")
    if lib.startswith("trl"):
        import datasets
        import trl  # noqa: F401
    else:
        import alignlings.trainers  # noqa: F401  (takes plain lists: no datasets / pyarrow import)
        from alignlings.trainers import decode

        decode.PREFIX_SHARING = lib != NOSHARE  # the option: every row runs its whole sequence
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import_s = time.perf_counter() - t0
    rss_imports = _rss_mb()
    s = SIZES[size]
    tok = AutoTokenizer.from_pretrained(folder / "model")
    model = AutoModelForCausalLM.from_pretrained(folder / "model")
    data = json.loads((folder / ("prompts.json" if kind == "grpo" else "pairs.json")).read_text())
    out = tempfile.mkdtemp(prefix=f"bench_{case}_")
    stamps: list[tuple[float, float, dict]] = []
    clock = PhaseClock()
    batch = s["gens"] if kind == "grpo" else s["pairs"]
    common = dict(output_dir=out, learning_rate=1e-6, per_device_train_batch_size=batch, max_steps=steps, seed=0,
                  logging_steps=10)
    grpo = dict(num_generations=s["gens"], max_completion_length=s["new"], temperature=1.0, beta=0.0)

    if lib.startswith("trl"):
        from transformers import TrainerCallback

        class Stamp(TrainerCallback):
            def on_step_end(self, args, state, control, **kw):
                stamps.append((time.perf_counter(), time.process_time(), clock.snapshot()))

            def on_pre_optimizer_step(self, args, state, control, **kw):
                self.start = time.perf_counter()

            def on_optimizer_step(self, args, state, control, **kw):
                clock.total["optimizer"] = clock.total.get("optimizer", 0.0) + time.perf_counter() - self.start

        trl_common = dict(common, use_cpu=True, bf16=False, save_strategy="no", report_to=[], disable_tqdm=True)
        if lib == "trl":  # the fair comparison: no recomputation in backward, as ours
            trl_common["gradient_checkpointing"] = False
        if kind == "grpo":
            from trl import GRPOConfig, GRPOTrainer

            cfg = GRPOConfig(**trl_common, **grpo)
            trainer = GRPOTrainer(model=model, reward_funcs=digit_count_reward, args=cfg,
                                  train_dataset=datasets.Dataset.from_list(data), processing_class=tok,
                                  callbacks=[Stamp()])
            clock.wrap(trainer, "_generate", "sampling")
            clock.wrap(trainer, "_calculate_rewards", "rewards")
        else:
            from trl import DPOConfig, DPOTrainer

            cfg = DPOConfig(**trl_common, beta=0.1)
            trainer = DPOTrainer(model=model, args=cfg, train_dataset=datasets.Dataset.from_list(data),
                                 processing_class=tok, callbacks=[Stamp()])
            clock.wrap(trainer.ref_model, "forward", "no-grad scoring")  # TRL 1.16 calls it inside _compute_loss
        clock.wrap(trainer.accelerator, "backward", "backward")
        checkpointing = bool(cfg.gradient_checkpointing)
    else:
        ours_common = dict(common, save_steps=0, disable_tqdm=True, save_final_model=False, use_cpu=True)
        if kind == "grpo":
            from alignlings.trainers import GRPOConfig, GRPOTrainer

            cfg = GRPOConfig(**ours_common, **grpo)
            trainer = GRPOTrainer(model, digit_count_reward, args=cfg, train_dataset=data, processing_class=tok)
            clock.wrap(trainer, "generate", "sampling")
            clock.wrap(trainer, "rewards", "rewards")
            clock.wrap(trainer, "per_token_logps", "no-grad scoring")
        else:
            from alignlings.trainers import DPOConfig, DPOTrainer

            cfg = DPOConfig(**ours_common, beta=0.1)
            trainer = DPOTrainer(model, args=cfg, train_dataset=data, processing_class=tok)
            clock.wrap(trainer, "reference_logps", "no-grad scoring")
        clock.wrap(trainer, "backward", "backward")
        clock.wrap(trainer, "optimizer_step", "optimizer")
        checkpointing = bool(cfg.gradient_checkpointing)
        step = trainer.training_step

        def stamped(rows):
            result = step(rows)
            stamps.append((time.perf_counter(), time.process_time(), clock.snapshot()))
            return result

        trainer.training_step = stamped
    setup_s = time.perf_counter() - t0 - import_s
    rss_setup = _rss_mb()
    _train(trainer, profile)

    measured = stamps[warmup:]
    n = len(measured) - 1
    wall = measured[-1][0] - measured[0][0]
    phases = {k: (measured[-1][2].get(k, 0.0) - measured[0][2].get(k, 0.0)) / wall
              for k in ("sampling", "rewards", "no-grad scoring", "backward", "optimizer")}
    phases["rest"] = 1.0 - sum(phases.values())
    completion_len = _mean_completion_length(trainer, lib) if kind == "grpo" else 0.0
    shared = lib == "ours" and _shares_prompt(size, kind, data, tok)
    peak = _peak_rss_mb()
    return {"case": case, "size": size, "steps_per_s": n / wall,
            # steps per second of this process's own CPU time: what other jobs on a shared machine steal
            # from the wall clock does not count (cache and memory-bandwidth contention still does)
            "cpu_steps_per_s": n / (measured[-1][1] - measured[0][1]),
            "peak_rss_mb": peak, "rss_imports_mb": rss_imports, "rss_setup_mb": rss_setup,
            "beyond_imports_mb": peak - rss_imports, "training_mb": peak - rss_setup,
            "import_s": import_s, "setup_s": setup_s, "steps": len(stamps), "threads": torch.get_num_threads(),
            "gradient_checkpointing": checkpointing, "phases": phases, "completion_len": completion_len,
            "flops_per_step": _flops_per_step(size, kind, data, tok, completion_len),
            # the work this case's kernels performed: less than the nominal where a prompt ran once per group
            "performed_flops_per_step": _flops_per_step(size, kind, data, tok, completion_len, shared),
            "prompt_shared": shared}


def _mean_completion_length(trainer, lib: str) -> float:
    """Mean generated tokens per completion over the run, from the library's own logged metric."""
    history = trainer.state.log_history if lib.startswith("trl") else trainer.log.history
    values = [row["completions/mean_length"] for row in history if "completions/mean_length" in row]
    return statistics.mean(values) if values else float("nan")


def _train(trainer, profile: bool) -> None:
    if not profile:
        trainer.train()
        return
    import cProfile
    import pstats

    with cProfile.Profile() as prof:
        trainer.train()
    pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(30)


def matmul_rate(threads: int, n: int = 1024, repeats: int = 5) -> dict[str, float]:
    """This machine's float32 matmul rate (FLOP/s, best of ``repeats``), by wall and by CPU time."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best_wall = best_cpu = float("inf")
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        for _ in range(4):
            torch.mm(a, b)
        best_wall = min(best_wall, (time.perf_counter() - w) / 4)
        best_cpu = min(best_cpu, (time.process_time() - c) / 4)
    return {"wall": 2 * n ** 3 / best_wall, "cpu": 2 * n ** 3 / best_cpu}


def _measure(case: str, size: str, folder: Path, steps: int, warmup: int, threads: int) -> dict:
    cmd = [sys.executable, __file__, "--one", case, "--sizes", size, "--folder", str(folder), "--steps", str(steps),
           "--warmup", str(warmup), "--threads", str(threads)]
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "TRANSFORMERS_VERBOSITY": "error"}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    load_before = os.getloadavg()[0]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"{case} ({size}) failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    # the machine's 1-minute load average around the run (on a shared machine it explains the spread)
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "load_before": load_before,
            "load_after": os.getloadavg()[0]}


# -- tables ------------------------------------------------------------------------------------------------

PHASES = ("sampling", "rewards", "no-grad scoring", "backward", "optimizer", "rest")


def paired_ratios(runs: dict, base: str = "ours") -> dict:
    """(size, case) -> the per-run ratios ``base`` / that TRL case (by wall and by CPU time): run r of
    each case ran next to run r of ours (the cases are interleaved), so a slow spell of a shared
    machine hits both sides of a ratio, where it would move one side of a ratio of medians.
    ``base="ours_noshare"``: ours with prompt sharing off, the same work as TRL."""
    out = {}
    for (size, case), theirs in runs.items():
        ours = runs.get((size, f"{base}-" + case.split("-")[1]))
        if ours is None or not case.startswith("trl"):
            continue
        pairs = list(zip(ours, theirs))
        out[(size, case)] = {key: [o[key] / t[key] for o, t in pairs] for key in ("steps_per_s", "cpu_steps_per_s")}
    return out


def tables(median: dict, rate: dict[str, float], paired: dict | None = None, paired_noshare: dict | None = None) -> str:
    """Markdown: speed and memory ratios per size and trainer, then FLOP/s and where the time goes.

    A ratio is the median of the per-run ratios (``paired_ratios``), with their range when there are
    several runs; without per-run results (old records), the ratio of the medians. "sharing off":
    ours with ``decode.PREFIX_SHARING = False`` against TRL fair, the same work on both sides; where
    ours shares a prompt (the "work" column says "shared") the plain ratio is not the same work.

    FLOP/s twice: of the nominal work (the whole rows, what TRL computes: the rate that would do TRL's
    work in our time) and of the work performed (the prompt counted once per group where ours shares
    it: what our kernels reach)."""
    speed = ["| size | trainer | work | ours steps/s | TRL steps/s (fair / default) | ratio, wall (fair / default) "
             "| ratio, CPU time (fair / default) | ratio, CPU time, sharing off (fair) "
             "| memory beyond imports: ours / TRL fair / TRL default "
             "| training memory: ours / TRL fair / TRL default |", "|---|---|---|---|---|---|---|---|---|---|"]
    flops = ["| size | case | nominal GFLOP/step | performed GFLOP/step | nominal GFLOP/s (CPU time) | of matmul rate "
             "| performed GFLOP/s (CPU time) | of matmul rate | "
             + " | ".join(PHASES) + " |", "|---|---|---|---|---|---|---|---|" + "---|" * len(PHASES)]
    for size in SIZES:
        for kind in ("grpo", "dpo"):
            ours, fair, default = (median.get((size, f"{lib}-{kind}")) for lib in ("ours", "trl", "trl_default"))
            if ours is None:
                continue

            def pair(key, theirs=(fair, default), fmt="{:.1f}"):
                return " / ".join(fmt.format(t[key]) if t else "-" for t in theirs)

            def ratio(key, theirs=(fair, default)):
                out = []
                for lib, t in zip(("trl", "trl_default"), theirs):
                    per_run = (paired or {}).get((size, f"{lib}-{kind}"), {}).get(key)
                    if not t:
                        out.append("-")
                    elif per_run:
                        spread = f" ({min(per_run):.2f}-{max(per_run):.2f})" if len(per_run) > 1 else ""
                        out.append(f"{statistics.median(per_run):.2f}x{spread}")
                    else:
                        out.append(f"{ours[key] / t[key]:.2f}x")
                return " / ".join(out)

            noshare = (paired_noshare or {}).get((size, f"trl-{kind}"), {}).get("cpu_steps_per_s")
            off = "-" if not noshare else f"{statistics.median(noshare):.2f}x" + (
                f" ({min(noshare):.2f}-{max(noshare):.2f})" if len(noshare) > 1 else "")
            work = "prompt shared" if ours.get("prompt_shared") else "same"
            speed.append(
                f"| {size} | {kind.upper()} | {work} | {ours['steps_per_s']:.2f} | {pair('steps_per_s', fmt='{:.2f}')} | "
                f"{ratio('steps_per_s')} | {ratio('cpu_steps_per_s')} | {off} | "
                f"{ours['beyond_imports_mb']:.0f} / {pair('beyond_imports_mb', fmt='{:.0f}')} MB | "
                f"{ours['training_mb']:.0f} / {pair('training_mb', fmt='{:.0f}')} MB |")
            for lib in ("ours", NOSHARE, "trl", "trl_default"):
                m = median.get((size, f"{lib}-{kind}"))
                if m is None:
                    continue
                performed = m.get("performed_flops_per_step", m["flops_per_step"])
                nominal_rate = m["flops_per_step"] * m["cpu_steps_per_s"]
                performed_rate = performed * m["cpu_steps_per_s"]
                flops.append(f"| {size} | {lib}-{kind} | {m['flops_per_step'] / 1e9:.2f} | {performed / 1e9:.2f} | "
                             f"{nominal_rate / 1e9:.1f} | {nominal_rate / rate['cpu']:.0%} | "
                             f"{performed_rate / 1e9:.1f} | {performed_rate / rate['cpu']:.0%} | "
                             + " | ".join(f"{m['phases'][p]:.0%}" for p in PHASES) + " |")
    return "\n".join(speed) + "\n\n" + "\n".join(flops)


def per_run_table(runs: dict) -> str:
    """Markdown: every run's CPU-time ratio to TRL fair, ours and ours with sharing off, in run order."""
    lines = ["| size | trainer | ours / TRL fair, per run (CPU time) | ours sharing off / TRL fair, per run | runs |",
             "|---|---|---|---|---|"]
    for (size, case), ratios in paired_ratios(runs).items():
        if not case.startswith("trl-"):
            continue
        off = paired_ratios(runs, NOSHARE).get((size, case), {}).get("cpu_steps_per_s", [])
        kind = case.split("-")[1]
        lines.append(f"| {size} | {kind.upper()} | {', '.join(f'{r:.2f}' for r in ratios['cpu_steps_per_s'])} | "
                     f"{', '.join(f'{r:.2f}' for r in off) or '-'} | {len(ratios['cpu_steps_per_s'])} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=",".join(SIZES), help=f"comma-separated subset of {','.join(SIZES)}")
    parser.add_argument("--steps", type=int, help="optimiser steps per run (default per size: tiny 150, mid 10, gpt2 4)")
    parser.add_argument("--warmup", type=int, help="first steps left out of the rate (default per size: 10, 2, 1)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per case; the median is reported (default 1)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {','.join(CASES)}")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads for both libraries (default 1; 0 = torch's default)")
    parser.add_argument("--profile", metavar="CASE", help="run one case (of the first size) in this process under "
                        "cProfile (where the time goes; the rate it prints is slowed by the profiler)")
    parser.add_argument("--tables-only", action="store_true", help="rebuild the tables of the recorded "
                        "results (benchmarks/results/bench_trainers.json), recomputing each case's model FLOPs")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    a = parser.parse_args()
    sizes = [s for s in a.sizes.split(",") if s]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"--sizes: unknown {unknown}; expected some of {', '.join(SIZES)}")

    def steps_of(size):
        return a.steps or SIZES[size]["steps"], a.warmup if a.warmup is not None else SIZES[size]["warmup"]

    if a.tables_only:
        _rebuild_tables()
        return
    if a.one:
        steps, warmup = steps_of(sizes[0])
        print(json.dumps(_run_case(a.one, sizes[0], Path(a.folder), steps, warmup, a.threads)))
        return
    if a.profile:
        with tempfile.TemporaryDirectory() as tmp:
            _prepare(Path(tmp), sizes[0])
            steps, warmup = steps_of(sizes[0])
            print(json.dumps(_run_case(a.profile, sizes[0], Path(tmp), steps, warmup, a.threads, profile=True)))
        return

    cases = [c for c in a.cases.split(",") if c]
    rate = matmul_rate(a.threads)
    print(f"float32 matmul rate ({a.threads or 'default'} threads): {rate['wall'] / 1e9:.1f} GFLOP/s by wall, "
          f"{rate['cpu'] / 1e9:.1f} by CPU time", flush=True)
    runs: dict[tuple[str, str], list[dict]] = {}
    for size in sizes:
        steps, warmup = steps_of(size)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            _prepare(folder, size)
            for r in range(a.repeats):  # interleaved, so a slow spell of the machine hits every case
                for case in cases:
                    try:
                        m = _measure(case, size, folder, steps, warmup, a.threads)
                    except (RuntimeError, subprocess.TimeoutExpired) as exc:  # one failed case: report it, go on
                        print(f"  {size:4s} run {r + 1} {case:16s} FAILED: {str(exc)[-1500:]}", flush=True)
                        continue
                    runs.setdefault((size, case), []).append(m)
                    print(f"  {size:4s} run {r + 1} {case:16s} {m['steps_per_s']:7.2f} steps/s "
                          f"({m['cpu_steps_per_s']:6.2f} per CPU s)  peak {m['peak_rss_mb']:5.0f} MB, beyond imports "
                          f"{m['beyond_imports_mb']:5.0f} MB, training {m['training_mb']:5.0f} MB  "
                          f"load {m['load_before']:.1f} -> {m['load_after']:.1f}", flush=True)
    after = matmul_rate(a.threads)
    numeric = ("steps_per_s", "cpu_steps_per_s", "peak_rss_mb", "beyond_imports_mb", "training_mb", "import_s",
               "setup_s", "flops_per_step", "performed_flops_per_step", "completion_len")
    median = {}
    for key, ms in runs.items():
        median[key] = {k: statistics.median(m[k] for m in ms) for k in numeric}
        median[key]["phases"] = {p: statistics.median(m["phases"][p] for m in ms) for p in PHASES}
        median[key]["prompt_shared"] = any(m["prompt_shared"] for m in ms)
    table = tables(median, rate, paired_ratios(runs), paired_ratios(runs, NOSHARE))
    table += "\n\n" + per_run_table(runs)
    loads = [v for ms in runs.values() for m in ms for v in (m["load_before"], m["load_after"])]
    load = f"{min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores"
    notes = (f"float32 matmul rate: {rate['cpu'] / 1e9:.1f} GFLOP/s per CPU second before the runs, "
             f"{after['cpu'] / 1e9:.1f} after ({a.threads or 'default'} threads)\n"
             f"GRPO mean completion length (tokens): " + ", ".join(
                 f"{size} {case} {median[(size, case)]['completion_len']:.1f}" for size, case in median
                 if case.endswith("grpo")) + "\n"
             f"1-minute load average before/after each run: {load}")
    print(table)
    print(notes)
    if set(sizes) != set(SIZES) or set(cases) != set(CASES):
        return  # a partial run (a smoke test, one trainer) leaves the recorded results alone
    RESULTS.mkdir(exist_ok=True)
    import torch
    import transformers
    import trl

    meta = {"steps": {s: steps_of(s) for s in sizes}, "repeats": a.repeats, "torch": torch.__version__,
            "transformers": transformers.__version__, "trl": trl.__version__, "cpus": os.cpu_count(),
            "threads": a.threads or "torch default", "load_average": load, "matmul_flops": [rate, after]}
    serial = {f"{size}/{case}": v for (size, case), v in median.items()}
    (RESULTS / "bench_trainers.json").write_text(json.dumps(
        {"meta": meta, "median": serial, "runs": {f"{s}/{c}": v for (s, c), v in runs.items()}}, indent=2))
    (RESULTS / "bench_trainers.md").write_text(table + "\n\n" + notes + f"\n\n{json.dumps(meta)}\n")


def _rebuild_tables() -> None:
    """Rewrite bench_trainers.md from bench_trainers.json with the current FLOP accounting."""
    recorded = json.loads((RESULTS / "bench_trainers.json").read_text())
    median = {tuple(k.split("/")): v for k, v in recorded["median"].items()}
    with tempfile.TemporaryDirectory() as tmp:
        for size in SIZES:
            folder = Path(tmp) / size
            _prepare(folder, size)
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(folder / "model")
            for kind in ("grpo", "dpo"):
                data = json.loads((folder / ("prompts.json" if kind == "grpo" else "pairs.json")).read_text())
                for lib in ("ours", NOSHARE, "trl", "trl_default"):
                    m = median.get((size, f"{lib}-{kind}"))
                    if m is not None:
                        m["flops_per_step"] = _flops_per_step(size, kind, data, tok, m["completion_len"])
                        m["prompt_shared"] = lib == "ours" and _shares_prompt(size, kind, data, tok)
                        m["performed_flops_per_step"] = _flops_per_step(size, kind, data, tok, m["completion_len"],
                                                                        m["prompt_shared"])
    rate = recorded["meta"]["matmul_flops"][0]
    runs = {tuple(k.split("/")): v for k, v in recorded.get("runs", {}).items()}
    table = tables(median, rate, paired_ratios(runs), paired_ratios(runs, NOSHARE))
    md = (RESULTS / "bench_trainers.md").read_text()
    (RESULTS / "bench_trainers.md").write_text(table + md[md.index("\n\nfloat32 matmul rate"):])
    recorded["median"] = {f"{s}/{c}": v for (s, c), v in median.items()}
    (RESULTS / "bench_trainers.json").write_text(json.dumps(recorded, indent=2))
    print(table)


if __name__ == "__main__":
    main()
