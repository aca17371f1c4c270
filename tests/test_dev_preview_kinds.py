"""`dev preview` shows every kind (issue 34): a quiz's and a bug-or-not drill's questions with the
right option marked and every why, a predict item's questions with the run's result, a bug drill's
start file and each wrong fix with what the grader says of it; a bug-or-not drill is named as itself."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from alignlings.cli.app import app

runner = CliRunner()


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    root = tmp_path_factory.mktemp("preview") / "course"
    for kind in ("quiz", "bug", "bug-or-not", "predict"):
        out = runner.invoke(app, ["dev", "new", f"my-{kind}", "--kind", kind, "--pack", str(root)])
        assert out.exit_code == 0, out.output
    for path in root.rglob("*"):  # the author's texts written in (here: the placeholders dropped)
        if path.is_file() and path.suffix in (".py", ".toml"):
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace("TODO(author): ", "").replace("TODO(author)", ""), encoding="utf-8")
    return root


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ALIGNLINGS_LANG", "en")
    monkeypatch.setenv("COLUMNS", "300")


def preview(pack, exercise: str, lang: str = "en") -> str:
    out = runner.invoke(app, ["dev", "preview", exercise, "--pack", str(pack), "--lang", lang])
    assert out.exit_code == 0, out.output
    return out.output


def test_a_quiz_and_a_bug_or_not_drill_show_their_questions_by_their_own_name(pack):
    quiz = preview(pack, "my-quiz")
    assert "quiz: questions" in quiz and "C. option 3 ← right" in quiz and "why option 2 is wrong" in quiz
    drill = preview(pack, "my-bug-or-not")
    assert "bug or not: questions" in drill and "the quiz" not in drill
    assert "B. Expected behaviour ← right" in drill and "A. reason 1 ← right" in drill
    assert "是不是 bug：题目" in preview(pack, "my-bug-or-not", "zh")
    out = runner.invoke(app, ["check", "my-bug-or-not", "--pack", str(pack)])
    assert out.exit_code == 2 and "is a bug-or-not drill" in out.output and "is the quiz" not in out.output


def test_a_predict_item_shows_its_options_and_the_result_of_its_run(pack):
    out = preview(pack, "my-predict")
    assert "predict: questions" in out and "C. " in out and "← right" in out
    assert "result (from the run): after 20 steps |x| is 0.012 with lr 0.1 and 38 with lr 1.1." in out


def test_a_bug_drill_shows_its_start_and_each_wrong_fix_with_its_verdict(pack):
    out = preview(pack, "my-bug")
    assert "buggy.py (the learner's start)" in out and "return total / mask.numel()" in out
    assert "wrong fixes" in out and "ignores-mask" in out and "sum-not-mean" in out
    assert out.count("recognised as itself") == 2
    assert "+     return values.mean()" in out
