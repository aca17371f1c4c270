"""Spot-the-bug drills (issue 13): the ``bug`` and ``bug-or-not`` kinds and the bug-drills pack.

The diffing, region and bug-or-not parts run in-process; grading goes through the real sandboxed
grader (one warm grader for the module): the buggy file fails and is recognised as such, the fixed
file passes with the story, each known wrong fix is matched by behaviour with its own feedback, the
verdict says which lines changed and where to look, and ``dev check`` proves every drill.
"""

from __future__ import annotations

import shutil

import pytest

from alignlings.content import bugdrill
from alignlings.content.pack import PackError, load_pack

PACK = load_pack("bug-drills")
BUGS = [ex.id for ex in PACK if ex.kind_spec.starts_from_buggy_file]
BUG_OR_NOT = [ex.id for ex in PACK if ex.kind == "bug-or-not"]
SCALE = PACK.get("scale-rewards-batch")


@pytest.fixture(scope="module")
def grader(tmp_path_factory):
    import os

    from alignlings.grading.grader import Grader

    os.environ.setdefault("ALIGNLINGS_HOME", str(tmp_path_factory.mktemp("home")))
    with Grader(PACK, warm=True) as g:
        yield g


# -- in-process: diffing, region, pack data ----------------------------------------------------------
def test_changes_name_the_learner_lines_and_the_buggy_lines():
    buggy = "a = 1\nb = 2\nc = 3\nd = 4\n"
    code = "a = 1\nb = 20\nc = 3\nextra = 0\nd = 4\n"
    hunks = bugdrill.changes(buggy, code)
    assert [(h["old"], h["new"]) for h in hunks] == [([2, 2], [2, 2]), (None, [4, 4])]
    assert bugdrill.describe_changes(hunks, "en") == "You changed line 2, line 4."
    assert bugdrill.describe_changes(bugdrill.changes(buggy, "a = 1\nd = 4\n"), "en") == \
        "You changed removed lines 2–3 of buggy.py."
    assert bugdrill.describe_changes([], "zh") == bugdrill.msg("unchanged", "zh")
    assert "+b = 20" in bugdrill.unified_diff(buggy, code)


def test_region_hint_widens_the_region_inside_its_function_without_naming_the_line():
    first, last = bugdrill.region(SCALE)
    text = bugdrill.where(SCALE, "en")
    assert "`grpo_advantages`" in text
    lo, hi = (int(x) for x in text.split("lines ")[1].split(" of")[0].split("–"))
    assert lo < first and hi > last  # wider than the bug itself
    assert "grpo_advantages" in bugdrill.where(SCALE, "zh") and "行" in bugdrill.where(SCALE, "zh")


def test_touches_region_counts_edits_and_insertions_where_they_land():
    first, last = bugdrill.region(SCALE)
    lines = SCALE.buggy_source.splitlines()
    inside = "\n".join(lines[:first - 1] + ["# x", *lines[first - 1:]]) + "\n"
    assert bugdrill.touches_region(SCALE, bugdrill.changes(SCALE.buggy_source, inside))
    far = SCALE.buggy_source.replace("import torch", "import torch  # edited", 1)
    assert not bugdrill.touches_region(SCALE, bugdrill.changes(SCALE.buggy_source, far))


def test_every_bug_drill_has_its_files_story_and_a_fix_inside_its_region():
    assert len(BUGS) >= 2 and len(BUG_OR_NOT) >= 1
    for eid in BUGS:
        ex = PACK.get(eid)
        assert ex.kind_spec.graded_as_file and ex.kind_spec.starts_from_buggy_file and not ex.kind_spec.answered_by_choice
        assert ex.buggy_source != ex.solution_source
        assert all(ex.texts(lang).story.strip() for lang in ("en", "zh"))
        hunks = bugdrill.changes(ex.buggy_source, ex.solution_source)
        assert hunks and all(bugdrill.touches_region(ex, [h]) for h in hunks), eid
        assert len(ex.wrong_fixes) >= bugdrill.MIN_WRONG_FIXES
        variants = bugdrill.trusted_variants(ex)
        assert set(variants) == {"buggy"} | {f"w:{f.id}" for f in ex.wrong_fixes}
        assert len(set(variants.values())) == len(variants)  # every wrong fix is its own file


def test_bug_drills_are_not_fill_in_exercises():
    assert PACK.fill_exercises() == []
    from alignlings.grading.grader import solution_for, template_for

    assert template_for(SCALE, "zh") == SCALE.buggy_source and solution_for(SCALE) == SCALE.solution_source


def test_bug_or_not_is_two_quiz_questions_with_every_option_explained():
    for eid in BUG_OR_NOT:
        ex = PACK.get(eid)
        assert ex.kind_spec.answered_by_choice and not ex.kind_spec.graded_as_file
        verdict_q, reason_q = ex.quiz
        assert verdict_q.id == f"{eid}:verdict" and reason_q.id == f"{eid}:reason"
        data = bugdrill.bug_or_not_data(ex)
        assert verdict_q.answer == bugdrill.ANSWERS.index(data["answer"])
        assert data["code"] in verdict_q.question["en"] and data["observation"]["zh"] in verdict_q.question["zh"]
        assert len(reason_q.options) >= bugdrill.MIN_REASONS
        assert all(o.why["en"] and o.why["zh"] for q in ex.quiz for o in q.options)
        assert bugdrill.check_bug_or_not(ex)[0] == []


def _copy(tmp_path, eid: str):
    root = tmp_path / "pack"
    shutil.copytree(PACK.get(eid).path, root / eid)
    (root / "pack.toml").write_text(f'[pack]\nid = "copy"\norder = ["{eid}"]\n', encoding="utf-8")
    return root, root / eid


def test_bad_drill_data_is_refused_with_the_file_named(tmp_path):
    root, folder = _copy(tmp_path, "scale-rewards-batch")
    with (folder / "misconceptions.toml").open("a", encoding="utf-8") as f:
        f.write('\n[[wrong_fix]]\nid = "both"\nfind = "x"\nfile = "y.py"\nfeedback = "z"\n')
    with pytest.raises(PackError, match="exactly one"):
        _ = load_pack(root).get("scale-rewards-batch").wrong_fixes
    root, folder = _copy(tmp_path / "b", "scale-rewards-batch")
    (folder / "misconceptions.toml").write_text(
        '[[wrong_fix]]\nid = "nowhere"\nfind = "not in the file"\nreplace = "x"\nfeedback = "z"\n', encoding="utf-8")
    ex = load_pack(root).get("scale-rewards-batch")
    with pytest.raises(PackError, match="occurs 0 times"):
        bugdrill.trusted_variants(ex)
    text = (folder / "exercise.toml").read_text(encoding="utf-8").replace("region = [26, 27]", "region = [30, 2]")
    (folder / "exercise.toml").write_text(text, encoding="utf-8")
    with pytest.raises(PackError, match="region"):
        bugdrill.region(load_pack(root).get("scale-rewards-batch"))
    root, folder = _copy(tmp_path / "c", "grpo-loss-zero")
    (folder / "bugornot.toml").write_text((folder / "bugornot.toml").read_text(encoding="utf-8")
                                          .replace('answer = "expected"', 'answer = "maybe"'), encoding="utf-8")
    with pytest.raises(PackError, match="answer must be"):
        _ = load_pack(root).get("grpo-loss-zero").quiz


def test_notebook_export_starts_from_the_buggy_code():
    from alignlings.practice.notebook import exercise_notebook

    nb = exercise_notebook(SCALE, "en", pack=["bug-drills"])
    code_cells = [c.source for c in nb.cells if c.cell_type == "code"]
    assert "grouped.std(dim=1).repeat_interleave(num_generations)\n    else" in code_cells[0]
    assert "alignlings.check('scale-rewards-batch', grpo_advantages" in code_cells[1]


# -- graded in the real sandbox ----------------------------------------------------------------------
@pytest.mark.slow
def test_the_buggy_file_fails_and_is_recognised_as_unchanged(grader):
    v = grader.check("scale-rewards-batch", SCALE.buggy_source, run_main=False)
    assert not v["passed"] and v["blanks"] == []
    bug = v["bug"]
    assert bug["like_buggy"] and bug["changed"] == [] and bug["message"] == bugdrill.msg("unchanged", "en")
    assert "nearly equal answers, batch scaling" in bug["failing"] and bug["hint"] is None and bug["story"] is None
    assert any(c["passed"] for c in v["cases"])  # "group" and "none" modes are right in the buggy code too


@pytest.mark.slow
def test_the_fix_passes_with_the_changed_line_and_the_story(grader):
    v = grader.check("scale-rewards-batch", SCALE.solution_source, lang="zh", run_main=False)
    assert v["passed"], v["cases"]
    bug = v["bug"]
    first, last = bugdrill.region(SCALE)
    assert bug["changed_lines"] and all(first <= n <= last for n in bug["changed_lines"])
    assert bug["story"] == SCALE.texts("zh").story and "#3991" in bug["story"]
    assert bug["failing"] == [] and bug["wrong_fix"] is None


@pytest.mark.slow
@pytest.mark.parametrize("eid", BUGS)
def test_each_wrong_fix_is_matched_by_behaviour_with_its_own_feedback(grader, eid):
    ex = PACK.get(eid)
    for fix in ex.wrong_fixes:
        # the same behaviour written differently still matches: a blank line and a comment added
        code = bugdrill.apply_wrong_fix(ex, fix).replace("\nimport torch\n", "\nimport torch  # mine\n\n", 1)
        v = grader.check(eid, code, lang="zh", run_main=False)
        assert not v["passed"]
        assert v["bug"]["wrong_fix"] == fix.id and v["bug"]["message"] == fix.feedback["zh"], fix.id
        assert v["bug"]["failing"] and v["bug"]["hint"]


@pytest.mark.slow
def test_an_edit_away_from_the_bug_gets_a_hint_toward_the_region(grader):
    code = SCALE.buggy_source.replace("advantages = rewards - mean", "advantages = (rewards - mean) * 1.0", 1)
    first, _ = bugdrill.region(SCALE)
    changed_at = next(i for i, line in enumerate(code.splitlines(), 1) if "* 1.0" in line)
    assert changed_at > first + 2
    v = grader.check("scale-rewards-batch", code, run_main=False)
    bug = v["bug"]
    assert bug["changed_lines"] == [changed_at] and bug["like_buggy"]
    assert bug["message"] == bugdrill.msg("same_as_buggy", "en")
    assert bug["hint"] == bugdrill.msg("outside", "en", where=bugdrill.where(SCALE, "en"))
    assert f"line {changed_at}" in bug["changes"]


@pytest.mark.slow
def test_an_unknown_wrong_fix_in_the_region_says_so_without_a_known_feedback(grader):
    code = SCALE.buggy_source.replace("std = grouped.std(dim=1).repeat_interleave(num_generations)\n    else",
                                      "std = rewards.abs().max().expand_as(rewards)\n    else", 1)
    v = grader.check("scale-rewards-batch", code, run_main=False)
    bug = v["bug"]
    assert not v["passed"] and bug["wrong_fix"] is None and not bug["like_buggy"] and bug["message"] is None
    assert bug["hint"].startswith("You are looking in the right place")


@pytest.mark.slow
@pytest.mark.parametrize("eid", [e for e in PACK.exercises])
def test_dev_check_proves_every_drill(grader, eid):
    from alignlings.grading.devcheck import check_exercise

    report = check_exercise(PACK.get(eid), grader)
    assert report.ok, "\n".join(report.problems)


@pytest.mark.slow
def test_dev_check_reports_a_wrong_fix_that_is_right_and_a_buggy_file_that_passes(tmp_path):
    from alignlings.grading.devcheck import check_exercise
    from alignlings.grading.grader import Grader

    root, folder = _copy(tmp_path, "scale-rewards-batch")
    with (folder / "misconceptions.toml").open("a", encoding="utf-8") as f:
        f.write('\n[[wrong_fix]]\nid = "actually-right"\n'
                'find = "std = grouped.std(dim=1).repeat_interleave(num_generations)\\n    else:"\n'
                'replace = "std = rewards.std().expand_as(rewards)\\n    else:"\nfeedback = "x"\n')
    with Grader(load_pack(root), warm=True) as g:
        problems = check_exercise(load_pack(root).get("scale-rewards-batch"), g).problems
    assert any("wrong_fix actually-right is accepted" in p for p in problems), problems
    shutil.copy(folder / "solution.py", folder / "buggy.py")
    with Grader(load_pack(root), warm=True) as g:
        problems = check_exercise(load_pack(root).get("scale-rewards-batch"), g).problems
    assert any("find occurs 0 times in buggy.py" in p for p in problems), problems  # the wrong fixes no longer apply
    (folder / "misconceptions.toml").write_text("", encoding="utf-8")
    with Grader(load_pack(root), warm=True) as g:
        problems = check_exercise(load_pack(root).get("scale-rewards-batch"), g).problems
    assert any("buggy.py passes every case" in p for p in problems)
    assert any("buggy.py and solution.py are the same" in p for p in problems)
    assert any("0 [[wrong_fix]]" in p for p in problems)


@pytest.mark.slow
def test_cli_start_check_and_hint(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from alignlings.cli.app import app

    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ALIGNLINGS_WORKSPACE", str(tmp_path / "ws"))
    run = CliRunner().invoke
    out = run(app, ["--pack", "bug-drills", "--lang", "en", "start", "grad-accum-loss"])
    assert out.exit_code == 0 and "one real bug" in out.output
    path = tmp_path / "ws" / "grad_accum_loss.py"
    assert path.read_text(encoding="utf-8") == PACK.get("grad-accum-loss").buggy_source
    out = run(app, ["--pack", "bug-drills", "--lang", "en", "check", "grad-accum-loss"])
    assert out.exit_code == 1 and "still shows the symptom" in out.output
    path.write_text(PACK.get("grad-accum-loss").solution_source, encoding="utf-8")
    out = run(app, ["--pack", "bug-drills", "--lang", "en", "check", "grad-accum-loss", "--json"])
    assert out.exit_code == 0
    import json

    verdict = json.loads(out.output)
    assert verdict["bug"]["changed_lines"] == [35, 36] and "#34191" in verdict["bug"]["story"]
    out = run(app, ["--pack", "bug-drills", "--lang", "zh", "hint", "grad-accum-loss"])
    assert out.exit_code == 0 and "提示 1/3" in out.output
