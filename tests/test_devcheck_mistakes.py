"""Deliberate authoring mistakes (issue 34): each is applied to a copy of a small pack of every kind
(written by `dev new`, then filled), and `dev check` must report it at the right FILE:LINE, exactly
once, with a message that says what is wrong."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from alignlings.cli.app import app

runner = CliRunner()
KINDS = ("fill", "quiz", "bug", "bug-or-not", "predict")


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ALIGNLINGS_LANG", "en")
    monkeypatch.setenv("COLUMNS", "400")  # one problem per output line, however long its path
    monkeypatch.delenv("ALIGNLINGS_PACK", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A pack with one exercise of every kind, its placeholders filled: `dev check` passes on it."""
    pack = tmp_path_factory.mktemp("mistakes") / "course"
    for kind in KINDS:
        out = runner.invoke(app, ["dev", "new", f"my-{kind}", "--kind", kind, "--pack", str(pack)])
        assert out.exit_code == 0, out.output
    for path in pack.rglob("*"):
        if path.is_file() and path.suffix in (".py", ".toml"):
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace("TODO(author): ", "").replace("TODO(author)", ""), encoding="utf-8")
    return pack


def sub(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


TRACKS = ('\n[[track]]\nid = "basics"\ntitle = "Basics"\nexercises = ["my-fill", "my-quiz"]\n\n'
          '[[track]]\nid = "drills"\ntitle = "Drills"\nrequires = [{requires}]\n'
          'exercises = ["my-bug", {drill}, "my-predict"]\n')


@dataclass(frozen=True)
class Mistake:
    name: str
    apply: Callable[[Path], object]
    file: str  # the file at fault, relative to the pack
    line: str | int  # a regex for its line in the changed file (first match), or the line number
    message: str  # what the problem must say (a substring)
    nth: int = 1


MISTAKES = [
    Mistake("question id of a quiz repeated by a predict item",
            lambda p: sub(p / "my-predict/predict.toml", 'id = "my-predict"', 'id = "my-quiz-q1"'),
            "my-predict/predict.toml", r'^id = "my-quiz-q1"',
            "question id 'my-quiz-q1' is already used by 'my-quiz' (my-quiz/quiz.toml:2)"),
    Mistake("question id of a bug-or-not item repeated by a quiz",
            lambda p: sub(p / "my-quiz/quiz.toml", 'id = "my-quiz-q1"', 'id = "my-bug-or-not:verdict"'),
            "my-bug-or-not/exercise.toml", r"^id = ",
            "question id 'my-bug-or-not:verdict' is already used by 'my-quiz'"),
    Mistake("quiz answer out of range", lambda p: sub(p / "my-quiz/quiz.toml", "answer = 2 ", "answer = 7 "),
            "my-quiz/quiz.toml", r"^answer = 7", "question #1: answer 7 is not an option index 0..3"),
    Mistake("quiz option without its zh why",
            lambda p: sub(p / "my-quiz/quiz.toml", 'why.zh = "选项 2 为什么错"\n', ""),
            "my-quiz/quiz.toml", r'^why.en = "why option 2', "quiz my-quiz-q1 option 1: no zh why"),
    Mistake("predict option without its zh why",
            lambda p: sub(p / "my-predict/predict.toml", '(the large step lands closer to 0)"\n'
                          'why.zh = "为什么有人会这样预测，实际运行又说明了什么"\n', '(the large step lands closer to 0)"\n'),
            "my-predict/predict.toml", r"the large step lands closer to 0",
            "question #1 option #2 why: missing zh text"),
    Mistake("predict answer out of range", lambda p: sub(p / "my-predict/predict.toml", "answer = 2 ", "answer = 5 "),
            "my-predict/predict.toml", r"^answer = 5", "expected an option index 0..2"),
    Mistake("no zh texts file", lambda p: (p / "my-quiz/texts/zh.toml").unlink(),
            "my-quiz/texts/zh.toml", 1, "file missing"),
    Mistake("no zh explanation",
            lambda p: (p / "my-quiz/texts/zh.toml").write_text(re.sub(
                r'(?m)^explanation = .*$', "", (p / "my-quiz/texts/zh.toml").read_text(encoding="utf-8")),
                encoding="utf-8"),
            "my-quiz/texts/zh.toml", 1, "explanation is missing"),
    Mistake("empty en statement",
            lambda p: (p / "my-quiz/texts/en.toml").write_text(re.sub(
                r'(?ms)^statement = """.*?"""', 'statement = ""', (p / "my-quiz/texts/en.toml").read_text(
                    encoding="utf-8")), encoding="utf-8"),
            "my-quiz/texts/en.toml", r"^statement", "empty statement"),
    Mistake("unseeded case in a fill-in exercise",
            lambda p: sub(p / "my-fill/check.py", "g = torch.Generator().manual_seed(fresh(seed))",
                          "g = torch.Generator(); g.seed()"),
            "my-fill/check.py", r'"random batch"', "case 'random batch' is unreproducible"),
    Mistake("unseeded case in a bug drill",
            lambda p: sub(p / "my-bug/check.py", "g = torch.Generator().manual_seed(fresh(seed))",
                          "g = torch.Generator(); g.seed()"),
            "my-bug/check.py", r'"random batch"', "case 'random batch' is unreproducible"),
    Mistake("typo in order", lambda p: sub(p / "pack.toml", '"my-quiz", "my-bug"', '"my-quizz", "my-bug"'),
            "pack.toml", r"^order", "order lists 'my-quizz' but", ),
    Mistake("typo in a track's exercises",
            lambda p: append(p / "pack.toml", TRACKS.format(requires='"basics"', drill='"my-bug-or-nott"')),
            "pack.toml", r"my-bug-or-nott", "exercise 'my-bug-or-nott' is not in [pack] order"),
    Mistake("typo in requires",
            lambda p: append(p / "pack.toml", TRACKS.format(requires='"basic"', drill='"my-bug-or-not"')),
            "pack.toml", r'^requires = \["basic"\]', "requires 'basic' names no track of the loaded packs; "
                                                     "did you mean 'basics'?"),
    Mistake("a supports function that ignores the numbers",
            lambda p: sub(p / "my-predict/variant.py", '    v = result["values"]\n', '    return 2\n'),
            "my-predict/predict.toml", r"^supports = ", "supports_my_predict() returns 2 whatever the numbers"),
    Mistake("a variant that is not deterministic",
            lambda p: sub(p / "my-predict/variant.py", "small, large = _descend(0.1), _descend(1.1)",
                          "import random\n    small, large = _descend(0.1), _descend(1.1 + random.random() * 1e-3)"),
            "my-predict/predict.toml", r"^run = ", "run_my_predict() is not deterministic"),
    Mistake("a supports function the answer disagrees with",
            lambda p: sub(p / "my-predict/predict.toml", "answer = 2 ", "answer = 1 "),
            "my-predict/predict.toml", r"^answer = 1", "answer = 1, but supports_my_predict(run_my_predict()) = option 2"),
    Mistake("a predict concept tag no loaded pack names",
            lambda p: sub(p / "my-predict/predict.toml", "concepts = []", 'concepts = ["no-such-tag"]'),
            "my-predict/predict.toml", r"^concepts", "unknown concept tag 'no-such-tag'"),
    Mistake("a predict item with hints",
            lambda p: append(p / "my-predict/texts/zh.toml", 'hints = ["看看 1 - 2·lr"]\n'),
            "my-predict/texts/zh.toml", r"^hints", "hints: a predict item shows no hints"),
    Mistake("misconception blank out of range",
            lambda p: sub(p / "my-fill/misconceptions.toml", "blank = 1", "blank = 9"),
            "my-fill/misconceptions.toml", r"^blank = 9", "blank 9 is out of range"),
    Mistake("two misconceptions with one id",
            lambda p: sub(p / "my-fill/misconceptions.toml", 'id = "divides-by-beta"', 'id = "beta-missing"'),
            "my-fill/misconceptions.toml", r'^id = "beta-missing"', "misconception id 'beta-missing' is used twice",
            nth=2),
    Mistake("a wrong fix whose find is not in buggy.py",
            lambda p: sub(p / "my-bug/misconceptions.toml", 'find = "', 'find = "XX'),
            "my-bug/misconceptions.toml", r'^id = "ignores-mask"', "find occurs 0 times in buggy.py"),
    Mistake("a wrong fix that is in fact right",
            lambda p: sub(p / "my-bug/misconceptions.toml", 'replace = "    return total"',
                          'replace = "    return total / mask.sum()"'),
            "my-bug/misconceptions.toml", r'^id = "sum-not-mean"', "wrong_fix sum-not-mean is accepted"),
    Mistake("a bug-or-not reason without zh",
            lambda p: sub(p / "my-bug-or-not/bugornot.toml", 'text.zh = "理由 2"\n', ""),
            "my-bug-or-not/bugornot.toml", r"^\[\[reason\]\]", "reason 2 has no zh text or why", nth=2),
    Mistake("a bug-or-not answer that is neither",
            lambda p: sub(p / "my-bug-or-not/bugornot.toml", 'answer = "expected"', 'answer = "maybe"'),
            "my-bug-or-not/bugornot.toml", r"^answer", "answer must be 'bug' or 'expected'"),
    Mistake("level out of range", lambda p: sub(p / "my-quiz/exercise.toml", "level = 1", "level = 9"),
            "my-quiz/exercise.toml", r"^level", "level must be an integer from 1 to 5, got 9"),
    Mistake("an exercise folder missing from order",
            lambda p: sub(p / "pack.toml", '"my-quiz", "my-bug"', '"my-bug"'),
            "pack.toml", r"^order", "exercise folder 'my-quiz' is missing from [pack] order"),
]


def line_of(path: Path, pattern: str | int, nth: int = 1) -> int:
    if isinstance(pattern, int):
        return pattern
    hits = [i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
            if re.search(pattern, line)]
    assert len(hits) >= nth, (path, pattern)
    return hits[nth - 1]


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_each_mistake_is_reported_once_at_its_file_and_line(course, tmp_path, mistake):
    pack = tmp_path / "course"
    shutil.copytree(course, pack)
    mistake.apply(pack)
    out = runner.invoke(app, ["dev", "check", "--pack", str(pack)], catch_exceptions=False)
    assert out.exit_code == 1, out.output
    found = [line.strip()[2:] for line in out.output.splitlines() if line.strip().startswith("- ")]
    assert len(found) == len(set(found)), out.output  # nothing said twice
    path = pack / mistake.file
    want = f"{path}:{line_of(path, mistake.line, mistake.nth)}: "
    hits = [p for p in found if mistake.message in p]
    assert len(hits) == 1, out.output  # once, not once per check that trips on it
    assert hits[0].startswith(want), (want, hits[0])


def test_the_filled_pack_passes_and_a_predict_item_may_use_an_included_pack_tag(course, tmp_path):
    pack = tmp_path / "course"
    shutil.copytree(course, pack)
    sub(pack / "pack.toml", "include = []", 'include = ["dpo-grpo"]')
    sub(pack / "my-predict/predict.toml", "concepts = []", 'concepts = ["implicit-reward"]')  # the built-in pack's
    out = runner.invoke(app, ["dev", "check", "--pack", str(pack)], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    assert "deterministic run" in out.output and "supports reads the numbers" in out.output
