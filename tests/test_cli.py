"""The CLI through typer's runner: every command documented, start/check/hint/solution/quiz/cloze/
progress/reset/export, exit codes, and a start-up that never imports torch for list and --help."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from alignlings.cli.app import app
from alignlings.practice import blanks as bl
from alignlings.practice.grader import template_for
from alignlings.practice.pack import load_pack

runner = CliRunner()


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ALIGNLINGS_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("ALIGNLINGS_LANG", "en")
    monkeypatch.setenv("COLUMNS", "200")
    return tmp_path


def invoke(*args, input=None):
    return runner.invoke(app, list(args), input=input, catch_exceptions=False)


def reference_fills(exercise_id):
    ex = load_pack().get(exercise_id)
    return ex, bl.find_blanks(ex.solution_source)


def test_every_command_is_documented():
    import typer.main

    group = typer.main.get_command(app)
    names = set(group.commands)
    assert {"list", "show", "start", "check", "watch", "hint", "solution", "quiz", "cloze", "progress",
            "reset", "export", "train", "dev", "serve"} <= names
    for name, cmd in group.commands.items():
        assert (cmd.help or "").strip(), f"command {name} has no help text"
        for sub_name, sub in getattr(cmd, "commands", {}).items():
            assert (sub.help or "").strip(), f"command {name} {sub_name} has no help text"


@pytest.mark.parametrize("argv", [["--help"], ["list"]])
def test_startup_does_not_import_torch(argv, tmp_path):
    code = ("import sys\nfrom alignlings.cli.app import app\n"
            f"try:\n    app({argv!r})\nexcept SystemExit:\n    pass\n"
            "print('TORCH', 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"ALIGNLINGS_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "COLUMNS": "120"})
    assert "TORCH False" in out.stdout, out.stdout + out.stderr


def test_home_welcomes_once_then_shows_next():
    first = invoke()
    assert first.exit_code == 0 and "Welcome" in first.output and "concepts" in first.output
    second = invoke()
    assert "Welcome" not in second.output and "Next" in second.output


def test_list_and_show(isolated):
    out = invoke("list")
    assert out.exit_code == 0
    for ex_id in ("concepts", "dpo-loss", "grpo-advantages", "grpo-loss", "reward-model", "toy-grpo"):
        assert ex_id in out.output
    zh = invoke("list", "--lang", "zh")
    assert "未完成" in zh.output
    shown = invoke("show", "grpo-loss", "--code")
    assert shown.output == template_for(load_pack().get("grpo-loss"), "en")
    assert invoke("show", "dpo-loss").exit_code == 0
    assert invoke("show", "nope").exit_code == 2
    assert invoke("list", "--lang", "fr").exit_code == 2


def test_start_never_overwrites_without_force(isolated):
    assert invoke("start", "dpo-loss").exit_code == 0
    path = isolated / "ws" / "dpo_loss.py"
    path.write_text("# my work\n", encoding="utf-8")
    again = invoke("start", "dpo-loss")
    assert again.exit_code == 1 and path.read_text() == "# my work\n"
    forced = invoke("start", "dpo-loss", "--force")
    assert forced.exit_code == 0 and "_____" in path.read_text()
    backups = list(path.parent.glob("dpo_loss.py.*.bak"))
    assert len(backups) == 1 and backups[0].read_text() == "# my work\n"
    assert invoke("start", "concepts").exit_code == 2


def test_check_exit_codes_and_json(isolated):
    ex, blanks = reference_fills("dpo-loss")
    assert invoke("check", "dpo-loss").exit_code == 2  # no file yet
    assert invoke("check", "no-such", str(isolated / "x.py")).exit_code == 2
    path = isolated / "mine.py"
    fills = {b.index: b.answer for b in blanks}
    fills[1] = "torch.sub(policy_chosen_logp, ref_chosen_logp)"  # correct, written differently
    fills[4] = "F.softplus(-margin).mean()"
    path.write_text(bl.render(ex.solution_source, blanks, fills), encoding="utf-8")
    ok = invoke("check", "dpo-loss", str(path), "--json")
    verdict = json.loads(ok.output.strip().splitlines()[-1])
    assert ok.exit_code == 0, verdict
    assert {"exercise", "passed", "blanks", "cases", "error", "isolation"} <= set(verdict)
    assert verdict["passed"] and all(b["passed"] for b in verdict["blanks"])
    fills[3] = "chosen_implicit_r - rejected_implicit_r"  # a known misconception: beta missing
    path.write_text(bl.render(ex.solution_source, blanks, fills), encoding="utf-8")
    bad = invoke("check", "dpo-loss", str(path), "--json")
    verdict = json.loads(bad.output.strip().splitlines()[-1])
    assert bad.exit_code == 1
    assert [b["passed"] for b in verdict["blanks"]] == [True, True, False, True]
    assert verdict["blanks"][2]["misconception"] == "beta-missing"
    text = invoke("check", "dpo-loss", str(path))
    assert text.exit_code == 1 and "blank 3" in text.output
    summary = invoke("progress")
    assert "dpo-loss" in summary.output


def test_hint_levels_and_solution(isolated):
    first = invoke("hint", "dpo-loss")
    second = invoke("hint", "dpo-loss")
    assert "Hint 1/" in first.output and "Hint 2/" in second.output
    sol = invoke("solution", "dpo-loss")
    assert "F.logsigmoid(margin)" in sol.output
    from alignlings.practice.progress import ProgressStore

    summary = ProgressStore().summary()["dpo-loss"]
    assert summary["hints"] == 2 and summary["revealed"]


def test_quiz_interactive(isolated):
    quiz = load_pack().get("concepts").quiz
    answers = "".join("ABCD"[q.answer] + "\n" for q in quiz)
    out = invoke("quiz", input="Z\n" + answers)
    assert out.exit_code == 0
    assert f"{len(quiz)}/{len(quiz)}" in out.output
    from alignlings.practice.progress import ProgressStore

    assert ProgressStore().summary()["concepts"]["solved"]


def test_cloze_with_seed(isolated):
    from alignlings.practice import cloze as cz

    ex = load_pack().get("dpo-loss")
    source = cz.snippet_source(ex, "en")
    positions = cz.maskable_positions(source)
    masked = cz.draw(positions, ratio=0.2, seed=5)
    answers = "".join(m.token + "\n" for m in masked)
    out = invoke("cloze", "dpo-loss", "--ratio", "0.2", "--seed", "5", input=answers)
    assert out.exit_code == 0, out.output
    assert f"{len(positions)} maskable · {len(masked)} masked" in out.output
    assert f"{len(masked)}/{len(masked)}" in out.output
    assert invoke("cloze", "reward-model").exit_code == 2
    assert invoke("cloze", "dpo-loss", "--ratio", "1.5").exit_code == 2


def test_progress_export_import_and_reset(isolated, monkeypatch):
    invoke("hint", "grpo-loss")
    export = isolated / "progress.json"
    assert invoke("progress", "--export", str(export)).exit_code == 0
    data = json.loads(export.read_text())
    assert data["format"] == "alignlings-progress"
    monkeypatch.setenv("ALIGNLINGS_HOME", str(isolated / "other-machine"))
    assert invoke("progress", "--import", str(export)).exit_code == 0
    from alignlings.practice.progress import ProgressStore

    assert ProgressStore().summary()["grpo-loss"]["hints"] == 1
    bad = isolated / "bad.json"
    bad.write_text("{not json")
    assert invoke("progress", "--import", str(bad)).exit_code == 2
    invoke("start", "grpo-loss")
    path = isolated / "ws" / "grpo_loss.py"
    path.write_text("# attempt\n")
    assert invoke("reset", "grpo-loss").exit_code == 0
    assert ProgressStore().summary().get("grpo-loss", {}).get("hints", 0) == 0
    assert "_____" in path.read_text()
    assert [p.read_text() for p in path.parent.glob("grpo_loss.py.*.bak")] == ["# attempt\n"]


def test_export_ipynb(isolated):
    import nbformat

    out_dir = isolated / "nb"
    assert invoke("export", "--format", "ipynb", "--out", str(out_dir)).exit_code == 0
    nb = nbformat.read(str(out_dir / "dpo-loss.ipynb"), as_version=4)
    nbformat.validate(nb)
    sources = [c.source for c in nb.cells]
    assert any("alignlings.check('dpo-loss', dpo_loss" in s for s in sources)
    assert any("_____" in s for s in sources)
    assert invoke("export", "--format", "pdf").exit_code == 2


def test_watch_once(isolated):
    ex, blanks = reference_fills("grpo-advantages")
    path = isolated / "adv.py"
    path.write_text(bl.reference(ex.solution_source, blanks))
    out = invoke("watch", "grpo-advantages", str(path), "--once")
    assert out.exit_code == 0, out.output
    assert "PASSED" in out.output
