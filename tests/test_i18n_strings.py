"""Strings that used to be English-only, rendered in Chinese: CLI usage errors (with click's own frame),
`show`, the bug drill's terminal report and the notebook messages. None may leave an English sentence.

An "English sentence" is three or more Latin words in a row, outside code spans and quoted values
(ids, paths, option names and commands stay as they are typed)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from alignlings.cli.app import app
from alignlings.content.pack import load_pack

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

    from alignlings.content.bugdrill import render_verdict

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


@pytest.mark.parametrize("section", ["cli.errors", "cli.serve", "cli.dev", "practice.notebook", "cli.train",
                                     "cli.dev_checked", "practice.isolation", "practice.pack_errors"])
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



# -- dev check and dev new, the train commands, a pack's load errors, the sandbox's isolation text ------
def _ours(output: str) -> str:
    """What the command wrote itself: without click's usage line (the command's own syntax)."""
    return "\n".join(line for line in output.splitlines() if not line.startswith(("用法：", "Usage:")))


def test_dev_new_and_dev_check_speak_chinese(isolated, monkeypatch):
    """`dev new` of every kind, the skeletons filled, then `dev check`: what was proved, each kind's own
    lines (misconceptions, wrong fixes, bug-or-not) and the verdict, with no English sentence."""
    monkeypatch.setenv("ALIGNLINGS_LANG", "zh")
    pack = isolated / "course"
    for kind in ("fill", "quiz", "bug", "bug-or-not"):
        out = runner.invoke(app, ["dev", "new", f"my-{kind}", "--kind", kind, "--pack", str(pack)])
        assert out.exit_code == 0 and "已写入" in out.output and "下一步" in out.output, out.output
        assert english_sentences(out.output) == [], out.output
    for path in pack.rglob("*"):
        if path.is_file() and path.suffix in (".py", ".toml"):
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace("TODO(author): ", "").replace("TODO(author)", ""), encoding="utf-8")
    out = runner.invoke(app, ["dev", "check", "--pack", str(pack)])
    assert out.exit_code == 0, out.output
    for said in ("结构", "英文与中文文本", "3 个误区写法均被判错", "2 个错误修复均被判错", "答案、理由与代码", "dev check 通过"):
        assert said in out.output, out.output
    assert english_sentences(out.output) == [], out.output

    def edit(rel, old, new):
        path = pack / rel
        text = path.read_text(encoding="utf-8")
        assert old in text, (rel, old)
        path.write_text(text.replace(old, new, 1), encoding="utf-8")

    # what a teacher gets wrong: each problem line, without its FILE:LINE, must read as Chinese
    edit("my-fill/exercise.toml", "level = 1", "level = 9")
    edit("my-fill/texts/zh.toml", "explanation = ", "explanation = \"\"\nunused = ")
    edit("my-fill/misconceptions.toml", "[[misconception]]", "[[misconception]]\nconcepts = [\"no-such-tag\"]")
    edit("my-quiz/quiz.toml", "question.zh = ", "question.zz = ")
    edit("my-bug/misconceptions.toml", 'find = "    return total / mask.numel()"', 'find = "return nothing"')
    out = runner.invoke(app, ["dev", "check", "--pack", str(pack)])
    assert out.exit_code == 1 and "dev check 未通过：" in out.output, out.output
    problems = [line.split(": ", 1)[-1] for line in out.output.splitlines() if line.strip().startswith("- ")]
    assert len(problems) >= 5, out.output
    for said in ("level 必须是", "解释为空", "未知的概念标签", "缺少 zh 题干", "find 在 buggy.py 中出现了 0 次"):
        assert any(said in p for p in problems), (said, out.output)
    assert [p for p in problems if english_sentences(p)] == [], out.output


def _broken_packs(root):
    """(what is broken, the pack folder): errors a teacher meets when a pack does not load."""
    from alignlings.content import skeleton

    def pack(name, edit):
        folder = root / name
        skeleton.write(folder, "my-quiz", "quiz")
        edit(folder)
        return name, folder

    def sub(rel, old, new):
        def edit(folder):
            path = folder / rel
            path.write_text(path.read_text(encoding="utf-8").replace(old, new, 1), encoding="utf-8")
        return edit

    return [
        pack("bad kind", sub("my-quiz/exercise.toml", 'kind = "quiz"', 'kind = "essay"')),
        pack("order", sub("pack.toml", 'order = ["my-quiz"]', 'order = ["my-quiz", "gone"]')),
        pack("bad toml", sub("my-quiz/exercise.toml", "level = 1", "level = = 1")),
        pack("include", sub("pack.toml", "include = []", 'include = ["nowhere"]')),
    ]


def test_a_pack_that_does_not_load_is_explained_in_chinese(isolated, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_LANG", "zh")
    seen = set()
    for what, folder in _broken_packs(isolated):
        out = runner.invoke(app, ["list", "--pack", str(folder)])
        assert out.exit_code == 2 and "参数 --pack 的值无效" in out.output, (what, out.output)
        said = _ours(out.output).replace(str(folder), "")
        assert english_sentences(said) == [], (what, out.output)
        seen.add(said)
        checked = runner.invoke(app, ["dev", "check", "--pack", str(folder)])
        assert checked.exit_code == 1 and "包无法加载" in checked.output, (what, checked.output)
        assert english_sentences(checked.output.replace(str(folder), "")) == [], (what, checked.output)
    assert len(seen) == 4  # four different errors, each in Chinese
    monkeypatch.setenv("ALIGNLINGS_LANG", "en")
    out = runner.invoke(app, ["list", "--pack", str(_broken_packs(isolated / "en")[0][1])])
    assert "kind must be one of" in out.output  # English stays as the loader wrote it


def test_every_isolation_text_the_sandbox_can_write_reads_as_chinese():
    """Built by the sandbox's own functions for every combination of what applied, so a phrase the
    sandbox adds without its Chinese fails here."""
    import itertools

    from alignlings import i18n
    from alignlings.grading.sandbox import MISSING_ISOLATION
    from alignlings.grading.sandbox.mounts import _describe, _features
    from alignlings.grading.sandbox.mounts import default_tasks

    texts = [MISSING_ISOLATION, "rlimits only (asked for)", "rlimits only (bubblewrap unavailable: bwrap: EPERM)",
             "the fork server did not start (Timeout)"]
    for namespaces, uid, userns, seccomp, processes, nproc, cgroup in itertools.product(
            (True, False), (True, False), (True, False), (True, False), (1, 4), (-1, default_tasks()), (True, False)):
        probe = {"uid_dropped": uid, "userns": userns, "seccomp": seccomp, "nproc": nproc, "pids_cgroup": cgroup}
        features = _features(namespaces, probe, processes, 64)
        texts += [_describe("namespaces via bubblewrap", features), _describe("namespaces", features),
                  "rlimits only (namespaces unavailable: EPERM); " + ", ".join(features),
                  "rlimits only (asked for rlimits only); " + ", ".join(features)]
    for text in texts:
        zh = i18n.reword("practice.isolation", text, "zh")
        assert english_sentences(zh) == [], (text, zh)
        assert i18n.reword("practice.isolation", text, "en") == text


def test_the_isolation_line_of_a_verdict_is_in_chinese(isolated):
    import io

    from rich.console import Console

    from alignlings.cli.report import render_verdict

    console = Console(file=io.StringIO(), width=400)
    render_verdict({"exercise": "dpo-loss", "passed": True, "error": None, "cases": [], "blanks": [],
                    "isolation": "namespaces (read-only file system except the work dir, private /tmp, no network, "
                                 "own pid namespace, at most 64 threads (RLIMIT_NPROC))", "stdout": ""}, "zh", console,
                   verbose=True)  # in full with --verbose; one short line otherwise (tests/test_learner_frictions.py)
    line = next(x for x in console.file.getvalue().splitlines() if x.startswith("隔离方式"))
    assert "无网络" in line and english_sentences(line) == [], line


def test_the_train_commands_speak_chinese(isolated, monkeypatch):
    from types import SimpleNamespace

    from alignlings.cli.train_toy_ppo import _summary

    monkeypatch.setenv("ALIGNLINGS_LANG", "zh")
    out = runner.invoke(app, ["train", "toy-dpo", "--steps", "2", "--seed", "0"])
    assert out.exit_code == 0, out.output
    assert "正在加载" in out.output and "训练用时" in out.output and english_sentences(out.output) == [], out.output
    bad = runner.invoke(app, ["train", "toy-grpo", "--iterations", "0"])
    assert bad.exit_code == 2 and "参数 --iterations 的值无效" in bad.output and "实际是 0" in bad.output
    result = SimpleNamespace(p_target_initial=0.0002, p_target_final=0.94, score_final=0.96, iterations=40,
                             train_seconds=3.2, config=SimpleNamespace(seed=0))
    assert "已达到" in _summary(result) and english_sentences(_summary(result)) == []
    for args in (["train", "dpo"], ["train", "grpo", "--model", str(isolated / "nowhere"), "--dataset", "x"]):
        refused = runner.invoke(app, args)
        assert refused.exit_code == 2 and "的值无效" in refused.output, refused.output
        assert english_sentences(_ours(refused.output).replace(str(isolated), "")) == [], refused.output
