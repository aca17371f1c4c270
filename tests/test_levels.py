"""Levels 4 and 5 of every fill-in exercise (issue 32 §1, ``practice.levels``): the files generated
from the reference, whole-file grading at a level with misconceptions named by their outputs,
progress per level in the store (SQLite and PostgreSQL), the session's API and the CLI."""

from __future__ import annotations

import ast
import json
import os
import re
import sqlite3

import pytest
from typer.testing import CliRunner

from alignlings.cli.app import app
from alignlings.content import blanks as bl
from alignlings.grading import levels
from alignlings.content.pack import load_pack

BOTH_PACKS = ["dpo-grpo", "bug-drills"]


def fill_in_exercises():
    course = load_pack(BOTH_PACKS)
    return course, [ex for ex in course if levels.has_levels(ex)]


COURSE, FILL_INS = fill_in_exercises()


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ALIGNLINGS_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("ALIGNLINGS_LANG", "en")
    monkeypatch.setenv("COLUMNS", "200")
    return tmp_path


def signatures(tree: ast.AST) -> dict[str, str]:
    """Qualified name -> the signature (arguments and defaults) of every function and method."""
    out = {}

    def visit(node, prefix=""):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[prefix + child.name] = ast.dump(child.args)
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
    visit(tree)
    return out


def test_every_fill_in_exercise_of_both_packs_has_levels_and_nothing_else_does():
    assert len(FILL_INS) >= 24
    assert all(ex.kind == "code" for ex in FILL_INS)
    assert not any(levels.has_levels(ex) for ex in COURSE if ex.kind != "code")
    assert any(ex.pack == "bug-drills" for ex in COURSE)  # both packs were searched


@pytest.mark.parametrize("ex", FILL_INS, ids=lambda e: e.key)
def test_the_level_files_keep_every_signature_and_give_no_body(ex):
    reference = ast.parse(bl.reference(ex.solution_source, bl.find_blanks(ex.solution_source)))
    n_blanks = len(bl.find_blanks(ex.solution_source))
    for level in levels.LEVELS:
        for lang in ("en", "zh"):
            text = levels.level_file(ex, level, lang)
            assert levels.level_of(text) == level
            tree = ast.parse(text)
            assert signatures(tree) == signatures(reference)  # the reference completes this file
            for name in ex.meta.get("entry", []):
                assert name in text
            assert "# BLANK" not in text and bl.PLACEHOLDER not in text
            todos = [f"# TODO {i}:" for i in range(1, n_blanks + 1)]
            if level == 4:
                assert all(t in text for t in todos)
            else:
                assert not any(t in text for t in todos)
            # every function that held a blank is now a docstring (level 4) and a raise: the body is theirs
            held = {b.name for b in levels._bodies(ex.solution_source)}
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef) and node.name in held:
                    body = [ast.unparse(n) for n in node.body]
                    assert body[-1] == "raise NotImplementedError" and len(body) <= (2 if level == 4 else 1), body
    assert ex.texts("zh").statement.splitlines()[0][:20] in levels.level_file(ex, 5, "zh")


def test_level_four_keeps_the_docstring_and_steps_and_level_five_only_the_signature():
    ex = COURSE.get("toy-grpo")
    four, five = levels.level_file(ex, 4), levels.level_file(ex, 5)
    assert '"""Rewards z-scored within the group' in four and '"""Rewards z-scored within the group' not in five
    assert "# reuse the group for a few steps" in four and "# reuse the group" not in five.split('"""', 3)[-1]
    assert "def reward_fn(token_id):\n    return 1.0 if token_id == TARGET else 0.0" in five  # a given helper stays
    assert "old.load_state_dict(policy.state_dict())" not in four + five  # the line learners forget is theirs
    zh = levels.level_file(COURSE.get("reward-model"), 4, "zh")
    assert "# 冻结主干：只有价值头参与学习" in zh and zh.startswith("# alignlings: level 4 · reward-model · 写出")


def test_a_level_is_parsed_or_refused_with_the_argument_named():
    ex = COURSE.get("dpo-loss")
    assert levels.parse_level("4", ex) == 4
    for bad in (3, 6, True, "x", None):
        with pytest.raises(levels.LevelError, match="level: expected one of 4, 5"):
            levels.parse_level(bad, ex)
    with pytest.raises(levels.LevelError, match="not a fill-in exercise"):
        levels.parse_level(4, COURSE.get("concepts"))
    assert levels.level_of("import torch\n") is None
    assert levels.level_of("# alignlings: level 5 · x\n") == 5


def test_a_pack_may_give_a_statement_of_its_own_for_a_level(tmp_path):
    import shutil

    pack = tmp_path / "p"
    shutil.copytree(COURSE.get("dpo-loss").path, pack / "dpo-loss")
    (pack / "pack.toml").write_text('[pack]\nid = "p"\norder = ["dpo-loss"]\n', encoding="utf-8")
    en = pack / "dpo-loss" / "texts" / "en.toml"
    en.write_text(en.read_text(encoding="utf-8") + '\nstatement_level5 = "Write the DPO loss of a batch."\n',
                  encoding="utf-8")
    ex = load_pack([pack]).get("dpo-loss")
    assert levels.level_statement(ex, 5, "en") == "Write the DPO loss of a batch."
    assert "# Write the DPO loss of a batch." in levels.level_file(ex, 5, "en")
    assert levels.level_statement(ex, 5, "zh") == ex.texts("zh").statement.strip()  # no zh override: the statement
    assert levels.level_statement(ex, 4, "en") == ex.texts("en").statement.strip()


# -- grading ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def grader():
    from alignlings.grading.grader import Grader

    with Grader(COURSE, warm=True) as g:
        yield g


def test_a_level_file_is_graded_whole_and_a_misconception_is_named_by_its_outputs(grader):
    ex = COURSE.get("dpo-loss")
    start = levels.check_level(grader, "dpo-loss", levels.level_file(ex, 5), 5)
    assert start["passed"] is False and start["level"] == 5 and start["blanks"] == []
    assert all("NotImplementedError" in c["message"] for c in start["cases"])
    # the learner's own words: a right body written differently from the reference
    mine = levels.level_file(ex, 4).replace("    raise NotImplementedError\n", (
        "    margin = beta * ((policy_chosen_logp - policy_rejected_logp) - (ref_chosen_logp - ref_rejected_logp))\n"
        "    return F.softplus(-margin).mean()\n"))
    ok = levels.check_level(grader, "dpo-loss", mine, 4, lang="zh")
    assert ok["passed"] is True and ok["misconception"] is None, ok
    # beta left out, written in the learner's own way: named as the known mistake, in Chinese
    wrong = mine.replace("margin = beta * (", "margin = (")
    bad = levels.check_level(grader, "dpo-loss", wrong, 4, lang="zh")
    assert bad["passed"] is False
    assert bad["misconception"]["id"] == "beta-missing" and bad["misconception"]["target"] == "margin"
    assert bad["misconception"]["message"].startswith("你的输出与一个已知错误完全一致")
    # the failing hidden case says what it tests, in words
    assert any("beta 0.5" in c["message"] for c in bad["cases"] if not c["passed"])
    other = mine.replace("F.softplus(-margin).mean()", "F.softplus(-margin).mean() * 2")  # no known mistake
    assert levels.check_level(grader, "dpo-loss", other, 4)["misconception"] is None


@pytest.mark.slow
@pytest.mark.parametrize("ex", FILL_INS, ids=lambda e: e.key)
def test_the_reference_passes_at_levels_four_and_five_and_every_misconception_fails(grader, ex):
    for level in levels.LEVELS:
        v = levels.check_level(grader, ex.key, levels.reference_at(ex, level), level, run_main=False, variant=0)
        assert v["passed"], (level, [c for c in v["cases"] if not c["passed"]], v["error"])
    for m in ex.misconceptions:
        for level in levels.LEVELS:
            v = levels.check_level(grader, ex.key, levels.misconception_at(ex, level, m), level,
                                   run_main=False, variant=0)
            assert v["passed"] is False, (m.id, level)
    problems, notes = levels.prove(grader, ex, levels=(4,))
    assert problems == []
    # the only misconceptions a whole file cannot name are those whose outputs equal another's
    assert all("its outputs equal" in n for n in notes), notes


# -- the store -------------------------------------------------------------------------------------

def _stores(tmp_path):
    from alignlings.practice.store import ProgressStore

    yield "sqlite", ProgressStore(tmp_path / "p.sqlite3")
    url = os.environ.get("ALIGNLINGS_TEST_DATABASE_URL")
    if url:
        import psycopg

        with psycopg.connect(url, autocommit=True) as db:
            db.execute("DROP SCHEMA public CASCADE")
            db.execute("CREATE SCHEMA public")
        yield "postgresql", ProgressStore(url)


def test_each_level_is_solved_on_its_own_in_the_store(tmp_path):
    from alignlings.practice.store.schema import SCHEMA_VERSION

    assert SCHEMA_VERSION >= 9
    seen = []
    for dialect, store in _stores(tmp_path):
        seen.append(dialect)
        store.record_attempt("dpo-loss", {"passed": False, "level": 4}, code="a")
        store.record_attempt("dpo-loss", {"passed": True, "level": 4}, code="b")
        store.record_attempt("dpo-loss", {"passed": False}, code="c")
        assert store.summary()["dpo-loss"]["solved"] is False, dialect  # level 4 does not solve the fill-in
        assert store.summary()["dpo-loss"]["attempts"] == 1
        levels_seen = store.level_summary()["dpo-loss"]
        assert set(levels_seen) == {4} and levels_seen[4]["solved"] and levels_seen[4]["attempts"] == 2
        assert [a["level"] for a in store.attempts("dpo-loss")] == [4, 4, 0]
        from alignlings.practice.store import ProgressStore

        other = ProgressStore(tmp_path / f"imported-{dialect}.sqlite3")
        assert other.import_(json.loads(json.dumps(store.export())))["attempts"] == 3
        assert other.level_summary()["dpo-loss"][4]["solved"] is True
        assert store.class_level_summaries()[""]["dpo-loss"][4]["attempts"] == 2
        store.reset("dpo-loss")
        assert store.level_summary() == {}
        store.close()
        other.close()
    # PostgreSQL wherever CI provides it (scripts/test.sh sets ALIGNLINGS_TEST_DATABASE_URL)
    assert seen == ["sqlite", "postgresql"] if os.environ.get("ALIGNLINGS_TEST_DATABASE_URL") else seen == ["sqlite"]


def test_a_version_eight_database_gets_the_level_column_and_keeps_its_attempts(tmp_path):
    from alignlings.practice.store import ProgressStore
    from alignlings.practice.store import schema

    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    schema.migrate(db, 8)
    db.execute("INSERT INTO attempts (uuid, learner, pack, exercise, passed, created_at, code, verdict, source) "
               "VALUES ('u1', '', 'dpo-grpo', 'dpo-loss', 1, '2026-01-01T00:00:00+00:00', 'x', '{}', 'cli')")
    db.close()
    store = ProgressStore(path)
    assert store.summary()["dpo-loss"]["solved"] is True
    assert store.attempts("dpo-loss")[0]["level"] == 0 and store.level_summary() == {}
    store.close()


# -- the session and the CLI -----------------------------------------------------------------------

def test_the_session_starts_checks_and_reports_a_level(tmp_path, grader):
    from alignlings.practice.session import Practice, UsageError
    from alignlings.practice.store import ProgressStore

    practice = Practice(ProgressStore(tmp_path / "s.sqlite3"), COURSE, grader, source="test")
    assert {ex.key for ex in practice.levelled_exercises()} == {ex.key for ex in FILL_INS}
    started = practice.start("grpo-advantages", level=4, lang="zh")
    assert started.level == 4 and started.text.startswith("# alignlings: level 4")
    with pytest.raises(UsageError) as err:
        practice.start("grpo-advantages", level=3)
    assert err.value.argument == "level"
    with pytest.raises(UsageError):
        practice.start("concepts", level=4)
    ex = COURSE.get("grpo-advantages")
    assert practice.check(ex, code=started.text).verdict["level"] == 4  # the header says the level
    body = ("    rewards = torch.as_tensor(group_rewards, dtype=torch.float)\n"
            "    return (rewards - rewards.mean()) / (rewards.std() + eps)\n")
    solved = practice.check(ex, code=started.text.replace("    raise NotImplementedError\n", body))
    assert solved.verdict["passed"] and solved.recorded
    with pytest.raises(UsageError):
        practice.check(ex, fills=["x"], level=4)
    row = practice.summary().exercises[ex.key]
    assert row.solved is False and row.levels == [4] and row.highest_level == 4
    assert practice.level_progress(ex)[4]["attempts"] == 2


runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_cli_start_level_check_and_list(isolated):
    out = invoke("start", "dpo-loss", "--level", "4")
    assert out.exit_code == 0, out.output
    path = isolated / "ws" / "dpo_loss_level4.py"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# alignlings: level 4 · dpo-loss") and "# TODO 4:" in text
    assert invoke("start", "dpo-loss", "--level", "4").exit_code == 1  # the learner's work is kept
    assert invoke("start", "dpo-loss", "--level", "3").exit_code == 2
    assert invoke("start", "concepts", "--level", "4").exit_code == 2
    assert not (isolated / "ws" / "dpo_loss.py").exists()  # the fill-in file is another file
    first = invoke("check", "dpo-loss", "--level", "4", "--json")
    assert first.exit_code == 1 and json.loads(first.output.strip().splitlines()[-1])["level"] == 4
    path.write_text(text.replace("    raise NotImplementedError\n", (
        "    chosen = policy_chosen_logp - ref_chosen_logp\n"
        "    rejected = policy_rejected_logp - ref_rejected_logp\n"
        "    return -F.logsigmoid(beta * (chosen - rejected)).mean()\n")), encoding="utf-8")
    ok = invoke("check", "dpo-loss", "--level", "4")
    assert ok.exit_code == 0 and "Level 4: write the body" in ok.output, ok.output
    # the header alone says the level: the same file checked as FILE grades at level 4
    again = invoke("check", "dpo-loss", str(path), "--json")
    assert json.loads(again.output.strip().splitlines()[-1])["level"] == 4
    listed = invoke("list")
    row = next(line for line in listed.output.splitlines() if " dpo-loss " in f" {line} ")
    assert "wrote" in listed.output and row.split()[row.split().index("dpo-loss") + 3] == "4", row  # kind, level, wrote
    zh = invoke("list", "--lang", "zh")
    assert "手写" in zh.output
    watched = invoke("watch", "dpo-loss", "--level", "4", "--once")
    assert watched.exit_code == 0 and "Level 4" in watched.output


def test_dev_check_reports_a_blank_that_no_level_can_give(tmp_path, grader):
    import shutil

    from alignlings.grading.devcheck import Report, check_levels

    pack = tmp_path / "p"
    shutil.copytree(COURSE.get("dpo-loss").path, pack / "dpo-loss")
    (pack / "pack.toml").write_text('[pack]\nid = "p"\norder = ["dpo-loss"]\n', encoding="utf-8")
    solution = pack / "dpo-loss" / "solution.py"
    solution.write_text(solution.read_text(encoding="utf-8").replace(
        "import torch.nn.functional as F\n", "import torch.nn.functional as F\n\nSCALE = 1.0  # BLANK\n"),
        encoding="utf-8")
    for lang in ("en", "zh"):  # five blanks now: the per-blank hints of four would not load
        texts = pack / "dpo-loss" / "texts" / f"{lang}.toml"
        texts.write_text(re.sub(r"\nblank_hints = \[.*?\n\]\n", "\n", texts.read_text(encoding="utf-8"), flags=re.S),
                         encoding="utf-8")
    report = Report("dpo-loss")
    problems = check_levels(load_pack([pack]).get("dpo-loss"), grader, report)
    assert problems and "a blank outside any function" in problems[0] and "solution.py line" in problems[0]


# -- spaced review and mastery ---------------------------------------------------------------------

def test_review_offers_the_level_four_version_of_an_exercise_filled_reliably(tmp_path, grader):
    import uuid
    from datetime import datetime, timedelta, timezone

    from alignlings.practice import review as rv
    from alignlings.practice.session import Practice
    from alignlings.practice.store import ProgressStore

    t0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
    course = load_pack()
    store = ProgressStore(tmp_path / "r.sqlite3")
    solved = {"exercise": "grpo-advantages", "passed": True, "cases": [], "blanks": [{"index": 1, "passed": True}]}
    store.import_({"format": "alignlings-progress", "version": 2, "attempts": [
        {"uuid": str(uuid.uuid4()), "pack": "dpo-grpo", "exercise": "grpo-advantages", "passed": True,
         "created_at": t0.isoformat(), "code": "", "verdict": solved, "source": "cli"}]})
    clock = rv.FixedClock(t0 + timedelta(days=1))
    practice = Practice(store, course, grader, clock)
    review = practice.review()
    level_key = "level/grpo-advantages"
    assert review.level_offers() == []  # one solve: not yet filled reliably
    assert level_key not in {d.item.key for d in review.queue()}
    item = review.find("exercise/grpo-advantages")
    review.answer(item, rv.GOOD)
    clock.advance(days=3)
    review.answer(item, rv.GOOD)  # the last two reviews right: reliable
    offered = [d for d in review.queue() if d.item.key == level_key]
    assert offered and offered[0].reviews == 0
    assert any(p.shown.item == level_key for p in practice.review_queue().items)
    prompt = rv.present(review, offered[0].item, "en")
    assert isinstance(prompt, rv.LevelPrompt) and prompt.form == "bug" and prompt.source.startswith("# alignlings: level 4")
    wrong = prompt.source.replace("    raise NotImplementedError\n", (
        "    r = torch.as_tensor(group_rewards, dtype=torch.float)\n"
        "    return (r - r.mean()) / (r.std(unbiased=False) + eps)\n"))
    answered = practice.review_answer("dpo-grpo", level_key, wrong)
    assert answered.result["correct"] is False and answered.rating == "again"
    assert answered.result["misconception"] == "biased-std"  # named by its outputs
    right = wrong.replace("r.std(unbiased=False)", "r.std()")
    assert practice.review_answer("dpo-grpo", level_key, right).result["correct"] is True
    # mastery counts the level item twice as much as the fill-in's
    rows = {r["concept"]: r for r in practice.mastery()}
    states = store.review_states(pack="dpo-grpo")
    horizon = clock.now() + timedelta(days=rv.MASTERY_HORIZON_DAYS)
    tag = rv.blank_concepts(course.get("grpo-advantages"))[1][0]
    keys = [k for k in states if k in ("exercise/grpo-advantages", level_key)]
    assert len(keys) == 2
    r = {k: rv.retrievability(states[k]["card"], horizon) for k in keys}
    others = [rv.retrievability(s["card"], horizon) for k, s in states.items()
              if k not in keys and tag in review.find(k).concepts]
    expected = (r["exercise/grpo-advantages"] + 2 * r[level_key] + sum(others)) / (3 + len(others))
    assert rows[tag]["mastery"] == pytest.approx(expected, abs=1e-4)
    store.close()


def test_a_level_attempt_is_a_review_of_the_level_item_and_never_solves_the_fill_in(tmp_path):
    from alignlings.practice import review as rv
    from alignlings.practice.store import ProgressStore

    store = ProgressStore(tmp_path / "h.sqlite3")
    store.record_attempt("dpo-loss", {"exercise": "dpo-loss", "passed": True, "level": 4, "blanks": [], "cases": []},
                         code="x", pack="dpo-grpo")
    rows = rv.history_reviews(load_pack(), "dpo-grpo", store.review_sources(pack="dpo-grpo"))
    assert [(r["item"], r["rating"]) for r in rows] == [("level/dpo-loss", rv.GOOD)]
    store.close()


def test_the_teacher_report_and_the_web_list_show_the_level_reached(tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from alignlings.practice import report
    from alignlings.practice.session import Practice
    from alignlings.practice.store import ProgressStore
    from alignlings.web.app import create_app

    course = load_pack()
    store = ProgressStore(tmp_path / "class.sqlite3")
    lid, _ = store.add_learner("Ann")
    ann = store.for_learner(lid)
    miss = {"exercise": "dpo-loss", "passed": False, "level": 4, "blanks": [], "cases": [],
            "misconception": {"id": "beta-missing", "blank": 3, "target": "margin", "message": "m"}}
    ann.record_attempt("dpo-loss", miss, code="a", pack="dpo-grpo")
    ann.record_attempt("dpo-loss", {"exercise": "dpo-loss", "passed": True, "level": 5, "blanks": [], "cases": []},
                       code="b", pack="dpo-grpo")
    row = next(r for r in report.learner_rows(store, course) if r["id"] == lid)
    assert row["solved"] == [] and row["levels"] == [{"exercise": "dpo-loss", "level": 5}]
    assert dict(row["misconceptions"]) == {"dpo-loss: beta-missing": 1}
    progress = Practice(store, course).class_report().progress
    mine = next(r for r in progress if r["learner"] == lid and r["exercise"] == "dpo-loss")
    assert mine["highest_level"] == 5 and mine["status"] == "not_started"  # the status is the fill-in's own
    store.close()

    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "solo"))
    solo = ProgressStore()
    solo.record_attempt("grpo-advantages", {"exercise": "grpo-advantages", "passed": True, "level": 4},
                        code="c", pack="dpo-grpo")
    solo.close()
    with TestClient(create_app()) as client:
        listed = {r["key"]: r for r in client.get("/api/exercises").json()}
        assert listed["grpo-advantages"]["highest_level"] == 4 and listed["grpo-advantages"]["solved"] is False
        assert listed["dpo-loss"]["highest_level"] is None
        home = client.get("/?lang=en").text
        assert 'class="tag level-reached" data-level="4"' in home


# -- notebooks -------------------------------------------------------------------------------------

def test_a_level_notebook_per_exercise_and_a_check_at_a_level_from_jupyter(tmp_path, isolated):
    import importlib.util

    import nbformat

    import alignlings
    from alignlings.practice.notebook import exercise_notebook
    from alignlings.practice.store import ProgressStore

    for ex in FILL_INS:
        for level in levels.LEVELS:
            nb = exercise_notebook(ex, "zh", level=level)
            nbformat.validate(nb)
            assert f"level={level})" in nb.cells[2].source and "raise NotImplementedError" in nb.cells[1].source
    five = exercise_notebook(COURSE.get("dpo-loss"), "en", level=5)
    assert five.cells[0].source.startswith("# DPO loss (sequence level) · Level 5: from the statement")
    assert "# Direct Preference" not in five.cells[1].source  # the statement is the first cell, not repeated
    path = tmp_path / "nb_level.py"
    path.write_text("import torch\nimport torch.nn.functional as F\n\n"
                    "def dpo_loss(policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp, beta=0.1):\n"
                    "    margin = (policy_chosen_logp - ref_chosen_logp) - (policy_rejected_logp - ref_rejected_logp)\n"
                    "    return -F.logsigmoid(margin).mean()\n")
    spec = importlib.util.spec_from_file_location("nb_level", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    verdict = alignlings.check("dpo-loss", module.dpo_loss, level=5)
    assert verdict["passed"] is False and verdict["level"] == 5
    assert verdict["misconception"]["id"] == "beta-missing" and "known mistake" in verdict._repr_html_()
    assert ProgressStore().level_summary()["dpo-loss"][5]["attempts"] == 1
    with pytest.raises(levels.LevelError):
        alignlings.check("dpo-loss", module.dpo_loss, level=2)
    out = invoke("export", "--out", str(tmp_path / "nbs"))
    assert out.exit_code == 0 and (tmp_path / "nbs" / "dpo-loss_level4.ipynb").exists()
    assert (tmp_path / "nbs" / "toy-ppo_level5.ipynb").exists() and not (tmp_path / "nbs" / "concepts_level4.ipynb").exists()


def test_a_level_attempt_never_hides_the_fill_in_work_on_its_page(tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from alignlings.practice.store import ProgressStore
    from alignlings.web.app import create_app

    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "page"))
    ex = COURSE.get("dpo-loss")
    blanks = bl.find_blanks(ex.solution_source)
    fills = {b.index: b.answer for b in blanks}
    fills[3] = "chosen_implicit_r - rejected_implicit_r"
    store = ProgressStore()
    store.record_attempt("dpo-loss", {"passed": False, "blanks": []}, code=bl.render(ex.solution_source, blanks, fills),
                         pack="dpo-grpo")
    store.record_attempt("dpo-loss", {"passed": False, "level": 4, "blanks": []}, code="# level 4 file", pack="dpo-grpo")
    store.close()
    with TestClient(create_app()) as client:
        page = client.get("/exercises/dpo-loss?lang=en").text
        assert 'value="chosen_implicit_r - rejected_implicit_r"' in page
        assert "# level 4 file" in client.get("/exercises/dpo-loss?level=4&lang=en").text
