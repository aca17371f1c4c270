"""Exercise kinds through one registry (issue 20 §2): the built-in kinds say what the old
``is_code``/``is_quiz``/``is_bug`` checks said, and a new kind is one module that registers itself."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

from alignlings.cli import kinds as cli_kinds
from alignlings.content import kinds
from alignlings.content.pack import PackError, load_exercise
from alignlings.web import kinds as web_kinds


def test_every_built_in_kind_is_registered_and_keeps_the_old_meaning():
    assert kinds.names()[:5] == ("code", "quiz", "bug", "bug-or-not", "predict")  # built-in first
    old = {"code": (True, False, False), "bug": (True, False, True),
           "quiz": (False, True, False), "bug-or-not": (False, True, False)}
    for name, (is_code, is_quiz, is_bug) in old.items():
        spec = kinds.get(name)
        assert (spec.graded_as_file, spec.answered_by_choice, spec.starts_from_buggy_file) == (is_code, is_quiz, is_bug)
        assert set(spec.label) == {"en", "zh"}
    assert kinds.get("code").dev_check(None, None) is None  # proved by the grader (practice.devcheck)
    assert web_kinds.view_of("bug").page == "bug" and web_kinds.view_of(kinds.get("code")).page is None  # web/kinds.py


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
        from alignlings.content.kinds import Kind, register

        class Predict(Kind):
            name = "toy-predict"
            label = {"en": "predict", "zh": "预测"}
            answered_by_choice = True

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
        assert (ex.kind_spec.answered_by_choice, ex.kind_spec.graded_as_file, ex.kind_spec.starts_from_buggy_file) == (True, False, False)
        from alignlings.grading.devcheck import _check_exercise

        report = _check_exercise(ex, grader=None)
        assert "toy" in report.checked and "toy-one: checked by the toy kind" in report.problems
    finally:
        sys.modules.pop("toykind", None)


# -- a toy kind from its own module, through every path that used to branch on the kind -----------
TOY_MODULE = '''
from alignlings.cli import kinds as cli_kinds
from alignlings.content.kinds import Kind, register
from alignlings.content.packdata import QuizOption, QuizQuestion
from alignlings.web import kinds as web_kinds

TEXTS = {"en": 'statement = "Predict."\\nhints = ["a", "b", "c"]\\nexplanation = "Because."\\n',
         "zh": 'statement = "预测。"\\nhints = ["甲", "乙", "丙"]\\nexplanation = "因为。"\\n'}


class Predict(Kind):
    """Answered by choosing; its one question is made by the kind, not read from quiz.toml."""
    name = "toy-predict"
    author_name = "toy"
    label = {"en": "predict", "zh": "预测"}
    answered_by_choice = True
    questions_file = "predict.toml"

    def questions(self, ex):
        opts = tuple(QuizOption(text={"en": t, "zh": t}, why={"en": "why " + t, "zh": "因为 " + t})
                     for t in ("up", "down"))
        return (QuizQuestion(id="toy-q1", question={"en": "Does the loss go up?", "zh": "损失会上升吗？"},
                             options=opts, answer=1),)

    def text_problems(self, ex):
        return super().text_problems(ex) + ["toy: the kind's own text check ran"]

    def dev_check(self, ex, grader):
        return [], ["toy"]

    def skeleton(self, exercise_id):
        return {"exercise.toml": f'id = "{exercise_id}"\\nkind = "toy-predict"\\ntitle = {{ en = "Toy", zh = "玩具" }}\\n',
                "texts/en.toml": TEXTS["en"], "texts/zh.toml": TEXTS["zh"]}


class FileKind(Kind):
    """Graded as a file: its learner file is the solution without its last line; the grader computes
    one extra variant and the kind adds its own entry to the verdict."""
    name = "toy-file"
    label = {"en": "toy file", "zh": "玩具文件"}
    graded_as_file = True

    def learner_file(self, ex, lang):
        return ex.solution_source.replace("x + 1", "x")

    def solution_file(self, ex, lang):
        return ex.solution_source

    def questions(self, ex):
        return ()

    def trusted_variants(self, ex):
        return {"toy:off-by-two": ex.solution_source.replace("x + 1", "x + 2")}

    def annotate(self, ex, trusted, learner, code, verdict, lang, names):
        verdict["toy"] = {"passed": verdict["passed"], "variants": sorted(trusted.variants)}


PREDICT = register(Predict())
FILE = register(FileKind())
# how the web and the CLI show them: the quiz page with the template named here, the fill-in page
web_kinds.register("toy-predict", web_kinds.KindView(page="quiz", template="quiz.html"))
web_kinds.register("toy-file", web_kinds.KindView())
cli_kinds.register("toy-predict", cli_kinds.KindView(next="next_quiz"))
cli_kinds.register("toy-file", cli_kinds.KindView())
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The two toy kinds registered from their own module (gone again after the test), and a pack with
    an exercise of each written by ``dev new`` (the predict kind) or by hand (the file kind)."""
    (tmp_path / "toykinds.py").write_text(TOY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(kinds, "REGISTRY", dict(kinds.REGISTRY))
    monkeypatch.setattr(web_kinds, "VIEWS", dict(web_kinds.VIEWS))  # its views leave with it too
    monkeypatch.setattr(cli_kinds, "VIEWS", dict(cli_kinds.VIEWS))
    sys.modules.pop("toykinds", None)
    module = importlib.import_module("toykinds")
    yield module
    sys.modules.pop("toykinds", None)


def _file_exercise(pack_dir):
    folder = pack_dir / "toy-add"
    (folder / "texts").mkdir(parents=True)
    (folder / "exercise.toml").write_text('id = "toy-add"\nkind = "toy-file"\ntitle = { en = "Add", zh = "加一" }\n'
                                          'entry = ["f"]\n')
    (folder / "solution.py").write_text("def f(x):\n    return x + 1\n")
    (folder / "check.py").write_text(textwrap.dedent('''
        from alignlings.content.checks import Case

        def cases():
            return [Case("one", "visible", lambda m: m.f(1.0)), Case("two", "hidden", lambda m: m.f(2.0))]
    '''))
    for lang, text in (("en", 'statement = "Add one."\nhints = ["a", "b", "c"]\nexplanation = "x + 1"\n'),
                       ("zh", 'statement = "加一。"\nhints = ["甲", "乙", "丙"]\nexplanation = "x + 1"\n')):
        (folder / "texts" / f"{lang}.toml").write_text(text)
    toml = pack_dir / "pack.toml"
    toml.write_text(toml.read_text().replace('order = ["toy-one"]', 'order = ["toy-one", "toy-add"]'))


def test_a_toy_kind_writes_its_skeleton_and_flows_through_dev_check_the_session_and_the_cli(toy, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from alignlings.cli.app import app
    from alignlings.content import skeleton
    from alignlings.grading.devcheck import check_texts
    from alignlings.grading.grader import solution_for, template_for
    from alignlings.content.pack import load_pack
    from alignlings.practice.store import ProgressStore
    from alignlings.practice.session import Practice, UsageError

    assert "toy" in skeleton.names() and "toy-file" not in skeleton.names()  # it writes no skeleton
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ALIGNLINGS_WORKSPACE", str(tmp_path / "ws"))
    result = CliRunner().invoke(app, ["dev", "new", "toy-one", "--kind", "toy", "--pack", str(tmp_path / "pack")])
    assert result.exit_code == 0, result.output
    assert 'kind = "toy-predict"' in (tmp_path / "pack" / "toy-one" / "exercise.toml").read_text()
    _file_exercise(tmp_path / "pack")
    course = load_pack(tmp_path / "pack")
    ex, add = course.get("toy-one"), course.get("toy-add")
    assert ex.kind_spec is toy.PREDICT and add.kind_spec is toy.FILE
    assert [q.id for q in ex.quiz] == ["toy-q1"] and add.quiz == ()  # questions come from the kind

    problems = check_texts(ex)  # the kind's own check, and no complaint about a quiz.toml it never has
    assert "toy: the kind's own text check ran" in problems and not any("quiz.toml" in p for p in problems)

    with pytest.raises(PackError, match="toy-predict, it has no file"):
        template_for(ex)
    assert template_for(add) == "def f(x):\n    return x\n" and solution_for(add) == add.solution_source

    practice = Practice(ProgressStore(tmp_path / "p.sqlite3"), course)
    assert [e.key for e in practice.quiz_exercises()] == ["toy-one"]
    with pytest.raises(UsageError, match="item, not a file"):
        practice.check(ex, code="x")
    with pytest.raises(UsageError, match="has no blanks"):
        practice.hint(add, blank=1)
    assert practice.cloze_reveals(add)  # a file kind's cloze would show an unsolved solution
    assert practice.reveal(add).answers == [] and not practice.cloze_reveals(add)
    practice.quiz_start(ex)
    assert practice.quiz_answer(ex, ex.quiz[0], 1).correct

    quiz = CliRunner().invoke(app, ["quiz", "toy-one", "--pack", str(tmp_path / "pack")], input="b\n")
    assert quiz.exit_code == 0, quiz.output
    assert "Does the loss go up?" in quiz.output and "why down" in quiz.output


def test_a_toy_kind_is_graded_with_its_own_variants_and_verdict_entry(toy, tmp_path):
    from alignlings.content import skeleton
    from alignlings.grading.grader import Grader
    from alignlings.content.pack import load_pack

    skeleton.write(tmp_path / "pack", "toy-one", "toy")
    _file_exercise(tmp_path / "pack")
    course = load_pack(tmp_path / "pack")
    with Grader(course, cache=False) as grader:
        good = grader.check("toy-add", "def f(x):\n    return x + 1\n", run_main=False, variant=0)
        bad = grader.check("toy-add", "def f(x):\n    return x + 2\n", run_main=False, variant=0)
    assert good["passed"] and not bad["passed"]
    assert good["toy"]["passed"] is True and bad["toy"]["passed"] is False  # the kind annotated both
    assert good["toy"]["variants"] == ["toy:off-by-two"]  # its extra file was run by the grader's trusted job


def test_a_toy_kind_opens_on_its_page_with_its_template(toy, tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from alignlings.content import skeleton
    from alignlings.web import quiz as web_quiz
    from alignlings.web.app import create_app

    skeleton.write(tmp_path / "pack", "toy-one", "toy")
    used = []
    real = web_quiz.render_page

    def recorded(request, template, **kw):
        used.append(template)
        return real(request, template, **kw)

    monkeypatch.setattr(web_quiz, "render_page", recorded)
    app = create_app([str(tmp_path / "pack")], db_path=tmp_path / "p.sqlite3", warm_up=False)
    with TestClient(app) as c:
        page = c.get("/exercises/toy-one")
        assert page.status_code == 200 and "Does the loss go up?" in page.text
        assert used == ["quiz.html"]
        # the page asks the kind's web view, so this must now fail
        web_kinds.VIEWS["toy-predict"] = web_kinds.KindView(page="quiz", template="no-such-template.html")
        with pytest.raises(Exception, match="no-such-template"):
            c.get("/exercises/toy-one")
        answer = c.post("/api/quiz/toy-q1", json={"choice": 1})
        assert answer.status_code == 200 and answer.json()["correct"] is True


def test_review_asks_the_kind_for_its_items_prompts_and_verdicts(tmp_path, monkeypatch):
    """practice.review never branches on an exercise's kind: a new kind brings its own review items,
    asks them and judges them through its hooks (given the review module, ``rv``)."""
    from alignlings.practice import review as rv
    from alignlings.content.pack import Pack

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


# -- review-item kinds say what they are: review and the web ask their fields, not their names ------
def test_review_item_kinds_say_how_they_are_answered_weighed_and_retested():
    from alignlings.content.kinds.fill import LEVEL_WEIGHT
    from alignlings.grading.levels import WEIGHT

    fields = {name: (k.answer, k.runs_code, k.fresh_inputs, k.mastery_weight, k.offered_before_met)
              for name, k in kinds.REVIEW_ITEM_KINDS.items()}
    assert fields == {  # what the branches on these names did before (issue 30)
        "exercise": ("fills", True, False, 1.0, False), "misconception": ("fills", True, True, 1.0, False),
        "cloze": ("fills", True, False, 1.0, False), "level": ("file", True, False, 2.0, True),
        "quiz": ("choice", False, False, 1.0, False), "bug": ("file", True, False, 1.0, False),
        "predict": ("choice", True, False, 1.0, False)}
    assert LEVEL_WEIGHT == WEIGHT[4] == kinds.review_item_kind("level").mastery_weight
    with pytest.raises(ValueError, match="answer one of fills, file, choice"):
        kinds.ReviewItemKind("essay", "exercise", answer="text")


def test_no_module_branches_on_a_review_item_kinds_name():
    """Outside the kinds that bring them, code asks ``item.kind_spec``; the one rule left on a name
    is the level item's own (``Review.level_offers`` finds it through its exercise/ item)."""
    import re
    from pathlib import Path

    import alignlings

    root = Path(alignlings.__file__).parent
    branch = re.compile(r"\bitem\.kind\s*(==|!=|in\b|not in\b)")
    found = [(path.relative_to(root).as_posix(), line.strip()) for path in sorted(root.rglob("*.py"))
             if "content/kinds" not in path.as_posix()
             for line in path.read_text(encoding="utf-8").splitlines() if branch.search(line)]
    assert found == [("practice/review.py", 'if item.kind != "exercise":')], found
