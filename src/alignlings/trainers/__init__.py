"""Trainers that run real transformers causal LMs: DPO, a Bradley-Terry reward model and GRPO.

    from alignlings.trainers import DPOTrainer, DPOConfig, RewardTrainer, RewardConfig, GRPOTrainer, GRPOConfig

Each trainer is one short file (setup, generate, score, loss, step, log) calling alignlings' losses;
the shared machinery is in small modules beside them:

    configs.py      the config dataclasses (TRL's field names) and TOML / ``key=value`` loading
    base.py         the step loop: accumulation, clipping, AdamW, schedule, data order
    data.py         TRL's dataset formats, tokenization, completion masks, left/right padding
    modeling.py     forward passes, completion log-probs, sampling (KV-cache loop or ``generate``)
    checkpoint.py   seeding and bit-for-bit resumable checkpoints
    distributed.py  torchrun / DDP (gloo on CPU, nccl on GPU)
    metrics.py      metrics.jsonl, the progress bar, PNG curves
    toy.py          the tiny verifiable task (2-digit addition, character tokenizer, tiny GPT-2)
    demo.py         ``alignlings train demo``: warm-up, reward model, DPO and GRPO on the toy task

Names are imported lazily, so ``import alignlings.trainers`` stays cheap until one is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alignlings._lazy import lazy_exports

_EXPORTS = {
    "TrainerConfig": "alignlings.trainers.configs",
    "DPOConfig": "alignlings.trainers.configs",
    "RewardConfig": "alignlings.trainers.configs",
    "GRPOConfig": "alignlings.trainers.configs",
    "DPOTrainer": "alignlings.trainers.dpo",
    "RewardTrainer": "alignlings.trainers.reward",
    "GRPOTrainer": "alignlings.trainers.grpo",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports('alignlings.trainers', _EXPORTS, globals())


if TYPE_CHECKING:  # pragma: no cover
    from alignlings.trainers.configs import DPOConfig, GRPOConfig, RewardConfig, TrainerConfig
    from alignlings.trainers.dpo import DPOTrainer
    from alignlings.trainers.grpo import GRPOTrainer
    from alignlings.trainers.reward import RewardTrainer
