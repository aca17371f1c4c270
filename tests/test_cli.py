"""The CLI through typer's runner: every command documented, start/check/hint/solution/quiz/cloze/
progress/reset/export, exit codes, and a start-up that never imports torch for list and --help."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from alignlings.cli.app import app
from alignlings.content import blanks as bl
from alignlings.grading.grader import template_for
from alignlings.content.pack import load_pack

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
    assert first.exit_code == 0 and "Welcome" in first.output and "token-logprobs" in first.output  # first in learning order
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
    from alignlings.practice.store import ProgressStore

    summary = ProgressStore().summary()["dpo-loss"]
    assert summary["hints"] == 2 and summary["revealed"]


def test_quiz_interactive(isolated):
    quiz = load_pack().get("concepts").quiz
    answers = "".join("ABCD"[q.answer] + "\n" for q in quiz)
    out = invoke("quiz", input="Z\n" + answers)
    assert out.exit_code == 0
    assert f"{len(quiz)}/{len(quiz)}" in out.output
    from alignlings.practice.store import ProgressStore

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
    from alignlings.practice.store import ProgressStore

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


# -- a teacher's pack: relative paths, global options, courses, messages that keep the pack -------

def make_teacher_pack(root, *, include=("dpo-grpo",), requires=("dpo-grpo-fill",)):
    """A pack 'ipo' whose dpo-loss is a copy of the built-in one (same id), in a track after the seed's."""
    import shutil

    root.mkdir(parents=True)
    shutil.copytree(load_pack().get("dpo-loss").path, root / "dpo-loss")
    inc = ", ".join(f'"{i}"' for i in include)
    req = ", ".join(f'"{r}"' for r in requires)
    (root / "pack.toml").write_text(f"""[pack]
id = "ipo"
title = {{ en = "IPO course", zh = "IPO 课程" }}
include = [{inc}]
order = ["dpo-loss"]

[[track]]
id = "ipo-basics"
title = {{ en = "IPO basics", zh = "IPO 入门" }}
requires = [{req}]
exercises = ["dpo-loss"]
""", encoding="utf-8")
    return root


def test_global_options_work_before_the_command(isolated):
    zh = invoke("--lang", "zh", "list")
    assert zh.exit_code == 0 and "未完成" in zh.output and "偏好对齐" in zh.output
    make_teacher_pack(isolated / "ipo")
    before = invoke("--pack", str(isolated / "ipo"), "list")
    after = invoke("list", "--pack", str(isolated / "ipo"))
    assert before.exit_code == 0 and "IPO course" in before.output and "ipo/dpo-loss" in before.output
    assert before.output == after.output
    assert "IPO course" not in invoke("list").output  # the options of one run do not leak into the next
    assert "IPO 入门" in invoke("--lang", "zh", "--pack", str(isolated / "ipo"), "list").output


def test_list_groups_by_pack_then_track_with_prerequisites(isolated):
    make_teacher_pack(isolated / "ipo")
    out = invoke("list", "--pack", str(isolated / "ipo")).output
    at = 0
    for text in ("Preference alignment", "DPO/GRPO fill-in", "dpo-grpo/dpo-loss", "IPO course", "IPO basics",
                 "after: DPO/GRPO fill-in, level 2–3", "ipo/dpo-loss"):  # in this order
        at = out.index(text, at)
    progress = invoke("progress", "--pack", str(isolated / "ipo"))
    assert progress.exit_code == 0 and "IPO basics" in progress.output and "0/1" in progress.output


def test_a_relative_pack_grades_and_keeps_its_own_progress(isolated, monkeypatch):
    make_teacher_pack(isolated / "ipo")
    (isolated / "sub").mkdir()
    monkeypatch.chdir(isolated / "sub")
    started = invoke("start", "ipo/dpo-loss", "--pack", "../ipo")
    assert started.exit_code == 0
    assert "alignlings check ipo/dpo-loss --pack ../ipo" in " ".join(started.output.split())
    path = isolated / "ws" / "ipo" / "dpo_loss.py"
    assert "_____" in path.read_text()
    ex = load_pack(isolated / "ipo").get("ipo/dpo-loss")
    path.write_text(bl.reference(ex.solution_source, bl.find_blanks(ex.solution_source)), encoding="utf-8")
    out = invoke("--pack", "../ipo", "check", "ipo/dpo-loss", "--json")
    verdict = json.loads(out.output.strip().splitlines()[-1])
    assert out.exit_code == 0 and verdict["passed"], verdict
    from alignlings.practice.store import ProgressStore

    s = ProgressStore()
    assert s.summary("ipo")["dpo-loss"]["solved"] and "dpo-loss" not in s.summary()
    home = invoke("--pack", "../ipo")
    assert "IPO course: 1/1" in home.output and "Preference alignment: DPO, GRPO and reward models: 0/" in home.output


def test_unknown_and_ambiguous_ids_name_the_packs(isolated):
    make_teacher_pack(isolated / "ipo")
    unknown = invoke("show", "nope", "--pack", str(isolated / "ipo"))
    text = " ".join(unknown.output.split())
    assert unknown.exit_code == 2
    assert "dpo-grpo (built-in)" in text and "ipo (" in text and "--pack DIR" in text and "include" in text
    both = invoke("show", "dpo-loss", "--pack", str(isolated / "ipo"))
    assert both.exit_code == 2 and "several packs" in " ".join(both.output.split())
    assert invoke("show", "ipo/dpo-loss", "--pack", str(isolated / "ipo")).exit_code == 0


def test_alignlings_pack_sets_the_default_course(isolated, monkeypatch):
    import os

    make_teacher_pack(isolated / "ipo", include=(), requires=())
    (isolated / "other").mkdir()
    (isolated / "other" / "pack.toml").write_text('[pack]\nid = "other"\ntitle = "Other"\n')
    monkeypatch.setenv("ALIGNLINGS_PACK", os.pathsep.join([str(isolated / "ipo"), str(isolated / "other")]))
    out = invoke("list").output
    assert "IPO course" in out and "Other" in out and "Preference alignment" not in out
    assert "dpo-loss" in out and "ipo/dpo-loss" not in out  # one pack has it: the plain id
    assert "Preference alignment" in invoke("list", "--pack", "dpo-grpo").output
    make_teacher_pack(isolated / "lone", include=())  # requires a track that no loaded pack has
    bad = invoke("list", "--pack", str(isolated / "lone"))
    assert bad.exit_code == 2 and "add its pack to include" in " ".join(bad.output.split())


def test_exported_notebooks_name_the_pack(isolated, monkeypatch):
    import nbformat

    make_teacher_pack(isolated / "ipo", include=(), requires=())
    monkeypatch.chdir(isolated)  # a relative --pack: the notebook names the absolute folder
    out_dir = isolated / "nb"
    assert invoke("--pack", "ipo", "export", "--out", str(out_dir)).exit_code == 0
    nb = nbformat.read(str(out_dir / "dpo-loss.ipynb"), as_version=4)
    call = next(c.source for c in nb.cells if "alignlings.check(" in c.source)
    assert f"alignlings.check('dpo-loss', dpo_loss, lang='en', pack=['{isolated / 'ipo'}'])" in call
    # with its level-4 and level-5 notebooks (practice.levels), which name the pack too
    assert sorted(p.name for p in out_dir.iterdir()) == ["dpo-loss.ipynb", "dpo-loss_level4.ipynb",
                                                         "dpo-loss_level5.ipynb"]
    level = nbformat.read(str(out_dir / "dpo-loss_level5.ipynb"), as_version=4)
    assert f"pack=['{isolated / 'ipo'}'], level=5)" in next(c.source for c in level.cells if "alignlings.check(" in c.source)


def test_hint_counter_stops_at_the_last_hint(isolated):
    total = len(load_pack().get("dpo-loss").texts("en").hints)
    outputs = [invoke("hint", "dpo-loss").output for _ in range(total + 2)]
    assert f"Hint {total}/{total}" in outputs[-1] and f"Hint {total + 1}/" not in "".join(outputs)
    from alignlings.practice.store import ProgressStore

    assert ProgressStore().summary()["dpo-loss"]["hints"] == total


def test_terminal_report_lists_labels_and_how_many_more(isolated):
    from rich.console import Console

    from alignlings.cli.report import SHOWN_FAILURES, render_verdict

    cases = [{"name": f"c{i}", "kind": "hidden", "passed": False, "message": f"case c{i} [x] differs"}
             for i in range(SHOWN_FAILURES + 3)]
    verdict = {"exercise": "dpo-loss", "passed": False, "blanks": [], "cases": cases, "error": None,
               "isolation": "test"}
    con = Console(record=True, width=200)
    render_verdict(verdict, "en", con)
    text = con.export_text()
    assert text.count("[hidden]") == SHOWN_FAILURES and "case c0 [x] differs" in text
    assert "and 3 more" in text
