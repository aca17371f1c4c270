"""The grader: runs a learner's file against the reference in a sandboxed child and builds the verdict.

Checking is by execution, never by comparing text: the exercise's cases (visible spec data, hidden
randomised shapes, edge cases) run on the learner's module and on the reference. Each learner fill
is also spliced alone into the reference, so the verdict names exactly which blanks are wrong, with
a known misconception's feedback (matched by behaviour) or a tensor diff.

The verdict is a plain dict (the JSON of ``alignlings check --json`` and of the web API):
``exercise``, ``passed``, ``blanks`` (in blank order: ``index``, ``name``, ``fill``, ``passed``,
``message``, ``misconception``, ``diff``), ``cases`` (``name``, ``kind``, ``passed``, ``message``),
``error`` (None or ``kind`` + ``message``), ``isolation``, ``stdout``, ``seconds``.
"""

from __future__ import annotations

import ast
import threading
import time
from dataclasses import dataclass
from typing import Any

from alignlings.practice import blanks as bl
from alignlings.practice.feedback import describe_case, msg
from alignlings.practice.pack import Exercise, Pack, PackError, load_pack

RUNNER = "alignlings.practice.runner:grade_job"

def _same_code(a: str, b: str) -> bool:
    try:
        return ast.dump(ast.parse(a.strip())) == ast.dump(ast.parse(b.strip()))
    except SyntaxError:
        return False


@dataclass(frozen=True)
class Submission:
    code: str
    fills: dict[int, str | None]


class Grader:
    """Grades submissions for one pack. ``warm=True`` keeps a fork server with torch imported
    (watch mode, the web app); otherwise each check starts a fresh sandboxed process."""

    def __init__(self, pack: Pack | None = None, *, warm: bool = False, isolation: str = "auto"):
        self.pack = pack or load_pack()
        self.isolation = isolation
        self._warm = None
        self._lock = threading.Lock()
        if warm:
            from alignlings.practice.sandbox import WarmSandbox

            # exercise.toml may name heavy modules its checks import (e.g. transformers): the fork
            # server imports them once instead of every job
            preload = ["torch", "alignlings.practice.runner", "alignlings.practice.runner:warm_up"]
            for ex in self.pack:
                preload += [m for m in ex.meta.get("preload", []) if m not in preload]
            self._warm = WarmSandbox(preload=preload, isolation=isolation)

    def close(self) -> None:
        if self._warm is not None:
            self._warm.close()
            self._warm = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- building the submission ------------------------------------------------------------
    def blanks(self, exercise: Exercise) -> list[bl.Blank]:
        return bl.find_blanks(exercise.solution_source)

    def submission(self, exercise: Exercise, code: str | None = None, fills: list[str] | None = None) -> Submission:
        source, blanks = exercise.solution_source, self.blanks(exercise)
        if (code is None) == (fills is None):
            raise ValueError("code, fills: give exactly one of them")
        if fills is not None:
            if not isinstance(fills, (list, tuple)) or not all(isinstance(f, str) for f in fills):
                raise ValueError("fills: expected a list of strings, one per blank")
            if len(fills) != len(blanks):
                raise ValueError(f"fills: expected {len(blanks)} fills for {exercise.id}, got {len(fills)}")
            by_index = {b.index: (f.strip() or bl.PLACEHOLDER) for b, f in zip(blanks, fills)}
            return Submission(code=bl.render(source, blanks, by_index), fills=by_index)
        return Submission(code=code, fills=bl.extract_fills(code, source, blanks))

    # -- grading ----------------------------------------------------------------------------
    def check(self, exercise_id: str, code: str | None = None, *, fills: list[str] | None = None,
              lang: str = "en", run_main: bool = True) -> dict[str, Any]:
        exercise = self.pack.get(exercise_id)
        if not exercise.is_code:
            raise PackError(f"exercise: {exercise_id!r} is a quiz; answer it with `alignlings quiz`")
        sub = self.submission(exercise, code, fills)
        source, blanks = exercise.solution_source, self.blanks(exercise)
        splices, skipped = {}, {}
        for b in blanks:
            fill = sub.fills.get(b.index)
            if fill is None or fill == bl.PLACEHOLDER:
                continue
            if _same_code(fill, b.answer):
                skipped[b.index] = True  # textually the reference: no need to run it alone
            else:
                splices[str(b.index)] = bl.splice(source, blanks, b.index, fill)
        miscs: dict[str, list[dict]] = {}
        for m in exercise.misconceptions:
            if str(m.blank) in splices:
                miscs.setdefault(str(m.blank), []).append({"id": m.id, "code": bl.splice(source, blanks, m.blank, m.fill)})
        payload = {
            "exercise_dir": str(exercise.path),
            "reference": bl.reference(source, blanks),
            "learner": sub.code,
            "splices": splices,
            "misconceptions": miscs,
            "run_main": run_main,
        }
        started = time.perf_counter()
        result = self._run(payload, exercise)
        verdict = self._verdict(exercise, blanks, sub, skipped, result, lang)
        verdict["seconds"] = round(time.perf_counter() - started, 4)
        return verdict

    def behaves_like_reference(self, exercise_id: str, variants: dict[str, str]) -> dict[str, bool]:
        """For each variant of the exercise's file (key -> full source), whether it passes every
        case that per-blank checks use, i.e. behaves like the reference. Runs in the sandbox."""
        exercise = self.pack.get(exercise_id)
        source, blanks = exercise.solution_source, self.blanks(exercise)
        payload = {"exercise_dir": str(exercise.path), "reference": bl.reference(source, blanks),
                   "learner": None, "splices": dict(variants), "misconceptions": {}, "run_main": False}
        result = self._run(payload, exercise)
        if not result.ok:
            if len(variants) == 1:
                return {key: False for key in variants}
            # one hostile or hanging variant must not sink the others: retry each alone
            out: dict[str, bool] = {}
            for key, code in variants.items():
                out.update(self.behaves_like_reference(exercise_id, {key: code}))
            return out
        return {key: bool(result.value["blanks"].get(key, {}).get("passed")) for key in variants}

    def _run(self, payload: dict, exercise: Exercise):
        from alignlings.practice.sandbox import Limits, run_job

        limits = Limits(wall_seconds=exercise.timeout, cpu_seconds=int(exercise.timeout * 3) + 5)
        readable = [str(exercise.path)]  # a pack outside the installed package must stay readable
        if self._warm is not None:
            return self._warm.run(RUNNER, payload, limits=limits, readonly_paths=readable)
        return run_job(RUNNER, payload, limits=limits, isolation=self.isolation, readonly_paths=readable)

    def _verdict(self, exercise, blanks, sub, skipped, result, lang) -> dict[str, Any]:
        verdict: dict[str, Any] = {"exercise": exercise.id, "passed": False, "blanks": [], "cases": [],
                                   "error": None, "isolation": result.isolation, "stdout": result.stdout or ""}
        value = result.value if result.ok else None
        if not result.ok:
            verdict["error"] = {"kind": result.error_kind or "crashed", "message": result.error_message or ""}
        learner = (value or {}).get("learner") or {}
        if learner.get("load_error"):
            verdict["error"] = {"kind": "exception", "message": learner["load_error"]}
        for r in learner.get("cases", []):
            verdict["cases"].append({"name": r["name"], "kind": r["kind"], "passed": r["passed"],
                                     "message": describe_case(r, lang)})
        if value and value.get("stdout"):
            verdict["stdout"] = value["stdout"]
        verdict["passed"] = bool(result.ok and not learner.get("load_error") and verdict["cases"]
                                 and all(c["passed"] for c in verdict["cases"]))
        miscs = {m.id: m for m in exercise.misconceptions}
        for b in blanks:
            fill = sub.fills.get(b.index)
            entry = {"index": b.index, "name": b.name, "fill": fill, "passed": False, "message": "",
                     "misconception": None, "diff": None}
            blank_result = (value or {}).get("blanks", {}).get(str(b.index))
            if fill is None:
                entry.update(passed=None, message=msg("not_found", lang))
            elif fill == bl.PLACEHOLDER:
                entry["message"] = msg("empty", lang)
            elif skipped.get(b.index):
                entry.update(passed=True, message=msg("correct", lang))
            elif blank_result is None:
                reason = (verdict["error"] or {}).get("kind", "error")
                entry.update(passed=None, message=msg("not_checked", lang, reason=reason))
            elif blank_result["passed"]:
                entry.update(passed=True, message=msg("correct", lang))
            elif blank_result.get("load_error"):
                entry["message"] = msg("load_error", lang, error=blank_result["load_error"].splitlines()[0])
            elif blank_result.get("misconception") in miscs:
                m = miscs[blank_result["misconception"]]
                entry.update(misconception=m.id, message=m.feedback.get(lang) or m.feedback.get("en", ""))
                entry["diff"] = (blank_result.get("failed_case") or {}).get("diff")
            else:
                failed = blank_result.get("failed_case") or {}
                entry.update(message=describe_case(failed, lang) if failed else "", diff=failed.get("diff"))
            verdict["blanks"].append(entry)
        return verdict


def template_for(exercise: Exercise, lang: str = "en") -> str:
    """The learner's template in ``lang``: generated from solution.py, never stored."""
    texts = exercise.texts(lang)
    source = exercise.solution_source
    return bl.template(source, bl.find_blanks(source), list(texts.blanks), texts.comments if lang != "en" else None)


def solution_for(exercise: Exercise, lang: str = "en") -> str:
    texts = exercise.texts(lang)
    source = exercise.solution_source
    return bl.reference(source, bl.find_blanks(source), texts.comments if lang != "en" else None)
