"""Predict items (``kind = "predict"``, issue 21 §5): the learner commits to what a small run will
show, then the run (``variant.py``, in its own process, cached) gives the numbers, a chart and the
explanation (data: ``practice.predict``; rules: ``Practice.predict_answer``).

In spaced review each question is an item ``predict/QUESTION``: asked again like a quiz question,
then the (cached) result and the explanation are shown. ``dev check`` runs every variant afresh and
proves ``supports(run()) == answer``, that the result texts' names are measured values, that the
chart's series were measured, and that the concept tags are the pack's.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from alignlings.i18n import LANGS
from alignlings.content.kinds import Kind, ReviewItemKind, register, skeletons


class Predict(Kind):
    # an option chosen, then the (cached) variant is run: queued like code
    review_item_kinds = (ReviewItemKind("predict", "question", answer="choice"),)
    name = "predict"
    label = {"en": "predict", "zh": "预测"}
    cli_answer = "predict"
    texts_need_hints = False  # a statement only (``TEXT_KEYS``): see ``text_problems``
    review_needs_grader = False  # the variant runs in its own process (practice.predict), not the grader
    asks_predictions = True

    def predictions(self, ex):
        from alignlings.content.predictions import load_questions

        return load_questions(ex)

    def review_items(self, rv, ex):
        return [rv.Item(f"predict/{q.id}", "predict", ex.pack, ex.key, q.concepts, question=q.id) for q in ex.predict]

    def review_prompt(self, rv, review, item, base, lang):
        ex = review.pack.get(item.exercise)
        q = next(q for q in ex.predict if q.id == item.question)
        return rv.PredictPrompt(**base, question=q.question.get(lang, ""),
                                options=[o.text.get(lang, "") for o in q.options], statement=ex.texts(lang).statement)

    def review_check(self, rv, review, item, answer, grader, lang):
        from alignlings.content.kinds.quiz import check_choice

        ex = review.pack.get(item.exercise)
        q = next(q for q in ex.predict if q.id == item.question)
        out = check_choice(q, answer, lang)  # judged before anything is run: the answer is committed
        out.update(measured(ex, q, lang))
        return out

    def question_ids(self, ex):
        return [q.id for q in ex.predict]

    def recorded_questions(self, ex):
        return tuple(ex.predict)

    # the teacher's report judges a question by the learner's first prediction, committed before any
    # run was seen; a later answer to the same question repeats what the run showed
    first_answer_counts = True

    def text_problems(self, ex):
        return statement_only(ex)

    def dev_check(self, ex, grader):
        return check_predict(ex)

    def skeleton(self, exercise_id):
        return skeletons.predict(exercise_id)


def measured(ex, q, lang: str) -> dict:
    """The run's part of an answer: ``result_text``, ``values``, ``series``, ``chart``, ``explanation``,
    and ``run_error`` (a sentence, no traceback) when the variant could not be run."""
    from alignlings.content import predictions as pr

    explanation = q.explanation.get(lang, q.explanation["en"])
    try:
        run = pr.run_variant(ex, q)
    except pr.VariantError as exc:
        pr.log.warning("predict run of %s/%s failed: %s\n%s", ex.key, q.id, exc.message, exc.detail)
        return {"result_text": None, "values": {}, "series": {}, "chart": None, "explanation": explanation,
                "run_error": exc.message, "cached": False}
    return {"result_text": pr.result_text(q, run.values, lang), "values": run.values, "series": run.series,
            "chart": pr.chart_data(q, run, lang), "explanation": explanation, "run_error": None,
            "cached": run.cached}


TEXT_KEYS = ("statement",)
"""What a predict item's texts/<lang>.toml may hold. Neither interface shows hints before the learner
commits (a hint would answer the question, the point being to find out what one expected), and the
explanation a learner reads after the run is each question's ``explanation`` in predict.toml, so
``hints``, ``explanation`` (and ``blanks``, ``blank_hints``, ``story``...) there would be dead text."""


def statement_only(ex) -> list[str]:
    """``dev check``: texts/<lang>.toml of a predict item holds nothing but its statement."""
    problems = []
    for lang in LANGS:
        path = ex.path / "texts" / f"{lang}.toml"
        try:
            with path.open("rb") as f:
                table = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError):
            continue  # reported by the texts check
        for key in table:
            if key in TEXT_KEYS:
                continue
            why = ("a predict item shows no hints: they would answer the question before the learner commits"
                   if key in ("hints", "blank_hints") else
                   "never shown: the explanation after the run is each question's explanation.en/zh in predict.toml"
                   if key == "explanation" else "a predict item's texts hold only its statement")
            problems.append(f"texts/{lang}.toml: {key}: {why}; remove it")
    return problems


def _functions(path: Path) -> set[str] | None:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def check_predict(ex) -> tuple[list[str], list[str]]:
    """``dev check`` of a predict item: (problems as ``FILE:LINE: message``, what was checked)."""
    from alignlings.content import predictions as pr
    from alignlings.content.packdata import PackError

    toml, variant = ex.path / "predict.toml", ex.path / "variant.py"
    try:
        questions = ex.predict
    except PackError as exc:
        text = str(exc)
        return [text if text.startswith(str(toml)) and ":" in text[len(str(toml)):][:8] else f"{toml}:1: {text}"], []
    problems: list[str] = []
    defined = _functions(variant)
    if defined is None:
        problems.append(f"{variant}:1: variant.py is missing or not valid Python")
    for i, q in enumerate(questions):
        def at(name: str, i: int = i) -> str:
            return f"{toml}:{pr.field_line(toml, i, name)}"

        for name in ("run", "supports"):
            fn = getattr(q, name)
            if defined is not None and fn not in defined:
                problems.append(f"{at(name)}: {name} = {fn!r}: variant.py defines no function {fn}() "
                                f"(it defines: {', '.join(sorted(defined)) or 'none'})")
        # concept tags: packlint checks them against every loaded pack, as for quizzes and drills
        if defined is None or q.run not in defined:
            continue
        try:
            run = pr.run_variant(ex, q, use_cache=False)
        except pr.VariantError as exc:
            problems.append(f"{at('run')}: {exc.message}" + (f"\n{exc.detail}" if exc.detail else ""))
            continue
        try:
            again = pr.run_variant(ex, q, use_cache=False)
        except pr.VariantError as exc:
            again = None
            problems.append(f"{at('run')}: a second run failed: {exc.message}")
        if again is not None and (again.values != run.values or again.series != run.series):
            differ = sorted(k for k in run.values if again.values.get(k) != run.values[k]) or \
                sorted(k for k in run.series if again.series.get(k) != run.series[k])
            problems.append(f"{at('run')}: {q.run}() is not deterministic: two runs differ in "
                            f"{', '.join(differ)} (seed every random draw, e.g. torch.manual_seed(0))")
        if run.supports_error:
            problems.append(f"{at('supports')}: {run.supports_error}")
        elif run.supports != q.answer:
            shown = (f"option {run.supports}" if run.supports is not None and 0 <= run.supports < len(q.options)
                     else f"{run.supports!r}, not an option index")
            problems.append(f"{at('answer')}: answer = {q.answer}, but {q.supports}({q.run}()) = {shown}: the "
                            f"measured values {run.values} support another option")
        if run.supports is not None and not run.supports_error:  # and it reads them: not a constant
            answers = [a for a in pr.probe_supports(ex, q, pr.perturbed(run)) if a is not None]
            if len(answers) >= 3 and set(answers) == {run.supports}:
                problems.append(f"{at('supports')}: {q.supports}() returns {run.supports} whatever the numbers "
                                f"(tried {len(answers)} other results): decide the option from the measured values")
        missing_values = sorted(q.result_fields() - set(run.values))
        if missing_values:
            problems.append(f"{at('result')}: result names {', '.join(missing_values)}, which {q.run}() does not "
                            f"return in 'values' (it returns: {', '.join(sorted(run.values))})")
        if q.chart is not None:
            absent = [k for k in q.chart.series if k not in run.series]
            if absent:
                problems.append(f"{at('chart')}: chart series {', '.join(absent)} not in {q.run}()'s 'series' "
                                f"(it returns: {', '.join(sorted(run.series)) or 'none'})")
    return problems, ["predict.toml", "variant runs", "supports(run()) == answer", "result and chart names",
                      "deterministic run", "supports reads the numbers"]


PREDICT = register(Predict())
