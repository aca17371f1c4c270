"""The one verdict type: what grading a piece of learner work returns, to every interface.

The grader builds it (``Grader.check``), a quiz round builds it (``service.quiz_round_verdict``);
the CLI, the web API (its JSON), notebooks and the progress store read it. It is a ``TypedDict``
so that it stays the plain JSON object that ``alignlings check --json`` prints and the web API
returns, while type checkers and readers see its fields in one place.
"""

from __future__ import annotations

from typing import Any, TypedDict


class BlankVerdict(TypedDict):
    index: int
    name: str
    fill: str | None
    passed: bool | None  # None: not checked (the fill was not found, or the run stopped early)
    message: str
    misconception: str | None  # the id of the known mistake this fill behaves like
    diff: dict[str, Any] | None  # values.compare's diff for the first failing case


class CaseVerdict(TypedDict):
    name: str
    label: dict[str, str]  # the case's name per language
    kind: str  # "visible" | "hidden" | "edge"
    passed: bool
    message: str


class VerdictError(TypedDict):
    kind: str  # sandbox.ERROR_KINDS, "exception" (the file does not load) or "forbidden"
    message: str


class Verdict(TypedDict, total=False):
    exercise: str
    passed: bool
    blanks: list[BlankVerdict]
    cases: list[CaseVerdict]
    error: VerdictError | None
    isolation: str
    stdout: str
    seconds: float
    variant: int  # which draw of hidden inputs the check used (checks.fresh; 0: the exercise's own)
    level: int  # levels 4 and 5 only (practice.levels): the level the whole file was graded at
    misconception: dict[str, Any] | None  # levels 4 and 5: the known mistake the file's outputs match
    score: int  # quiz rounds only
    total: int  # quiz rounds only
