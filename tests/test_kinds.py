"""Exercise kinds through one registry (issue 20 §2): the built-in kinds say what the old
``is_code``/``is_quiz``/``is_bug`` checks said, and a new kind is one module that registers itself."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

from alignlings.practice import kinds
from alignlings.practice.pack import KINDS, PackError, load_exercise


def test_every_built_in_kind_is_registered_and_keeps_the_old_meaning():
    assert set(KINDS) <= set(kinds.names())
    old = {"code": (True, False, False), "bug": (True, False, True),
           "quiz": (False, True, False), "bug-or-not": (False, True, False)}
    for name, (is_code, is_quiz, is_bug) in old.items():
        spec = kinds.get(name)
        assert (spec.graded_as_file, spec.answered_by_choice, spec.starts_from_buggy_file) == (is_code, is_quiz, is_bug)
        assert set(spec.label) == {"en", "zh"}
    assert kinds.get("code").dev_check(None, None) is None  # proved by the grader (practice.devcheck)
    assert kinds.get("bug").web_page == "bug" and kinds.get("code").web_page is None


def test_an_unknown_kind_is_a_clear_error():
    with pytest.raises(KeyError, match="unknown exercise kind 'flashcard'.*code"):
        kinds.get("flashcard")
    with pytest.raises(ValueError, match="already registered"):
        kinds.register(type("Other", (kinds.Kind,), {"name": "quiz"})())
    with pytest.raises(TypeError, match="Kind instance"):
        kinds.register("quiz")  # type: ignore[arg-type]


def _exercise_folder(root, kind):
    folder = root / "ex"
    folder.mkdir(parents=True)
    (folder / "quiz.toml").write_text("")
    (folder / "exercise.toml").write_text(f'id = "toy-one"\nkind = "{kind}"\ntitle = "Toy"\n')
    return folder


def test_a_toy_kind_in_its_own_module_flows_through_the_registry(tmp_path, monkeypatch):
    with pytest.raises(PackError, match="kind must be one of 'code', 'quiz', 'bug', 'bug-or-not', 'predict', got 'toy-predict'"):
        load_exercise(_exercise_folder(tmp_path / "before", "toy-predict"))
    (tmp_path / "toykind.py").write_text(textwrap.dedent('''
        from alignlings.practice.kinds import Kind, register

        class Predict(Kind):
            name = "toy-predict"
            label = {"en": "predict", "zh": "预测"}
            answered_by_choice = True
            web_page = "toy-page"

            def dev_check(self, ex, grader):
                return ([f"{ex.id}: checked by the toy kind"], ["toy"])

        PREDICT = register(Predict())
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(kinds, "REGISTRY", dict(kinds.REGISTRY))  # the toy kind leaves with the test
    sys.modules.pop("toykind", None)
    toy = importlib.import_module("toykind")
    try:
        ex = load_exercise(_exercise_folder(tmp_path / "after", "toy-predict"))
        assert ex.kind_spec is toy.PREDICT is kinds.of(ex)
        assert (ex.is_quiz, ex.is_code, ex.is_bug) == (True, False, False)
        from alignlings.practice.devcheck import _check_exercise

        report = _check_exercise(ex, grader=None)
        assert "toy" in report.checked and "toy-one: checked by the toy kind" in report.problems
    finally:
        sys.modules.pop("toykind", None)


def test_review_asks_the_kind_for_its_items_prompts_and_verdicts(tmp_path, monkeypatch):
    """practice.review never branches on an exercise's kind: a new kind brings its own review items,
    asks them and judges them through its hooks (given the review module, ``rv``)."""
    from alignlings.practice import review as rv
    from alignlings.practice.pack import Pack

    class Flashcard(kinds.Kind):
        name = "toy-flashcard"
        label = {"en": "flashcard", "zh": "卡片"}
        review_needs_grader = False

        def review_items(self, rv, ex):
            return [rv.Item(f"card/{ex.id}", "card", ex.pack, ex.key, ("toy-tag",))]

        def review_prompt(self, rv, review, item, base, lang):
            return rv.QuizPrompt(**base, question="2 + 2?", options=["3", "4"])

        def review_check(self, rv, review, item, answer, grader, lang):
            return {"correct": answer == 1, "expected": 1, "feedback": ""}

    monkeypatch.setattr(kinds, "REGISTRY", dict(kinds.REGISTRY))
    kinds.register(Flashcard())
    ex = load_exercise(_exercise_folder(tmp_path, "toy-flashcard"))
    ex.pack = "toy"
    pack = Pack(id="toy", path=tmp_path, title={"en": "Toy", "zh": "玩具"}, exercises={ex.key: ex})
    (item,) = rv.catalog(pack).values()
    assert (item.key, item.concepts) == ("card/toy-one", ("toy-tag",))
    review = rv.Review(store=None, pack=pack)  # type: ignore[arg-type]  # presenting and judging read no store
    shown = rv.present(review, item)
    assert isinstance(shown, rv.QuizPrompt) and shown.options == ["3", "4"] and shown.title == "Toy"
    assert rv.check(review, item, 1)["correct"] and not rv.check(review, item, 0)["correct"]
