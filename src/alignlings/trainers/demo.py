"""``alignlings train demo``: each alignment algorithm improving a tiny model on a verifiable task.

The task (toy.py): answer ``"a+b="`` for two-digit a, b, checked exactly. The stages:

1. warm-up   supervised training on answers written by a sloppy teacher who forgets the carry on
             ``forget_carry`` of the problems that have one. Imitation copies the teacher's habit:
             the model ends clearly imperfect (about 45% held-out accuracy) although it has seen
             the right answers too. The exact checker knows better, which is what the next stages use.
2. pairs     sample 8 answers per training prompt from the warm-up model; a correct sample is
             ``chosen`` and an incorrect one ``rejected`` (the checker labels them, no human).
3. reward    RewardTrainer on a copy of the warm-up model; scored by pairwise accuracy on pairs
             sampled the same way from held-out prompts.
4. dpo       DPOTrainer on the pairs, from the warm-up model; scored by held-out accuracy.
5. grpo      GRPOTrainer with the exact-match reward, from the warm-up model; held-out accuracy.

Accuracy is greedy decoding, exact match, on 500 held-out prompts never trained on. Everything is
seeded; ``results.json`` / ``results.md`` hold the table, each stage's folder its ``metrics.jsonl``
and ``metrics.png``, and ``summary.png`` the before/after bars. ``DemoSizes.quick()`` is the reduced
version the tests run.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from alignlings.trainers import toy
from alignlings.trainers.configs import DPOConfig, GRPOConfig, RewardConfig


@dataclass
class DemoSizes:
    """Sizes and learning rates of the stages (the full demo by default)."""

    forget_carry: float = toy.FORGET_CARRY
    warmup: toy.WarmUp = field(default_factory=toy.WarmUp)
    pair_prompts: int = 5000
    heldout_pair_prompts: int = 500
    reward: dict = field(default_factory=lambda: dict(
        learning_rate=1e-3, per_device_train_batch_size=64, max_steps=600, lr_scheduler_type="linear"))
    #: beta = 2, not TRL's 0.1: at 0.1 both log-probs fall (trl#800) and accuracy drops below the start
    dpo: dict = field(default_factory=lambda: dict(
        learning_rate=1e-4, per_device_train_batch_size=32, max_steps=200, beta=2.0, lr_scheduler_type="linear"))
    grpo: dict = field(default_factory=lambda: dict(
        learning_rate=1e-3, per_device_train_batch_size=256, num_generations=8, max_completion_length=4,
        max_steps=150, lr_scheduler_type="linear"))
    #: torch threads; 1 is fastest for a 64-wide model
    num_threads: int = 1

    @classmethod
    def quick(cls) -> DemoSizes:
        """The reduced demo the tests run (same warm-up, shorter stages)."""
        sizes = cls()
        sizes.pair_prompts = 2000
        sizes.heldout_pair_prompts = 300
        sizes.reward["max_steps"] = 300
        sizes.dpo["max_steps"] = 60
        sizes.grpo.update(per_device_train_batch_size=128, max_steps=60)
        return sizes


@dataclass
class StageResult:
    stage: str
    metric: str
    before: float
    after: float
    seconds: float
    steps: int

    def row(self) -> str:
        return (f"| {self.stage} | {self.metric} | {self.before:.1%} | {self.after:.1%} | "
                f"{self.after - self.before:+.1%} | {self.steps} | {self.seconds:.0f} s |")


class Demo:
    """The stages as methods, so tests can run and check them one at a time."""

    def __init__(self, output_dir: str | Path, sizes: DemoSizes | None = None, seed: int = 0, show: bool = True) -> None:
        self.out = Path(output_dir)
        self.sizes = sizes or DemoSizes()
        self.seed = seed
        self.show = show
        self.tokenizer = toy.make_tokenizer()
        self.train_rows, self.heldout_rows = toy.addition_rows(seed)
        self.results: list[StageResult] = []

    def _common(self, stage: str) -> dict:
        return dict(output_dir=str(self.out / stage), seed=self.seed, logging_steps=10, save_steps=0,
                    plot=True, disable_tqdm=not self.show, save_final_model=False)

    def accuracy(self, model) -> float:
        return toy.accuracy(model, self.tokenizer, self.heldout_rows)

    # -- 1. warm-up ------------------------------------------------------------------------------

    def warm_up(self) -> StageResult:
        start = time.perf_counter()
        self.model = toy.make_model(self.tokenizer, seed=self.seed)
        untrained = self.accuracy(self.model)
        teacher = toy.teacher_rows(self.train_rows, self.sizes.forget_carry, seed=self.seed)
        cfg = dataclasses.replace(self.sizes.warmup, seed=self.seed)
        losses = toy.warm_up(self.model, self.tokenizer, teacher, cfg, progress=self.show)
        self.warm_accuracy = self.accuracy(self.model)
        teacher_acc = sum(r["completion"] == r["answer"] for r in teacher) / len(teacher)
        self.model.save_pretrained(self.out / "warmup")
        self.tokenizer.save_pretrained(self.out / "warmup")
        _plot_losses(losses, self.out / "warmup" / "loss.png")
        result = StageResult("warm-up (SFT on the sloppy teacher)", "held-out accuracy", untrained, self.warm_accuracy,
                             time.perf_counter() - start, cfg.steps)
        self.teacher_accuracy = teacher_acc
        self.results.append(result)
        return result

    # -- 2. pairs --------------------------------------------------------------------------------

    def sample_pairs(self) -> tuple[list[dict], list[dict]]:
        s = self.sizes
        self.pairs = toy.preference_pairs(self.model, self.tokenizer, self.train_rows[: s.pair_prompts], seed=self.seed)
        self.heldout_pairs = toy.preference_pairs(
            self.model, self.tokenizer, self.heldout_rows[: s.heldout_pair_prompts], seed=self.seed + 1)
        return self.pairs, self.heldout_pairs

    # -- 3. reward model -------------------------------------------------------------------------

    def reward(self) -> StageResult:
        from alignlings.trainers import RewardTrainer

        start = time.perf_counter()
        args = RewardConfig(**self._common("reward"), **self.sizes.reward)
        trainer = RewardTrainer(copy.deepcopy(self.model), args=args, train_dataset=self.pairs,
                                processing_class=self.tokenizer)
        before = self.pairwise_accuracy(trainer)
        trainer.train()
        after = self.pairwise_accuracy(trainer)
        self.reward_trainer = trainer
        result = StageResult("reward model (Bradley-Terry)", "held-out pairwise accuracy", before, after,
                             time.perf_counter() - start, args.max_steps)
        self.results.append(result)
        return result

    def pairwise_accuracy(self, trainer) -> float:
        pairs = self.heldout_pairs
        prompts = [p["prompt"] for p in pairs]
        chosen = trainer.score(prompts, [p["chosen"] for p in pairs])
        rejected = trainer.score(prompts, [p["rejected"] for p in pairs])
        return (chosen > rejected).float().mean().item()

    # -- 4. DPO ----------------------------------------------------------------------------------

    def dpo(self) -> StageResult:
        from alignlings.trainers import DPOTrainer

        start = time.perf_counter()
        args = DPOConfig(**self._common("dpo"), **self.sizes.dpo)
        policy = copy.deepcopy(self.model)
        DPOTrainer(policy, args=args, train_dataset=self.pairs, processing_class=self.tokenizer).train()
        result = StageResult("DPO (sampled pairs)", "held-out accuracy", self.warm_accuracy, self.accuracy(policy),
                             time.perf_counter() - start, args.max_steps)
        self.results.append(result)
        return result

    # -- 5. GRPO ---------------------------------------------------------------------------------

    def grpo(self) -> StageResult:
        from alignlings.trainers import GRPOTrainer

        start = time.perf_counter()
        args = GRPOConfig(**self._common("grpo"), **self.sizes.grpo)
        policy = copy.deepcopy(self.model)
        GRPOTrainer(policy, toy.exact_match_reward, args=args, train_dataset=self.train_rows,
                    processing_class=self.tokenizer).train()
        result = StageResult("GRPO (exact-match reward)", "held-out accuracy", self.warm_accuracy,
                             self.accuracy(policy), time.perf_counter() - start, args.max_steps)
        self.results.append(result)
        return result

    # -- results ---------------------------------------------------------------------------------

    def write_results(self) -> str:
        header = ("| stage | metric | before | after | change | steps | time |\n"
                  "|---|---|---|---|---|---|---|")
        table = "\n".join([header] + [r.row() for r in self.results])
        (self.out / "results.md").write_text(table + "\n")
        (self.out / "results.json").write_text(json.dumps(
            {"seed": self.seed, "sizes": _jsonable(asdict(self.sizes)),
             "teacher_accuracy": getattr(self, "teacher_accuracy", None),
             "pairs": len(getattr(self, "pairs", [])), "heldout_pairs": len(getattr(self, "heldout_pairs", [])),
             "results": [asdict(r) for r in self.results]}, indent=2))
        _plot_summary(self.results, self.out / "summary.png")
        return table


def _jsonable(value):
    return json.loads(json.dumps(value, default=lambda o: asdict(o) if hasattr(o, "__dataclass_fields__") else str(o)))


def _plot_losses(losses: list[float], path: Path) -> None:
    from alignlings.trainers.metrics import plot_metrics

    plot_metrics([{"step": i + 1, "loss": v} for i, v in enumerate(losses)], path, title="warm-up")


def _plot_summary(results: list[StageResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    names = [r.stage.split(" (")[0] for r in results]
    xs = range(len(results))
    ax.bar([x - 0.2 for x in xs], [r.before for r in results], width=0.4, label="before", color="tab:gray")
    ax.bar([x + 0.2 for x in xs], [r.after for r in results], width=0.4, label="after", color="tab:green")
    for x, r in zip(xs, results):
        ax.text(x + 0.2, r.after + 0.02, f"{r.after:.0%}", ha="center", fontsize=8)
    ax.set_xticks(list(xs), names)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("accuracy")
    ax.set_title("toy addition: held-out accuracy (reward model: pairwise accuracy)")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _rich_table(results: list[StageResult]):
    from rich.table import Table

    table = Table(title="toy addition: before and after each stage")
    for column in ("stage", "metric", "before", "after", "change", "steps", "time"):
        table.add_column(column, justify="left" if column in ("stage", "metric") else "right")
    for r in results:
        table.add_row(r.stage, r.metric, f"{r.before:.1%}", f"{r.after:.1%}", f"{r.after - r.before:+.1%}",
                      str(r.steps), f"{r.seconds:.0f} s")
    return table


def run_demo(output_dir: str | Path = "runs/demo", *, quick: bool = False, seed: int = 0, show: bool = True) -> Demo:
    """Run every stage, print and write the results table; returns the ``Demo``."""
    from rich.console import Console

    from transformers.utils import logging as hf_logging

    console = Console()
    sizes = DemoSizes.quick() if quick else DemoSizes()
    before_threads, before_verbosity = torch.get_num_threads(), hf_logging.get_verbosity()
    torch.set_num_threads(sizes.num_threads)
    hf_logging.set_verbosity_error()  # generate's padding hint and save_pretrained's shard bar are noise here
    hf_logging.disable_progress_bar()
    try:
        demo = Demo(output_dir, sizes, seed=seed, show=show)
        demo.out.mkdir(parents=True, exist_ok=True)
        console.print(f"[bold]1/5 warm-up[/bold]: {sizes.warmup.steps} steps on a teacher that forgets "
                      f"{sizes.forget_carry:.0%} of carries")
        r = demo.warm_up()
        console.print(f"    held-out accuracy {r.after:.1%} (teacher {demo.teacher_accuracy:.1%}), {r.seconds:.0f} s")
        console.print("[bold]2/5 pairs[/bold]: sampling 8 answers per prompt from the warm-up model")
        pairs, held = demo.sample_pairs()
        console.print(f"    {len(pairs)} training pairs, {len(held)} held-out pairs")
        for i, (label, stage) in enumerate((("reward model", demo.reward), ("DPO", demo.dpo), ("GRPO", demo.grpo)), 3):
            console.print(f"[bold]{i}/5 {label}[/bold]")
            r = stage()
            console.print(f"    {r.metric}: {r.before:.1%} -> {r.after:.1%} in {r.seconds:.0f} s")
        demo.write_results()
        console.print(_rich_table(demo.results))
        console.print(f"plots and metrics in {demo.out}/ (summary.png, */metrics.png, */metrics.jsonl)")
        return demo
    finally:
        torch.set_num_threads(before_threads)
        hf_logging.set_verbosity(before_verbosity)
        hf_logging.enable_progress_bar()
