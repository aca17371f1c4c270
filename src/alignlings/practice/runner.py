"""What runs inside the sandboxed child: load modules from source, run an exercise's cases.

``grade_job(payload)`` is the sandbox target. Everything here treats learner code as hostile
data: the reference's outputs are computed before any learner code runs, and comparisons use
functions bound at import time, so a submission that patches torch cannot fake a pass.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
import traceback
import types
from pathlib import Path
from typing import Any

from alignlings.practice.checks import Case, compare

_compare = compare  # bound before learner code runs
STDOUT_CAP = 8000


class _CappedIO(io.StringIO):
    def write(self, s):
        if self.tell() < STDOUT_CAP:
            super().write(s[: STDOUT_CAP - self.tell()])
        return len(s)


def _tail(exc: BaseException, filename: str = "exercise.py", limit: int = 6) -> str:
    """The traceback lines that point into the learner's file, plus the error itself."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    lines = [f'  line {f.lineno}: {f.line}' for f in frames[-limit:] if f.line]
    head = f"{type(exc).__name__}: {exc}"
    return "\n".join([head, *lines]) if lines else head


def load_module(code: str, name: str = "exercise", *, main: bool = False) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = "exercise.py"
    if main:
        module.__name__ = "__main__"
    exec(compile(code, "exercise.py", "exec"), module.__dict__)  # noqa: S102 - this is the sandbox
    return module


def load_cases(exercise_dir: str) -> list[Case]:
    path = Path(exercise_dir) / "check.py"
    spec = importlib.util.spec_from_file_location(f"_alignlings_check_{Path(exercise_dir).name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return list(mod.cases())


def _run(case: Case, module) -> tuple[bool, Any, str | None]:
    try:
        with contextlib.redirect_stdout(_CappedIO()):
            return True, case.run(module), None
    except Exception as exc:  # noqa: BLE001 - learner code may raise anything
        return False, None, _tail(exc)


def _judge(case: Case, expected: Any, module) -> dict:
    """Run one case on a module and judge it against the reference value (or the case's predicate)."""
    ok, value, error = _run(case, module)
    result: dict[str, Any] = {"name": case.name, "kind": case.kind, "passed": False, "error": error,
                              "diff": None, "detail": None, "note": case.note or None}
    if not ok:
        return result | {"_value": None}
    if case.expect is not None:
        try:
            passed, detail = case.expect(value)
        except Exception as exc:  # noqa: BLE001
            passed, detail = False, _tail(exc)
        return result | {"passed": bool(passed), "detail": detail, "_value": value}
    diff = _compare(expected, value, rtol=case.rtol, atol=case.atol)
    return result | {"passed": diff is None, "diff": diff, "_value": value}


def _same_behaviour(a: list[dict], b: list[dict]) -> bool:
    """Two failing modules behave alike when every case errors alike or returns matching values."""
    for ra, rb in zip(a, b):
        if (ra["error"] is None) != (rb["error"] is None):
            return False
        if ra["error"] is not None:
            if ra["error"].split(":")[0] != rb["error"].split(":")[0]:
                return False
            continue
        if ra["passed"] and rb["passed"]:
            continue
        if _compare(rb["_value"], ra["_value"], rtol=1e-4, atol=1e-5, equal_nan=True) is not None:
            return False
    return True


def _evaluate(cases: list[Case], expected: dict[str, Any], code: str) -> dict:
    try:
        with contextlib.redirect_stdout(_CappedIO()):
            module = load_module(code)
    except BaseException as exc:  # noqa: BLE001 - SyntaxError, NameError at import, SystemExit...
        if isinstance(exc, KeyboardInterrupt):
            raise
        return {"load_error": _tail(exc), "cases": []}
    return {"load_error": None, "cases": [_judge(c, expected[c.name], module) for c in cases]}


def _public(results: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("_")} for r in results]


def grade_job(payload: dict) -> dict:
    """Grade one submission.

    payload: ``exercise_dir``; ``reference`` (the solution's code); ``learner`` (code or None);
    ``splices`` {blank index: code with only that blank from the learner}; ``misconceptions``
    {blank index: [{"id", "code"}]}; ``run_main`` (also run the learner's file as __main__ and
    capture what it prints).
    """
    cases = load_cases(payload["exercise_dir"])
    reference = load_module(payload["reference"], "reference")
    expected = {}
    for case in cases:
        if case.expect is not None:  # judged by its predicate, the reference's value is never used
            expected[case.name] = None
            continue
        ok, value, error = _run(case, reference)
        if not ok:
            raise RuntimeError(f"the reference solution fails case {case.name!r}: {error}")
        expected[case.name] = value

    out: dict[str, Any] = {"learner": None, "blanks": {}, "stdout": None}
    if payload.get("learner") is not None:
        learner = _evaluate(cases, expected, payload["learner"])
        out["learner"] = {"load_error": learner["load_error"], "cases": _public(learner["cases"])}

    blank_cases = [c for c in cases if c.scope == "all"]
    for index, code in (payload.get("splices") or {}).items():
        res = _evaluate(blank_cases, expected, code)
        verdict: dict[str, Any] = {"passed": res["load_error"] is None and all(r["passed"] for r in res["cases"]),
                                   "load_error": res["load_error"], "misconception": None, "failed_case": None}
        if not verdict["passed"] and res["load_error"] is None:
            failed = next(r for r in res["cases"] if not r["passed"])
            verdict["failed_case"] = _public([failed])[0]
            for m in (payload.get("misconceptions") or {}).get(str(index), []):
                other = _evaluate(blank_cases, expected, m["code"])
                if other["load_error"] is None and _same_behaviour(res["cases"], other["cases"]):
                    verdict["misconception"] = m["id"]
                    break
        out["blanks"][str(index)] = verdict

    if payload.get("run_main") and payload.get("learner") is not None and out["learner"]["load_error"] is None:
        buf = _CappedIO()
        try:
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                load_module(payload["learner"], main=True)
        except BaseException as exc:  # noqa: BLE001
            if isinstance(exc, KeyboardInterrupt):
                raise
            buf.write("\n" + _tail(exc))
        out["stdout"] = buf.getvalue()
    sys.stdout.flush()
    return out


def warm_up() -> None:
    """Called once in the warm grader's fork server: run the torch paths checks use (autograd,
    logsigmoid, gather, Adam) so every forked job starts with them initialised."""
    import torch
    import torch.nn.functional as F

    x = torch.randn(4, 8, requires_grad=True)
    y = F.logsigmoid(x).mean() + F.log_softmax(x, -1).gather(-1, torch.zeros(4, 1, dtype=torch.long)).sum()
    y.backward()
    opt = torch.optim.Adam([x], lr=1e-3)
    opt.step()
    _compare(torch.zeros(3), torch.ones(3))
