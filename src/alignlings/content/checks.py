"""Cases for exercise checks (used by each exercise's check.py).

A ``Case`` runs one piece of the module under test (the learner's, a splice, or the reference) inside
a sandboxed job and returns a value; the grader, in another process, compares it with the
reference's value (``practice.values.compare``) and, on a mismatch, explains it with a diff.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

KINDS = ("visible", "hidden", "edge")

MAX_VARIANTS = 4
"""How many draws of random inputs an exercise has (variant 0, the exercise's own, and 1..3): a
grader caches the reference's values per draw, so the number is bounded; a larger variant asked for
folds back into 1..MAX_VARIANTS-1 (``Grader.check``)."""

VARIANT = 0
"""Which draw of random inputs the cases make: 0 for the exercise's own cases; another number when a
review re-tests a misconception on fresh inputs. The grading job sets it before ``cases()`` runs,
for the learner's run and the reference's alike, so both always see the same draw."""


def fresh(seed: int) -> int:
    """The seed a randomised case should use: ``seed`` itself for the exercise's own cases, another
    (still deterministic) one for a review's fresh inputs. Spec data (visible cases) stays as it is."""
    return seed if VARIANT == 0 else seed + 7919 * VARIANT


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
    tensor: bool = False  # the statement asks for a tensor: a Python number (``.item()``) is not accepted

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind: expected one of {KINDS}, got {self.kind!r}")
        if self.scope not in ("all", "full"):
            raise ValueError(f"scope: expected 'all' or 'full', got {self.scope!r}")
