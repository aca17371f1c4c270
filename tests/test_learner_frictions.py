"""The small frictions a rustlings user notices (issue 33): what comes next after a pass, the sandbox in one
short line, close ids for a mistyped one, `solution` with readable formulas, `cloze` without an id, a
welcome that does not end on a bare `alignlings --help`, and a 404 page in the learner's language."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from alignlings.cli.app import app
from alignlings.content.pack import load_pack

PACK = load_pack()
runner = CliRunner()
ISOLATED = ("namespaces (read-only file system except the work dir, private /tmp, no network, own pid namespace, "
            "own unprivileged uid, no new processes (seccomp), at most 64 threads (RLIMIT_NPROC))")


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ALIGNLINGS_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("COLUMNS", "80")
    return tmp_path


class PassingGrader:
    """A grader whose every check passes, isolated (the real sandbox is tested elsewhere)."""

    def __init__(self, pack, warm=False):
        self.pack = pack

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def close(self):
        pass

    def check(self, exercise_id, code=None, *, fills=None, lang="en", run_main=True, quick=False):
        return {"exercise": exercise_id, "passed": True, "blanks": [], "cases": [], "error": None,
                "isolation": ISOLATED, "stdout": ""}


@pytest.fixture
def passing(monkeypatch, tmp_path):
    import alignlings.grading.grader as grader_mod

    monkeypatch.setattr(grader_mod, "Grader", PassingGrader)
    f = tmp_path / "mine.py"
    f.write_text("x = 1\n", encoding="utf-8")
    return f


# -- what comes next -------------------------------------------------------------------------------
def test_practice_says_what_comes_next_in_track_order_and_wraps_around():
    from alignlings.practice.store import ProgressStore
    from alignlings.practice.session import Practice

    practice = Practice(ProgressStore(), PACK)
    order = [k for tr in PACK.tracks for k in tr.exercises]
    dpo = PACK.get("dpo-loss")
    assert practice.next_exercise(dpo).key == order[order.index("dpo-loss") + 1]
    assert practice.next_exercise().key == order[0]
    last = PACK.exercises[order[-1]]
    assert practice.next_exercise(last).key == order[0]  # past the end: the first unsolved one
    practice.store.record_attempt(order[0], {"passed": True}, code="x")
    assert practice.next_exercise(last).key == order[1]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_check_after_a_pass_names_the_next_exercise_and_one_short_sandbox_line(passing, lang):
    from alignlings.practice.session import Practice
    from alignlings.practice.store import ProgressStore

    nxt = Practice(ProgressStore(), PACK).next_exercise(PACK.get("dpo-loss"))
    out = runner.invoke(app, ["check", "dpo-loss", str(passing), "--lang", lang])
    assert out.exit_code == 0, out.output
    assert f"alignlings start {nxt.key}" in " ".join(out.output.split()), out.output
    sandbox = [line for line in out.output.splitlines() if "--verbose" in line]
    assert len(sandbox) == 1 and len(sandbox[0]) <= 80, out.output  # one short line
    assert "RLIMIT_NPROC" not in out.output and "seccomp" not in out.output
    verbose = runner.invoke(app, ["check", "dpo-loss", str(passing), "--lang", lang, "--verbose"])
    assert "RLIMIT_NPROC" in verbose.output and "--verbose" not in verbose.output


def test_watch_after_a_pass_names_the_next_exercise(passing):
    out = runner.invoke(app, ["watch", "dpo-loss", str(passing), "--once"])
    assert out.exit_code == 0, out.output
    assert "Next: grpo-advantages" in out.output and "`alignlings start grpo-advantages`" in out.output


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_home_screen_ends_with_what_to_run_not_a_bare_help(lang):
    out = runner.invoke(app, ["--lang", lang])
    assert out.exit_code == 0
    last = out.output.strip().splitlines()[-1].strip()
    assert last != "alignlings --help" and "alignlings serve" in out.output.replace("\n", "")
    assert all(line == line.rstrip() for line in out.output.splitlines())


# -- ids -------------------------------------------------------------------------------------------
def test_close_ids_prefer_a_prefix_and_never_list_everything():
    from alignlings.cli.common import close_ids

    ids = list(PACK.exercises)
    assert close_ids("dpo", ids)[0] == "dpo-loss"
    assert close_ids("dpo-los", ids)[0] == "dpo-loss"
    assert close_ids("zzzz", ids) == []
    assert 0 < len(close_ids("grpo", ids)) <= 4


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_unknown_id_suggests_a_few_ids_not_all_fifty(lang):
    out = runner.invoke(app, ["check", "dpo", "--lang", lang])
    assert out.exit_code == 2
    assert "'dpo-loss'" in out.output
    named = [ex_id for ex_id in PACK.exercises if f"'{ex_id}'" in out.output]
    assert len(named) <= 4, named
    assert "alignlings list" in out.output and str(len(PACK.exercises)) in out.output


# -- solution renders formulas ---------------------------------------------------------------------
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_solution_renders_formulas_as_show_does(lang):
    out = runner.invoke(app, ["solution", "dpo-loss", "--lang", lang])
    assert out.exit_code == 0, out.output
    explanation = out.output.split("return")[-1]
    assert "$" not in explanation and "\\frac" not in explanation and "\\sigma" not in explanation, explanation
    assert "σ" in out.output or "β" in out.output


# -- cloze without an id ---------------------------------------------------------------------------
def test_cloze_without_an_id_picks_the_next_snippet_and_its_help_lists_them():
    snippets = [ex.key for ex in PACK if ex.cloze]
    helped = runner.invoke(app, ["cloze", "--help"], env={"COLUMNS": "200"})
    assert helped.exit_code == 0
    assert all(s in helped.output for s in snippets), helped.output
    out = runner.invoke(app, ["cloze", "--ratio", "0.05", "--seed", "1"], input="\n" * 100)
    assert out.exit_code == 0, out.output
    assert "SNIPPET" not in out.output and "Missing argument" not in out.output


# -- the web's 404 in Chinese ----------------------------------------------------------------------
def test_a_chinese_404_page_has_no_engine_english(tmp_path):
    from fastapi.testclient import TestClient

    from alignlings.web.app import create_app

    app_ = create_app(None, db_path=tmp_path / "p.sqlite3", warm_up=False)
    with TestClient(app_) as client:
        for path in ("/exercises/nope", "/cloze/nope", "/no-such-page"):
            page = client.get(path + "?lang=zh")
            assert page.status_code == 404
            text = page.text.split("<main", 1)[-1]
            assert "unknown exercise" not in text and "Not Found" not in text, text[:500]
            assert "没有" in text
        en = client.get("/exercises/nope?lang=en")
        assert "unknown exercise 'nope'" in en.text.replace("&#39;", "'")


# -- review: nothing due, one date format ----------------------------------------------------------
def test_one_date_format_per_language_in_the_terminal():
    from alignlings.cli.review import due_line, when_text

    iso = "2026-12-03T03:56:00+00:00"
    en, zh = when_text(iso, "en"), when_text(iso, "zh")
    assert re.fullmatch(r"2026-12-0\d \d{2}:\d{2}", en), en
    assert re.fullmatch(r"2026年12月\d{1,2}日 \d{2}:\d{2}", zh), zh
    line = due_line({"due": 0, "items": 7, "next": iso}, "en")
    assert "7 scheduled" in line and en in line
    assert "已安排 7 项" in due_line({"due": 0, "items": 7, "next": iso}, "zh")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_review_page_offers_something_to_do_and_bug_or_not_is_not_called_a_quiz(tmp_path, lang):
    from fastapi.testclient import TestClient

    from alignlings import i18n
    from alignlings.web.app import create_app

    app_ = create_app(None, db_path=tmp_path / "p.sqlite3", warm_up=False)
    with TestClient(app_) as client:
        page = client.get(f"/review?lang={lang}").text
        assert 'id="review-offer"' in page
        assert 'href="/exercises/token-logprobs"' in page
        assert 'href="/cloze/' not in page  # nothing solved: a cloze round would show a solution
        app_.state.ctx.store.record_attempt("sft-loss", {"passed": True}, code="x")
        page = client.get(f"/review?lang={lang}").text
        assert 'href="/exercises/token-logprobs"' in page and 'href="/cloze/sft-loss"' in page
        assert "none_scheduled" in page  # the client has the string it needs
        def main(path: str) -> str:  # the page as shown (the script's string table holds every string)
            return client.get(f"{path}?lang={lang}").text.split("<main", 1)[1].split("<script", 1)[0]

        drill = main("/exercises/grpo-loss-zero")
        assert i18n.t("web.ui.quiz_rule", lang) not in drill and i18n.t("web.ui.drill_rule", lang) in drill
        assert i18n.t("web.ui.retake", lang) not in drill and i18n.t("web.ui.drill_done", lang)[:3] in drill
        assert i18n.t("web.ui.quiz_rule", lang) in main("/quiz")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_review_with_nothing_due_says_what_is_scheduled_and_what_to_do(lang):
    from datetime import datetime, timedelta, timezone

    from alignlings.practice.store import ProgressStore

    store = ProgressStore()
    store.record_attempt("dpo-loss", {"passed": True}, code="x")  # scheduled for later, not due today
    out = runner.invoke(app, ["review", "--lang", lang])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    scheduled = "scheduled" if lang == "en" else "已安排"
    assert scheduled in text, text
    year = str((datetime.now(timezone.utc) + timedelta(days=1)).year)
    assert year in text and "/" not in text.split(scheduled)[1][:40]
    assert "alignlings start token-logprobs" in text
