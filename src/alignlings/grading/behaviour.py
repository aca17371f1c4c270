"""How a module behaved on an exercise's cases: ``CaseResult``, decoding a job's reply, and whether
two modules behave alike. Used by the grader and by the spot-the-bug annotations (``bugdrill``),
apart from both so neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from alignlings.grading import values as vals


@dataclass
class CaseResult:
    """One case of one module, decoded: a value, or the error it raised."""

    value: Any = None
    error: str | None = None


def _decode_cases(raw: Any, names: list[str]) -> tuple[dict[str, CaseResult], str | None]:
    """A job's case results, accepted only in the expected form and only for the expected names."""
    if not isinstance(raw, dict) or set(raw) != set(names):
        got = sorted(map(str, raw)) if isinstance(raw, dict) else type(raw).__name__
        return {}, f"the run reported cases {got}, not the exercise's own {sorted(names)}"
    out = {}
    for name in names:
        item = raw[name]
        if isinstance(item, dict) and set(item) == {"error"} and isinstance(item["error"], str):
            out[name] = CaseResult(error=item["error"][:4000])
        elif isinstance(item, dict) and set(item) == {"value"}:
            try:
                out[name] = CaseResult(value=vals.decode(item["value"]))
            except vals.DecodeError as exc:
                return {}, f"case {name!r} came back in an unreadable form ({exc})"
        else:
            return {}, f"case {name!r} came back in an unexpected form"
    return out, None


def _same_behaviour(a: dict[str, CaseResult], b: dict[str, CaseResult], names: list[str], *,
                    rtol: float = 1e-4, atol: float = 1e-5) -> bool:
    """Two modules behave alike when every case errors alike or returns matching values."""
    for name in names:
        ra, rb = a[name], b[name]
        if (ra.error is None) != (rb.error is None):
            return False
        if ra.error is not None and rb.error is not None:
            if ra.error.split(":")[0] != rb.error.split(":")[0]:
                return False
            continue
        if vals.compare(rb.value, ra.value, rtol=rtol, atol=atol, equal_nan=True) is not None:
            return False
    return True
