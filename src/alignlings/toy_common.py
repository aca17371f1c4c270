"""What the toy runs (``toy_grpo``, ``toy_dpo``, ``toy_ppo``) share: config checks, the seeded run
wrapper and the P(target) summary of a result.

Every toy run seeds torch's global generator itself and must leave the caller's state as it found
it: :func:`run_seeded` forks the RNG, pins the thread count (one thread is fastest for a 16-wide
model) and restores both afterwards. Importing this module imports torch but not transformers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch

C = TypeVar("C")
R = TypeVar("R")


def check_counts(config: object, *names: str) -> None:
    """Each named field an int >= 1 (not a bool), else ``ValueError`` naming it."""
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected an int >= 1, got {value!r}")


def check_seed_and_lr(config: Any) -> None:
    """``seed`` an int and ``lr`` > 0, else ``ValueError`` naming the field."""
    if isinstance(config.seed, bool) or not isinstance(config.seed, int):
        raise ValueError(f"seed: expected an int, got {config.seed!r}")
    if not config.lr > 0:
        raise ValueError(f"lr: expected a value > 0, got {config.lr!r}")


class TargetCurve:
    """Mixin for a result with a ``p_target`` curve (index 0 = before training)."""

    p_target: list[float]

    @property
    def p_target_initial(self) -> float:
        return self.p_target[0]

    @property
    def p_target_final(self) -> float:
        return self.p_target[-1]


def run_seeded(config: C | None, config_type: type[C], train: Callable[[C, Any], R], callback: Any,
               num_threads: int = 1) -> R:
    """``train(config, callback)`` with torch's RNG forked and ``num_threads`` threads, both restored.

    ``config`` None means ``config_type()``; anything else but a ``config_type`` is a ``ValueError``,
    as is a ``callback`` that is neither None nor callable."""
    if config is None:
        config = config_type()
    if not isinstance(config, config_type):
        raise ValueError(f"config: expected a {config_type.__name__}, got {type(config).__name__}")
    if callback is not None and not callable(callback):
        raise ValueError(f"callback: expected a callable or None, got {type(callback).__name__}")
    threads = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    try:
        with torch.random.fork_rng(devices=[]):
            return train(config, callback)
    finally:
        torch.set_num_threads(threads)
