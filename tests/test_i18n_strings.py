"""Strings that used to be English-only, rendered in Chinese: CLI usage errors (with click's own frame),
`show`, the bug drill's terminal report and the notebook messages. None may leave an English sentence.

An "English sentence" is three or more Latin words in a row, outside code spans and quoted values
(ids, paths, option names and commands stay as they are typed)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from alignlings.cli.app import app
from alignlings.practice.pack import load_pack

runner = CliRunner()


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ALIGNLINGS_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("ALIGNLINGS_LANG", "en")
    monkeypatch.setenv("COLUMNS", "400")  # no wrapping: a sentence stays on one line
    return tmp_path


def english_sentences(text: str) -> list[str]:
    text = re.sub(r"`[^`\n]*`", "", text)
    text = re.sub(r"'[^'\n]*'", "", text)
    return re.findall(r"[A-Za-z]{2,}(?:[ \t]+[A-Za-z][A-Za-z-]*){2,}", text)


def test_the_detector_finds_english_and_spares_ids_and_commands():
    assert english_sentences("Error: Invalid value for ID: unknown id") == ["Invalid value for ID"]
    assert english_sentences("错误：参数 ID 的值无效：'dpo-loss' 不是测验；运行 `alignlings start dpo-loss --pack x`") == []


USAGE_ERRORS = [  # (arguments, the argument the message must name)
    (["show", "nope"], "ID"),
    (["show", "dpo-los"], "ID"),  # with "did you mean"
    (["start", "concepts"], "ID"),
    (["show", "concepts", "--code"], "--code"),
    (["check", "dpo-loss"], "FILE"),  # no file yet
    (["quiz", "dpo-loss"], "ID"),
    (["export", "--format", "pdf"], "--format"),
    (["list", "--lang", "fr"], "--lang"),  # the language then comes from the environment
    (["dev", "new", "x-y", "--kind", "essay", "--pack", "somewhere"], "--kind"),
    (["dev", "new", "x-y"], "--pack"),
    (["serve", "--token", " "], "--token"),
    (["serve", "--classroom", "--allow-import"], "--allow-import"),
    (["serve", "--database-url", "sqlite:///x"], "--database-url"),
]


@pytest.mark.parametrize(("args", "param"), USAGE_ERRORS, ids=lambda a: " ".join(a) if isinstance(a, list) else a)
def test_usage_errors_in_chinese_name_the_argument_and_leave_no_english(args, param, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_LANG", "zh")
    # `dev new` has no --lang of its own: ALIGNLINGS_LANG speaks for it
    out = runner.invoke(app, args if "--lang" in args or args[:2] == ["dev", "new"] else [*args, "--lang", "zh"])
    assert out.exit_code == 2, out.output
    assert f"参数 {param} 的值无效" in out.output and "错误：" in out.output and "用法：" in out.output
    syntax = [line for line in out.output.splitlines() if not line.startswith("用法：")]  # the command's syntax
    assert english_sentences("\n".join(syntax)) == [], out.output


@pytest.mark.parametrize(("args", "param"), USAGE_ERRORS, ids=lambda a: " ".join(a) if isinstance(a, list) else a)
def test_usage_errors_in_english_keep_clicks_frame(args, param):
    out = runner.invoke(app, args)
    assert out.exit_code == 2, out.output
    assert f"Error: Invalid value for {param}: " in out.output and "Usage: " in out.output
    assert re.search(r"expect|does not exist|unknown id", out.output)


def test_unknown_id_in_chinese_suggests_the_closest_and_names_the_packs(monkeypatch):
    out = runner.invoke(app, ["show", "dpo-los", "--lang", "zh"]).output
    assert "你是不是想找 'dpo-loss'" in out and "dpo-grpo (built-in)" in out and "--pack DIR" in out


def test_a_bad_file_is_named_in_chinese(isolated):
    bad = isolated / "x.py"
    bad.write_bytes(b"\xff\xfe\x00bad")
    out = runner.invoke(app, ["check", "dpo-loss", str(bad), "--lang", "zh"])
    assert out.exit_code == 2 and "不是 UTF-8 文本" in out.output and english_sentences(out.output) == []


def test_show_in_chinese_has_no_english_frame():
    out = runner.invoke(app, ["show", "dpo-loss", "--lang", "zh"])
    assert out.exit_code == 0 and "难度" in out.output.splitlines()[0]


def test_a_bug_drills_terminal_report_in_chinese_leaves_no_english():
    """`check` on an untouched bug drill: the case lines, what changed, what still fails, the hint;
    the learner's own program output (the panel) and the sandbox's isolation line are not ours."""
    drill = next(ex for ex in load_pack() if ex.kind == "bug")
    assert runner.invoke(app, ["start", drill.key, "--lang", "zh"]).exit_code == 0
    out = runner.invoke(app, ["check", drill.key, "--lang", "zh"])
    assert out.exit_code == 1, out.output
    ours = [line for line in out.output.splitlines()
            if not line.startswith(("│", "╭", "╰", "隔离方式"))]
    assert "你还没有改动 buggy.py" in out.output
    assert english_sentences("\n".join(ours)) == [], out.output


def test_bug_drill_story_panel_title_is_localised():
    import io

    from rich.console import Console

    from alignlings.practice.bugdrill import render_verdict

    for lang, title in (("en", "The real bug"), ("zh", "真实的 bug")):
        console = Console(file=io.StringIO(), width=100)
        render_verdict({"bug": {"changes": "-", "story": "story"}}, lang, console)
        assert title in console.file.getvalue()


def test_notebook_messages_in_chinese():
    from alignlings.practice.notebook import Verdict, exercise_notebook

    verdict = Verdict({"exercise": "dpo-loss", "passed": False, "error": None, "cases": [],
                       "blanks": [{"index": 2, "name": "logits", "passed": False, "message": "差了一个符号"}]})
    verdict.lang = "zh"
    assert repr(verdict) == "<Verdict dpo-loss: 还没通过; 空 2: 差了一个符号>"
    assert "还没通过" in verdict._repr_html_() and "空 2" in verdict._repr_html_()
    assert english_sentences(verdict._repr_html_().replace("<", " <").replace(">", "> ")) == []
    verdict.lang = "en"
    assert repr(verdict) == "<Verdict dpo-loss: not yet; blank 2: 差了一个符号>"
    pack = load_pack()
    for ex in (pack.get("dpo-loss"), pack.get("concepts")):
        nb = exercise_notebook(ex, "zh")
        ours = [c.source for c in nb.cells[1:] if c.cell_type == "markdown"]
        assert ours and all(english_sentences(text) == [] for text in ours), ours
        assert not any("Run the test section" in text or "Answer interactively" in text for text in ours)


@pytest.mark.parametrize("section", ["cli.errors", "cli.serve", "cli.dev", "practice.notebook"])
def test_every_string_of_these_sections_is_in_chinese(section):
    """The sections this change made (the console lines of `serve` are printed only by a running
    server): each key has a Chinese text, with the same placeholders and no English sentence."""
    from alignlings import i18n

    placeholders = re.compile(r"\{(\w+)[^}]*\}")
    for key, texts in i18n.table(section).items():
        assert "zh" in texts, f"{section}.{key} has no Chinese"
        assert set(placeholders.findall(texts["zh"])) == set(placeholders.findall(texts["en"])), (section, key)
        allowed = texts["zh"].replace("alignlings[classroom]", "")
        assert english_sentences(allowed) == [], (section, key, texts["zh"])
