"""Input checks shared by the losses: every error names the argument, what it got and what was expected."""

from __future__ import annotations

from collections.abc import Iterable

import torch


def as_tensor(name: str, value) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    try:
        return torch.as_tensor(value, dtype=torch.get_default_dtype())
    except (TypeError, ValueError, RuntimeError) as exc:
        raise ValueError(f"{name}: expected a tensor or a sequence of numbers, got {type(value).__name__}") from exc


def check_floating(name: str, t: torch.Tensor) -> None:
    if not torch.is_floating_point(t):
        raise ValueError(f"{name}: expected a floating-point tensor, got dtype {t.dtype}")


def check_ndim(name: str, t: torch.Tensor, ndim: int | Iterable[int], what: str) -> None:
    allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    if t.dim() not in allowed:
        raise ValueError(f"{name}: expected {what}, got shape {tuple(t.shape)}")


def check_same_shape(name: str, t: torch.Tensor, ref_name: str, ref: torch.Tensor) -> None:
    if t.shape != ref.shape:
        raise ValueError(
            f"{name}: expected the same shape as {ref_name} {tuple(ref.shape)}, got shape {tuple(t.shape)}"
        )


def check_choice(name: str, value: str, choices: Iterable[str]) -> None:
    choices = list(choices)
    if value not in choices:
        raise ValueError(f"{name}: unknown value {value!r}; expected one of {', '.join(map(repr, choices))}")


def check_range(name: str, value: float, *, low: float | None = None, high: float | None = None,
                low_open: bool = False, high_open: bool = False) -> None:
    bad = (
        (low is not None and (value <= low if low_open else value < low))
        or (high is not None and (value >= high if high_open else value > high))
    )
    if bad:
        lo = "" if low is None else ("(" if low_open else "[") + str(low)
        hi = "" if high is None else str(high) + (")" if high_open else "]")
        raise ValueError(f"{name}: expected a value in {lo or '(-inf'}, {hi or 'inf)'}, got {value!r}")


def reduce(loss: torch.Tensor, reduction: str) -> torch.Tensor:
    """Apply a torch.nn.functional-style reduction: 'mean' | 'sum' | 'none'."""
    check_choice("reduction", reduction, ("mean", "sum", "none"))
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss
