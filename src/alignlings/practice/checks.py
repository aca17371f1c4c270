"""Cases and value comparison for exercise checks (used by each exercise's check.py).

A ``Case`` runs one piece of the learner's module and returns a value; the grader compares it with
the reference's value on the same case and, on a mismatch, explains it with a tensor diff.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

KINDS = ("visible", "hidden", "edge")


@dataclass
class Case:
    """One check. ``run(module) -> value``; see docs/pack-format.md."""

    name: str
    kind: str
    run: Callable[[Any], Any]
    note: dict[str, str] = field(default_factory=dict)  # shown when the case fails (why it matters)
    rtol: float = 1e-5
    atol: float = 1e-6
    expect: Callable[[Any], tuple[bool, str]] | None = None  # judge the value itself, not vs the reference
    scope: str = "all"  # "all": also for per-blank splices; "full": only the learner's whole file
    label: dict[str, str] = field(default_factory=dict)  # the case's name per language (zh); default ``name``

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind: expected one of {KINDS}, got {self.kind!r}")
        if self.scope not in ("all", "full"):
            raise ValueError(f"scope: expected 'all' or 'full', got {self.scope!r}")


def _is_tensor(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "shape") and hasattr(x, "dtype")


def _fmt(x: float) -> float | str:
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x


def compare(expected: Any, got: Any, *, rtol: float = 1e-5, atol: float = 1e-6, equal_nan: bool = False,
            path: str = "") -> dict | None:
    """None when ``got`` matches ``expected``; otherwise a JSON-able diff.

    Diff keys: ``path`` (where in a nested value), ``reason`` ("type", "shape", "dtype", "value",
    "nonfinite", "length", "keys"), and for tensors ``expected_shape``/``got_shape``,
    ``expected_dtype``/``got_dtype``, ``max_abs_diff``, ``mean_abs_diff``, ``first`` (up to 5 of
    ``{"index", "expected", "got"}``).
    """
    import torch

    where = path or "value"
    if _is_tensor(expected):
        if not _is_tensor(got):
            return {"path": where, "reason": "type", "expected": f"tensor {tuple(expected.shape)}",
                    "got": type(got).__name__}
        if tuple(got.shape) != tuple(expected.shape):
            return {"path": where, "reason": "shape", "expected_shape": list(expected.shape),
                    "got_shape": list(got.shape)}
        if got.dtype != expected.dtype:
            return {"path": where, "reason": "dtype", "expected_dtype": str(expected.dtype).replace("torch.", ""),
                    "got_dtype": str(got.dtype).replace("torch.", "")}
        e = expected.detach().to("cpu")
        g = got.detach().to("cpu")
        if not torch.is_floating_point(e):
            bad = e != g
        else:
            e64, g64 = e.double(), g.double()
            close = torch.isclose(g64, e64, rtol=rtol, atol=atol, equal_nan=equal_nan)
            bad = ~close
        if not bool(bad.any()):
            return None
        diff: dict[str, Any] = {"path": where, "reason": "value", "shape": list(e.shape)}
        if torch.is_floating_point(e):
            finite_e = torch.isfinite(e)
            if bool((finite_e & ~torch.isfinite(g)).any()):
                diff["reason"] = "nonfinite"
            d = (g.double() - e.double()).abs()
            d = torch.where(torch.isnan(d), torch.full_like(d, math.inf), d)
            diff["max_abs_diff"] = _fmt(d.max().item())
            diff["mean_abs_diff"] = _fmt(d.mean().item())
        idx = bad.nonzero()[:5]
        diff["first"] = [
            {"index": [int(i) for i in row.tolist()],
             "expected": _fmt(e[tuple(row.tolist())].item()), "got": _fmt(g[tuple(row.tolist())].item())}
            for row in idx
        ]
        return diff
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            return {"path": where, "reason": "keys", "expected": sorted(map(str, expected)),
                    "got": sorted(map(str, got)) if isinstance(got, dict) else type(got).__name__}
        for k in expected:
            d = compare(expected[k], got[k], rtol=rtol, atol=atol, equal_nan=equal_nan, path=f"{where}[{k!r}]")
            if d:
                return d
        return None
    if isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            return {"path": where, "reason": "length", "expected": len(expected),
                    "got": len(got) if isinstance(got, (list, tuple)) else type(got).__name__}
        for i, (a, b) in enumerate(zip(expected, got)):
            d = compare(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan, path=f"{where}[{i}]")
            if d:
                return d
        return None
    if isinstance(expected, bool) or isinstance(got, bool):
        return None if expected == got else {"path": where, "reason": "value", "expected": expected, "got": _safe(got)}
    if isinstance(expected, (int, float)):
        if _is_tensor(got) and got.numel() == 1:
            got = got.item()
        if not isinstance(got, (int, float)):
            return {"path": where, "reason": "type", "expected": type(expected).__name__, "got": type(got).__name__}
        if math.isnan(expected) and math.isnan(got) and equal_nan:
            return None
        if math.isfinite(expected) and not math.isfinite(got):
            return {"path": where, "reason": "nonfinite", "expected": expected, "got": _fmt(float(got))}
        if math.isclose(got, expected, rel_tol=rtol, abs_tol=atol) or (expected == got):
            return None
        return {"path": where, "reason": "value", "expected": _fmt(float(expected)), "got": _fmt(float(got)),
                "max_abs_diff": _fmt(abs(float(got) - float(expected)))}
    return None if expected == got else {"path": where, "reason": "value", "expected": _safe(expected),
                                         "got": _safe(got)}


def _safe(x: Any) -> Any:
    if isinstance(x, (int, float, str, bool)) or x is None:
        return _fmt(x) if isinstance(x, float) else x
    return repr(x)[:200]
