"""The training loop the three trainers share: setup, the step loop, accumulation, clipping, logging.

A trainer subclasses ``BaseTrainer`` and writes one method, ``training_step(rows) -> metrics``, in
which it scores its micro-batches, calls an alignlings loss and calls ``self.backward`` on each;
``self.optimizer_step()`` then clips and steps. Everything else lives here or in the small modules
next to it:

    setup        seeds, device, process group (distributed.py), optimiser and schedule
    data         ``DataStream``: a seeded, resumable order over the rows; each process its slice
    loop         ``train()``: steps, metrics (metrics.py), checkpoints (checkpoint.py), final save
"""

from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path
from typing import Any

import torch

from alignlings.trainers import checkpoint as ckpt
from alignlings.trainers.configs import TrainerConfig
from alignlings.trainers.distributed import (
    DistInfo, all_reduce_sum, barrier, mean_over_processes, setup_distributed, unwrap, wrap_model,
)
from alignlings.trainers.metrics import MetricsLog, Progress, plot_metrics
from alignlings.trainers.modeling import disable_dropout
from alignlings.trainers.optim import clip_grad_norm, fused_adamw_step


class DataStream:
    """Row indices in a seeded order, one global batch at a time, resumable from (epoch, position).

    Epoch e visits the rows in ``randperm(n, seed + e)``. What happens to the rows left at the end of
    an epoch follows TRL 1.16:

    * ``drop_last=False`` (DPO, reward model: transformers' ``dataloader_drop_last=False``): they form
      a last, smaller batch, and a dataset smaller than one batch trains on all its rows each step.
      Under several processes a short last batch is topped up from the start of the epoch's order so
      every process gets rows (accelerate's ``even_batches``).
    * ``drop_last=True`` (GRPO: TRL's ``RepeatSampler`` keeps only full batches of prompts): they are
      skipped, and a dataset smaller than one batch is refused.

    Process r takes its slice of each global batch, so N processes see the same global batch as one
    process would.
    """

    def __init__(self, num_rows: int, rows_per_process: int, info: DistInfo, seed: int,
                 drop_last: bool = False) -> None:
        global_batch = rows_per_process * info.world_size
        if drop_last and num_rows < global_batch:
            raise ValueError(
                f"train_dataset: {num_rows} rows cannot fill one global batch of {global_batch} rows "
                f"({rows_per_process} per process x {info.world_size} processes)"
            )
        self.num_rows, self.k, self.info, self.seed = num_rows, rows_per_process, info, seed
        self.drop_last = drop_last
        self.epoch, self.position = 0, 0
        self._order = self._permutation()

    def _permutation(self) -> list[int]:
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        return torch.randperm(self.num_rows, generator=g).tolist()

    @property
    def batches_per_epoch(self) -> int:
        size = self.k * self.info.world_size
        return self.num_rows // size if self.drop_last else math.ceil(self.num_rows / size)

    def next(self) -> list[int]:
        """This process's row indices of the next global batch."""
        size = self.k * self.info.world_size
        needed = size if self.drop_last else 1
        if self.position + needed > self.num_rows:
            self.epoch, self.position = self.epoch + 1, 0
            self._order = self._permutation()
        batch = self._order[self.position: self.position + size]
        self.position += len(batch)
        world, r = self.info.world_size, self.info.rank
        if len(batch) == size:
            return batch[r * self.k: (r + 1) * self.k]
        # a short last batch: every process gets ceil(len / world) rows, topped up from the epoch's start
        per = math.ceil(len(batch) / world)
        batch = batch + [self._order[i % self.num_rows] for i in range(per * world - len(batch))]
        return batch[r * per: (r + 1) * per]

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.position = state["epoch"], state["position"]
        self._order = self._permutation()


def decay_parameter_names(model: torch.nn.Module) -> set[str]:
    """Names of the parameters AdamW decays: transformers' ``Trainer.get_decay_parameter_names`` rule
    (nothing inside an ``nn.LayerNorm``, no name matching bias / layernorm / rmsnorm / norm)."""
    from transformers.trainer_pt_utils import get_parameter_names

    patterns = [r"bias", r"layernorm", r"rmsnorm", r"(?:^|\.)norm(?:$|\.)", r"_norm(?:$|\.)"]
    return set(get_parameter_names(model, [torch.nn.LayerNorm], patterns))


def warmup_steps_for(warmup_steps: float, total: int) -> int:
    """transformers' ``TrainingArguments.get_warmup_steps``: >= 1 is a count, < 1 a ratio of ``total``."""
    return int(warmup_steps) if warmup_steps >= 1 else math.ceil(total * warmup_steps)


class BaseTrainer:
    """Shared machinery; see the module docstring. Subclasses set ``name`` and ``progress_keys``."""

    name = "train"
    progress_keys: tuple[str, ...] = ("loss",)
    #: DDP option, for models with trainable parameters a step may not reach (see distributed.py)
    find_unused_parameters = False

    def __init__(self, model: torch.nn.Module, args: TrainerConfig, train_dataset, processing_class=None) -> None:
        # -- setup ---------------------------------------------------------------------------
        self.args = args
        self.dist = setup_distributed(args.use_cpu)
        self.device = self.dist.device
        ckpt.set_seed(args.seed)  # the same seed on every process: identical models and draws
        self.tokenizer = processing_class
        model = model.to(self.device)
        if args.disable_dropout:
            disable_dropout(model)
        model.train()
        self.model = wrap_model(model, self.dist, find_unused_parameters=self.find_unused_parameters)
        self.train_dataset = train_dataset
        self.step = 0
        self.num_tokens = 0  # TRL's ``num_tokens``: attention-mask tokens seen so far, all processes
        self.extra_state: dict[str, Any] = {}  # small per-trainer state saved in checkpoints

    @property
    def unwrapped_model(self) -> torch.nn.Module:
        return unwrap(self.model)

    @property
    def lean(self) -> bool:
        """Scoring and sampling may take the lean decoder (``decode.py``; it still steps aside where it
        does not reproduce the model); False with ``model_forward=True``: the model's own forward
        and ``generate``."""
        return not self.args.model_forward

    def lean_check_due(self) -> bool:
        """This step compares the lean path with ``forward`` (``lean_check_steps``)."""
        every = self.args.lean_check_steps
        return bool(every) and self.lean and self.step % every == 0

    drop_last = False  # see DataStream

    def _setup_optimizer(self, rows_per_step: int, num_rows: int) -> None:
        """AdamW over trainable parameters, the learning-rate schedule and the data order.

        As transformers' ``Trainer``: two parameter groups, ``weight_decay`` on the decayed ones and 0
        on biases and normalisation weights; the schedule is ``transformers.get_scheduler``."""
        from transformers import get_scheduler

        args = self.args
        self.data = DataStream(num_rows, rows_per_step, self.dist, args.seed, drop_last=self.drop_last)
        if args.max_steps == -1:
            self.max_steps = max(1, math.ceil(args.num_train_epochs * self.data.batches_per_epoch))
        else:
            self.max_steps = args.max_steps
        named = [(n, p) for n, p in self.unwrapped_model.named_parameters() if p.requires_grad]
        decay = decay_parameter_names(self.unwrapped_model)
        params = self._trainable = [p for _, p in named]
        groups = [
            {"params": [p for n, p in named if n in decay], "weight_decay": args.weight_decay},
            {"params": [p for n, p in named if n not in decay], "weight_decay": 0.0},
        ]
        groups = [g for g in groups if g["params"]]
        fused = args.optim == "adamw_torch_fused" and all(
            p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params)
        self.optimizer = torch.optim.AdamW(
            groups, lr=args.learning_rate, betas=(args.adam_beta1, args.adam_beta2),
            eps=args.adam_epsilon, fused=fused or None,
        )
        self.scheduler = get_scheduler(
            args.lr_scheduler_type, self.optimizer,
            num_warmup_steps=warmup_steps_for(args.warmup_steps, self.max_steps), num_training_steps=self.max_steps,
        )

    # -- the pieces a training_step uses ---------------------------------------------------------

    def micro_batches(self, rows: list[int]) -> list[list[int]]:
        """Split this process's rows of a step into ``gradient_accumulation_steps`` micro-batches."""
        n = self.args.per_device_train_batch_size
        return [rows[i: i + n] for i in range(0, len(rows), n)]

    def autocast(self):
        """bf16 autocast over a step's forward passes when ``args.bf16`` (weights stay float32)."""
        if not self.args.bf16:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)

    def backward(self, loss: torch.Tensor, micro_index: int, num_micro: int) -> None:
        """Backward one micro-batch's loss; DDP averages gradients only after the last one."""
        last = micro_index == num_micro - 1
        sync = contextlib.nullcontext() if last or self.dist.world_size == 1 else self.model.no_sync()
        with sync, torch.autocast(device_type=self.device.type, enabled=False):  # backward outside autocast
            loss.backward()

    def optimizer_step(self) -> dict[str, float]:
        """Clip, step, schedule, zero; returns ``grad_norm`` (before clipping) and ``learning_rate``."""
        params = self._trainable
        max_norm = self.args.max_grad_norm if self.args.max_grad_norm > 0 else float("inf")
        grad_norm = clip_grad_norm(params, max_norm)  # torch's clip_grad_norm_, bitwise, less Python
        lr = self.scheduler.get_last_lr()[0]
        if not fused_adamw_step(self.optimizer):  # the same kernels as optimizer.step(), where it applies
            self.optimizer.step()
        self.scheduler.step()
        for p in params:  # zero_grad(set_to_none=True) over the optimiser's parameters, without its
            p.grad = None  # profiler record and per-group loops (~40 us of a 4 ms step)
        return {"grad_norm": float(grad_norm), "learning_rate": lr}

    def count_tokens(self, attention_mask: torch.Tensor | int) -> dict[str, float]:
        """Add a micro-batch's real tokens (summed over processes) to ``num_tokens``; TRL's metric.
        ``attention_mask``: the batch's mask, or its count when the collator knows it already."""
        count = attention_mask.sum() if isinstance(attention_mask, torch.Tensor) else attention_mask
        if self.dist.world_size > 1:
            count = all_reduce_sum(torch.as_tensor(count, dtype=torch.float, device=self.device))
        self.num_tokens += int(count)
        return {"num_tokens": float(self.num_tokens)}

    def training_step(self, rows: list[int]) -> dict[str, float]:  # pragma: no cover - abstract
        raise NotImplementedError

    def next_rows(self) -> list[int]:
        return self.data.next()

    # -- the loop ----------------------------------------------------------------------------------

    def train(self, resume_from_checkpoint: str | None = None) -> list[dict[str, float]]:
        """Run until ``max_steps``; returns the logged metric rows (also in ``metrics.jsonl``)."""
        args = self.args
        out = Path(args.output_dir)
        resume = resume_from_checkpoint or args.resume_from_checkpoint
        if resume:
            self.load(ckpt.resolve_checkpoint(resume, out))
        self.log = MetricsLog(out / "metrics.jsonl", args.logging_steps, enabled=self.dist.is_main)
        if self.dist.is_main:
            self.log.truncate(after_step=self.step)  # a fresh run starts a fresh log; a resumed one cuts it
        progress = Progress(self.max_steps, self.name, enabled=self.dist.is_main and not args.disable_tqdm,
                            start=self.step, show=self.progress_keys)
        with progress:
            while self.step < self.max_steps:
                start = time.perf_counter()
                with self.autocast():
                    metrics = self.training_step(self.next_rows())
                self.step += 1
                metrics = mean_over_processes(metrics, self.device)
                metrics["step_time"] = time.perf_counter() - start
                self.log.add(self.step, metrics, force=self.step == self.max_steps)
                progress.update(metrics)
                if args.save_steps and self.step % args.save_steps == 0:
                    self.save(ckpt.checkpoint_dir(out, self.step))
        self._finish(out)
        return self.log.history

    def _finish(self, out: Path) -> None:
        if not self.dist.is_main:
            return
        model = self.unwrapped_model
        if self.args.save_final_model:
            if hasattr(model, "save_pretrained"):
                model.save_pretrained(out)
            else:  # e.g. a RewardModel: a plain state_dict
                torch.save(model.state_dict(), out / "model.pt")
            if self.tokenizer is not None and hasattr(self.tokenizer, "save_pretrained"):
                self.tokenizer.save_pretrained(out)
        if self.args.plot and self.log.history:
            plot_metrics(self.log.history, out / "metrics.png", title=f"{type(self).__name__}: {out}",
                         first=self.progress_keys)

    # -- checkpoints ------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {"step": self.step, "data": self.data.state_dict(), "trainer": type(self).__name__,
                "num_tokens": self.num_tokens}

    def save(self, path: Path) -> None:
        """A resumable checkpoint (see checkpoint.py); every process writes its RNG state."""
        ckpt.save_checkpoint(
            path, model=self.unwrapped_model, optimizer=self.optimizer, scheduler=self.scheduler,
            state=self.state(), extra=self.extra_state or None, rank=self.dist.rank, is_main=self.dist.is_main,
        )
        barrier()
        if self.dist.is_main:
            ckpt.prune_checkpoints(self.args.output_dir, self.args.save_total_limit)

    def load(self, path: Path) -> None:
        state, extra = ckpt.load_checkpoint(
            path, model=self.unwrapped_model, optimizer=self.optimizer, scheduler=self.scheduler,
            rank=self.dist.rank, device=self.device,
        )
        self.step = state["step"]
        self.num_tokens = state.get("num_tokens", 0)
        self.data.load_state_dict(state["data"])
        self.extra_state = extra or {}
