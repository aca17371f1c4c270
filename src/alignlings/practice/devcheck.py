"""Proofs a pack must pass (``alignlings dev check`` and CI): every template fails as shipped,
every reference solution passes, every misconception is rejected on its own blank with its own
feedback, and every exercise has all its texts in both languages."""

from __future__ import annotations

from dataclasses import dataclass, field

from alignlings.practice import blanks as bl
from alignlings.practice.pack import LANGS, Exercise, Pack

MIN_HINTS = 3
MIN_MISCONCEPTIONS = 3


@dataclass
class Report:
    exercise: str
    problems: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_texts(ex: Exercise) -> list[str]:
    problems = []
    for lang in LANGS:
        try:
            texts = ex.texts(lang)
        except Exception as exc:  # noqa: BLE001 - report every broken file, not only the first
            problems.append(f"texts/{lang}.toml: {exc}")
            continue
        if not texts.statement.strip():
            problems.append(f"texts/{lang}.toml: empty statement")
        if len(texts.hints) < MIN_HINTS:
            problems.append(f"texts/{lang}.toml: {len(texts.hints)} hints, expected at least {MIN_HINTS}")
        if not texts.explanation.strip():
            problems.append(f"texts/{lang}.toml: empty explanation")
        if lang not in ex.title:
            problems.append(f"exercise.toml: title has no {lang!r}")
        if ex.is_code:
            n = len(bl.find_blanks(ex.solution_source))
            if len(texts.blanks) != n:
                problems.append(f"texts/{lang}.toml: {len(texts.blanks)} blank descriptions for {n} blanks")
    if ex.is_code:
        for m in ex.misconceptions:
            for lang in LANGS:
                if not m.feedback.get(lang, "").strip():
                    problems.append(f"misconception {m.id}: no {lang} feedback")
        if len(ex.misconceptions) < MIN_MISCONCEPTIONS:
            problems.append(f"misconceptions.toml: {len(ex.misconceptions)}, expected at least {MIN_MISCONCEPTIONS}")
    else:
        for q in ex.quiz:
            for lang in LANGS:
                if not q.question.get(lang):
                    problems.append(f"quiz {q.id}: no {lang} question")
                for i, o in enumerate(q.options):
                    if not o.text.get(lang) or not o.why.get(lang):
                        problems.append(f"quiz {q.id} option {i}: missing {lang} text or explanation")
    return problems


def check_exercise(ex: Exercise, grader) -> Report:
    report = Report(ex.id)
    report.problems += check_texts(ex)
    report.checked.append("texts en+zh")
    if not ex.is_code:
        return report
    from alignlings.practice.grader import template_for

    blanks = bl.find_blanks(ex.solution_source)
    ref = grader.check(ex.id, fills=[b.answer for b in blanks], run_main=False)
    if not ref["passed"]:
        failing = [c["message"] for c in ref["cases"] if not c["passed"]] or [str(ref["error"])]
        report.problems.append(f"the reference solution fails: {failing[0]}")
    report.checked.append("reference passes")
    for lang in LANGS:
        tmpl = grader.check(ex.id, template_for(ex, lang), lang=lang, run_main=False)
        if tmpl["passed"]:
            report.problems.append(f"the {lang} template passes as shipped")
    report.checked.append("templates fail")
    for m in ex.misconceptions:
        fills = [m.fill if b.index == m.blank else b.answer for b in blanks]
        v = grader.check(ex.id, fills=fills, run_main=False)
        entry = next((b for b in v["blanks"] if b["index"] == m.blank), None)
        if v["passed"]:
            report.problems.append(f"misconception {m.id} (blank {m.blank}) is accepted")
        elif entry is None or entry["misconception"] != m.id:
            got = entry["misconception"] or entry["message"] if entry else "no such blank"
            report.problems.append(f"misconception {m.id} (blank {m.blank}) is rejected without its feedback: {got}")
        others = [b["index"] for b in v["blanks"] if b["index"] != m.blank and b["passed"] is not True]
        if others:
            report.problems.append(f"misconception {m.id} also marks blanks {others} wrong")
    report.checked.append(f"{len(ex.misconceptions)} misconceptions rejected")
    return report


def check_pack(pack: Pack, grader) -> list[Report]:
    return [check_exercise(ex, grader) for ex in pack]
