"""Spaced review (issue 14): FSRS schedules from real history, a simulated learner over 60 days with
a fixed clock, export/import and concurrent writers, concept tags and mastery, the CLI, the web
routes in-process and the Review page in a real browser (keyboard only, both languages)."""

from __future__ import annotations

import json
import shutil
import threading
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from alignlings.practice import review as rv
from alignlings.content.pack import PackError, load_exercise, load_pack
from alignlings.practice.store import ProgressStore

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)  # a Monday, 09:00 UTC
PACK = "dpo-grpo"


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))


@pytest.fixture(scope="module")
def pack():
    return load_pack()


def _u() -> str:
    return str(uuid.uuid4())


def seed_history(store: ProgressStore, at: datetime = T0) -> None:
    """One item of each kind enters review from ordinary practice at ``at``: a quiz question answered
    right, a cloze round with line 12 of dpo-loss right, a misconception hit (sum-not-mean on blank 4
    of dpo-loss), and grpo-advantages solved at the first attempt without hints."""
    t = at.isoformat()
    hit = {"exercise": "dpo-loss", "passed": False, "cases": [], "blanks": [
        {"index": 4, "passed": False, "misconception": "sum-not-mean", "fill": "-F.logsigmoid(margin).sum()"}]}
    solved = {"exercise": "grpo-advantages", "passed": True, "cases": [], "blanks": [{"index": 1, "passed": True}]}
    cloze = [("12:4", "loss"), ("12:11", "-"), ("12:12", "F"), ("12:14", "logsigmoid"), ("12:25", "margin"),
             ("12:33", "mean")]
    store.import_({"format": "alignlings-progress", "version": 2,
                   "quiz_answers": [{"uuid": _u(), "pack": PACK, "question_id": "bt-probability", "choice": 2,
                                     "correct": True, "created_at": t}],
                   "cloze": [{"uuid": _u(), "pack": PACK, "snippet": "dpo-loss", "key": k, "token": tok,
                              "correct": True, "created_at": t} for k, tok in cloze],
                   "attempts": [{"uuid": _u(), "pack": PACK, "exercise": "dpo-loss", "passed": False, "created_at": t,
                                 "code": "", "verdict": hit, "source": "cli"},
                                {"uuid": _u(), "pack": PACK, "exercise": "grpo-advantages", "passed": True,
                                 "created_at": t, "code": "", "verdict": solved, "source": "cli"}]})


KEYS = {"quiz": "quiz/bt-probability", "cloze": "cloze/dpo-loss/12",
        "misconception": "misconception/dpo-loss/sum-not-mean", "exercise": "exercise/grpo-advantages"}


# -- ratings and the scheduler ---------------------------------------------------------------------

def test_ratings():
    assert rv.rate(False, seconds=1) == rv.AGAIN
    assert rv.rate(True, hinted=True, seconds=1) == rv.HARD
    # a right answer is Good however fast (issue 22: speed alone sent answers 44-217 days out);
    # the learner says "too easy" afterwards (Review.rerate)
    assert rv.rate(True, seconds=1) == rv.GOOD
    assert rv.rate(True, seconds=600) == rv.GOOD
    assert rv.rate(True) == rv.GOOD
    with pytest.raises(ValueError, match="seconds"):
        rv.rate(True, seconds=-1)
    with pytest.raises(TypeError):  # issue 30: the parameters that changed nothing are gone
        rv.rate(True, kind="quiz", first_try=False)


def test_items_learned_together_drift_apart_and_replays_agree(tmp_path):
    """17 items learned the same morning, then answered right (Good) each day they are due, for 90
    days: with FSRS's fuzz no day brings all 17, the first (day 2) included (without it every one
    came due together, day after day). The fuzz is seeded per review, so replaying the log, and rebuilding it in another
    store after an export and import, gives the same due dates."""
    keys = [f"quiz/q{i}" for i in range(17)]
    logs = {k: [{"item": k, "rating": rv.GOOD, "reviewed_at": (T0 + timedelta(minutes=i)).isoformat()}]
            for i, k in enumerate(keys)}
    due_days: dict[int, set[str]] = {}
    for day in range(1, 91):
        at = T0 + timedelta(days=day, hours=1)
        for k in keys:
            if rv._utc(rv.replay(logs[k])[1]) < rv.end_of_day(at):
                logs[k].append({"item": k, "rating": rv.GOOD, "reviewed_at": at.isoformat()})
                due_days.setdefault(day, set()).add(k)
    # the first interval (2 days) splits over days 2 and 3 (the package would bring all 17 on day 2)
    assert 0 < len(due_days[2]) < len(keys) and due_days[2] | due_days[3] == set(keys), due_days
    later = {d: len(ks) for d, ks in due_days.items() if d > 1}
    assert later and max(later.values()) < len(keys), later
    assert len({min(d for d, ks in due_days.items() if d > 3 and k in ks) for k in keys}) >= 3  # spread out
    # the same log gives the same dates, whoever replays it
    assert [rv.replay(logs[k]) for k in keys] == [rv.replay([dict(r) for r in logs[k]]) for k in keys]
    with ProgressStore(tmp_path / "a.sqlite3") as a, ProgressStore(tmp_path / "b.sqlite3") as b:
        a.record_reviews([r for k in keys for r in logs[k]], rv.replay, pack=PACK)
        data = a.export()
        b.import_(data)
        rv.rebuild_after_import(b, None, data)
        assert a.review_states(pack=PACK).keys() == b.review_states(pack=PACK).keys() == set(keys)
        assert ({k: rv._utc(v["due"]) for k, v in a.review_states(pack=PACK).items()}
                == {k: rv._utc(v["due"]) for k, v in b.review_states(pack=PACK).items()}
                == {k: rv._utc(rv.replay(logs[k])[1]) for k in keys})


def test_fixed_clock_and_bad_input():
    clock = rv.FixedClock(T0)
    assert clock.advance(days=2) == T0 + timedelta(days=2)
    with pytest.raises(ValueError, match="at"):
        rv.FixedClock(datetime(2026, 1, 1))  # naive
    with pytest.raises(ValueError, match="delta"):
        clock.advance(days=-1)
    with pytest.raises(ValueError, match="logs"):
        rv.replay([])


# -- concept tags ------------------------------------------------------------------------------------

def test_seed_pack_tags_every_blank_of_its_six_exercises(pack):
    names = {lang: rv.concept_names(pack, lang) for lang in ("en", "zh")}
    for ex_id in ("dpo-loss", "grpo-advantages", "grpo-loss", "reward-model", "toy-grpo"):
        ex = pack.get(ex_id)
        from alignlings.content.blanks import find_blanks

        tags = rv.blank_concepts(ex)
        assert sorted(tags) == [b.index for b in find_blanks(ex.solution_source)], ex_id
    assert all(rv.question_concepts(pack.get("concepts")).values())
    used = {t for item in rv.catalog(pack).values() for t in item.concepts}
    assert {"implicit-reward", "importance-ratio", "kl-estimators", "advantage-normalisation",
            "padding-and-masks", "loss-aggregation"} <= used
    for lang in ("en", "zh"):
        assert used <= set(names[lang]), (lang, used - set(names[lang]))
    assert names["zh"]["clipping"] != names["en"]["clipping"]
    sum_not_mean = rv.catalog(pack)[(PACK, KEYS["misconception"])]
    assert sum_not_mean.concepts == ("loss-aggregation",) and sum_not_mean.blank == 4
    # a misconception without its own tags takes its blank's
    assert rv.catalog(pack)[(PACK, "misconception/dpo-loss/ratio-flipped")].concepts == ("implicit-reward",)


@pytest.mark.parametrize("table, match", [
    ('[concepts]\n9 = ["x"]\n', "not a blank number"),
    ('[concepts]\n1 = "implicit-reward"\n', "list of concept tags"),
    ('[concepts]\n1 = ["Implicit Reward"]\n', "list of concept tags"),
])
def test_bad_concept_tags_name_the_file(tmp_path, pack, table, match):
    folder = tmp_path / "dpo-loss"
    shutil.copytree(pack.get("dpo-loss").path, folder)
    toml = folder / "exercise.toml"
    text = toml.read_text(encoding="utf-8")
    toml.write_text(text[: text.index("[concepts]")] + table, encoding="utf-8")
    with pytest.raises(PackError, match=match) as err:
        rv.blank_concepts(load_exercise(folder))
    assert "exercise.toml" in str(err.value)


# -- the simulated learner -------------------------------------------------------------------------

LAPSE = {"misconception": 3, "cloze": 2}  # these kinds get their n-th review (here) wrong


def simulate(store: ProgressStore, pack, days: int = 60) -> tuple[rv.Review, dict[str, list[dict]]]:
    """Every day at 10:00 UTC the learner reviews everything due: right (Good), and says "too easy"
    after each right quiz answer (re-rated Easy), except the planned lapses."""
    seed_history(store)
    clock = rv.FixedClock(T0 + timedelta(hours=1))
    review = rv.Review(store, pack, clock)
    seen: dict[str, int] = {}
    for _ in range(days):
        for due in review.queue():
            kind = due.item.kind
            seen[kind] = seen.get(kind, 0) + 1
            correct = LAPSE.get(kind) != seen[kind]
            seconds = 8.0 if kind == "quiz" else 90.0
            review.answer(due.item, rv.rate(correct, seconds=seconds), duration_ms=int(seconds * 1000))
            if correct and kind == "quiz":
                review.rerate(due.item, rv.EASY)
        clock.advance(days=1)
    return review, {kind: rv.schedule_row(review, review.find(key)) for kind, key in KEYS.items()}


def test_simulated_learner_over_60_days(tmp_path, pack, capsys):
    with ProgressStore(tmp_path / "a.sqlite3") as store:
        review, schedules = simulate(store, pack)
        with capsys.disabled():
            print("\nsimulated learner: item, day, rating, next due (day)")
            for kind, rows in schedules.items():
                for r in rows:
                    print(f"  {KEYS[kind]:40s} day {r['day']:2d}  {r['rating']:5s}  next due day {r['next_due_day']}"
                          f"  ({r['source']})")
        for kind, rows in schedules.items():
            assert rows[0]["source"] in ("quiz", "cloze", "attempt"), kind  # introduced by real history
            assert len(rows) >= 3, (kind, rows)
            days = [r["day"] for r in rows]
            gaps = [b - a for a, b in zip(days, days[1:])]
            lapse = LAPSE.get(kind)
            if lapse is None:
                # answered right every time: each interval is longer than the one before
                assert all(b > a for a, b in zip(gaps, gaps[1:])), (kind, days)
                assert all(r["rating"] != "again" for r in rows[1:])
            else:
                i = lapse  # rows[0] is the history event; rows[i] is the i-th review here
                assert rows[i]["rating"] == "again"
                assert rows[i]["next_due_day"] == rows[i]["day"] + 1  # a lapse comes back the next day
                assert rows[i + 1]["day"] == rows[i]["day"] + 1
                before = rows[i]["day"] - rows[i - 1]["day"]
                assert rows[i + 2]["day"] - rows[i + 1]["day"] <= before  # the interval restarts smaller
        assert schedules["misconception"][0]["rating"] == "again"  # hitting a misconception is a lapse
        assert schedules["exercise"][0]["rating"] == "easy"  # solved at the first attempt, no hint
        assert schedules["quiz"][1]["rating"] == "easy"
        # after the last day nothing is overdue: the queue is what falls due today
        counts = review.counts()
        # the four items, and the level-4 version of grpo-advantages, offered once it was filled reliably
        assert counts["items"] == 5 and counts["next"] is not None
        level = rv.schedule_row(review, review.find("level/grpo-advantages"))
        assert level[0]["source"] == "review"  # offered by review, never introduced by history here


def test_history_after_introduction_counts_and_sync_is_idempotent(tmp_path, pack):
    with ProgressStore(tmp_path / "a.sqlite3") as store:
        seed_history(store)
        review = rv.Review(store, pack, rv.FixedClock(T0 + timedelta(days=1)))
        assert review.sync() == 4  # one review per seeded item (the cloze round touches one line)
        assert review.sync() == 0 and rv.Review(store, pack, review.clock).sync() == 0
        # the same question answered wrong later on the quiz page is a lapse of that item
        store.import_({"format": "alignlings-progress", "version": 2, "quiz_answers": [
            {"uuid": _u(), "pack": PACK, "question_id": "bt-probability", "choice": 0, "correct": False,
             "created_at": (T0 + timedelta(hours=5)).isoformat()}]})
        assert review.sync() == 1
        log = store.review_log(pack=PACK, item=KEYS["quiz"])
        assert [r["rating"] for r in log] == [rv.GOOD, rv.AGAIN]
        assert rv._utc(store.review_states(pack=PACK)[KEYS["quiz"]]["due"]) == T0 + timedelta(hours=5, days=1)


def test_nothing_is_lost_across_export_and_import(tmp_path, pack):
    with ProgressStore(tmp_path / "a.sqlite3") as a, ProgressStore(tmp_path / "b.sqlite3") as b:
        review_a, _ = simulate(a, pack, days=30)
        data = json.loads(json.dumps(a.export()))
        assert data["version"] == 3 and len(data["review_log"]) == len(a.review_log(pack=PACK))
        counts = b.import_(data)
        assert counts["review_log"] == len(data["review_log"])
        assert b.import_(data)["review_log"] == 0  # by uuid: a second import adds nothing
        review_b = rv.Review(b, pack, rv.FixedClock(review_a.clock.now()))
        review_b.sync()
        assert b.review_states(pack=PACK).keys() == a.review_states(pack=PACK).keys()
        for key, state in a.review_states(pack=PACK).items():
            assert b.review_states(pack=PACK)[key]["card"] == state["card"], key
        assert [d.item.key for d in review_b.queue()] == [d.item.key for d in review_a.queue()]
        assert review_b.mastery() == review_a.mastery()
        # an old (version 2) export still imports; a bad review row is refused naming the field
        assert b.import_({"format": "alignlings-progress", "version": 2, "attempts": []})["review_log"] == 0
        bad = dict(data, review_log=[dict(data["review_log"][0], rating=7, uuid=_u())])
        with pytest.raises(ValueError, match=r"review_log\[0\]\.rating"):
            b.import_(bad)
        bad = dict(data, review_log=[dict(data["review_log"][0], item="drill/x", uuid=_u())])
        with pytest.raises(ValueError, match=r"review_log\[0\]\.item"):
            b.import_(bad)
        with pytest.raises(ValueError, match="review_log"):
            b.import_({"format": "alignlings-progress", "version": 3,
                       "review_log": [dict(data["review_log"][0], item="exercise/nope", uuid=_u())]},
                      exercises={"dpo-loss"})


def test_concurrent_writers_lose_nothing(tmp_path, pack):
    path = tmp_path / "shared.sqlite3"
    with ProgressStore(path) as setup:
        seed_history(setup)
    errors = []

    def learner(offset_minutes: int) -> None:
        try:
            with ProgressStore(path) as store:
                clock = rv.FixedClock(T0 + timedelta(days=1, minutes=offset_minutes))
                review = rv.Review(store, pack, clock)
                item = review.find(KEYS["quiz"])
                for _ in range(15):
                    review.answer(item, rv.GOOD)
                    clock.advance(minutes=2)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=learner, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with ProgressStore(path) as store:
        logs = store.review_log(pack=PACK, item=KEYS["quiz"])
        assert len(logs) == 1 + 3 * 15
        state = store.review_states(pack=PACK)[KEYS["quiz"]]
        assert state["n_logs"] == len(logs)
        assert state["card"] == rv.replay(logs)[0]  # the state folds in every writer's reviews


# -- grading code items goes through the sandbox ---------------------------------------------------

@pytest.fixture(scope="module")
def grader(pack):
    from alignlings.grading.grader import Grader

    g = Grader(pack, warm=True)
    yield g
    g.close()


def test_code_items_are_graded_in_the_sandbox(tmp_path, pack, grader):
    with ProgressStore(tmp_path / "a.sqlite3") as store:
        seed_history(store)
        review = rv.Review(store, pack, rv.FixedClock(T0 + timedelta(days=1)))
        miss = review.find(KEYS["misconception"])
        shown = rv.present(review, miss, "zh")
        assert isinstance(shown, rv.BlankPrompt) and shown.blank == 4 and "_____" in shown.source.splitlines()[11]
        assert "logsigmoid(margin).mean()" not in shown.source
        again = rv.check(review, miss, "-F.logsigmoid(margin).sum()", grader=grader, lang="en")
        assert not again["correct"] and again["repeated"] and again["misconception"] == "sum-not-mean"
        feedback = next(m for m in pack.get("dpo-loss").misconceptions if m.id == "sum-not-mean").feedback["en"]
        assert again["feedback"] == feedback
        right = rv.check(review, miss, "-torch.nn.functional.logsigmoid(margin).mean()", grader=grader)
        assert right["correct"] and not right["repeated"]
        cloze = review.find(KEYS["cloze"])
        shown = rv.present(review, cloze)
        answers = {m["key"]: tok for m, tok in zip(shown.masked, ["loss", "-", "F", "logsigmoid", "margin", "mean"])}
        assert rv.check(review, cloze, answers, grader=grader)["correct"]
        assert not rv.check(review, cloze, dict(answers, **{"12:33": "sum"}), grader=grader)["correct"]
        with pytest.raises(ValueError, match="answer"):
            rv.check(review, miss, 3, grader=grader)
        with pytest.raises(ValueError, match="grader"):
            rv.check(review, miss, "x")
        # a solved exercise is re-solved at its hardest blank
        solved = review.find(KEYS["exercise"])
        assert rv.present(review, solved).blank == 1


# -- the CLI through its runner --------------------------------------------------------------------

def _cli(args, input_text=""):
    from typer.testing import CliRunner

    from alignlings.cli.app import app

    return CliRunner().invoke(app, args, input=input_text)


@pytest.fixture
def quiz_history(monkeypatch):
    """Two quiz questions answered at T0 (so due two days later), the clock set to T0 + 3 days."""
    with ProgressStore() as store:
        store.import_({"format": "alignlings-progress", "version": 2, "quiz_answers": [
            {"uuid": _u(), "pack": PACK, "question_id": q, "choice": c, "correct": ok, "created_at": T0.isoformat()}
            for q, c, ok in (("bt-probability", 2, True), ("dpo-key-idea", 0, False))]})
    monkeypatch.setattr(rv, "CLOCK", rv.FixedClock(T0 + timedelta(days=3)))


def test_cli_review_asks_due_items_and_reschedules(quiz_history):
    pack = load_pack()
    answers = {q.id: q.answer for q in pack.get("concepts").quiz}
    letters = "ABCD"
    # a right answer is rated good; then x (refused), Enter keeps good; after the second, e: too easy
    out = _cli(["review", "--lang", "en"],
               f"{letters[answers['dpo-key-idea']]}\nx\n\n{letters[answers['bt-probability']]}\ne\n")
    assert out.exit_code == 0, out.output
    assert "2 due today (2 items in review)" in out.output
    assert out.output.index("key idea of DPO") < out.output.index("Bradley-Terry model")  # the lapse is due first
    assert out.output.splitlines().count("Right.") == 2
    assert out.output.count("How was it? h = it was hard, e = too easy, Enter = keep good") == 3
    assert "Please press h, e or Enter." in out.output
    assert "Rated good" in out.output and "Rated easy" in out.output
    with ProgressStore() as store:  # "too easy" re-rated the review just made: no review added
        for key, rating in (("quiz/dpo-key-idea", rv.GOOD), ("quiz/bt-probability", rv.EASY)):
            log = store.review_log(pack=PACK, item=key)
            assert [r["source"] for r in log] == ["quiz", "review"] and log[-1]["rating"] == rating
    assert "Reviewed 2: 2 right." in out.output and "0 due today" in out.output
    again = _cli(["review", "--lang", "en"])
    assert again.exit_code == 0 and "Nothing due today:" in again.output and "scheduled, the next on" in again.output


def test_cli_review_limit_wrong_answer_zh_and_home(quiz_history):
    out = _cli(["--lang", "zh"])
    assert "今天有 2 项待复习" in out.output and "alignlings review" in out.output
    pack = load_pack()
    q = next(q for q in pack.get("concepts").quiz if q.id == "dpo-key-idea")
    wrong = "ABCD"[(q.answer + 1) % len(q.options)]
    out = _cli(["review", "--limit", "1", "--lang", "zh"], f"Z\n{wrong}\n")
    assert out.exit_code == 0, out.output
    assert "本次复习其中 1 项" in out.output and "请用字母" in out.output
    assert "不对：正确答案是" not in out.output and "不对：应为 " + "ABCD"[q.answer] in out.output
    assert "评为 重来；1 天后" in out.output
    assert _cli(["review", "--limit", "0"]).exit_code == 2


def test_cli_review_with_no_history(monkeypatch):
    monkeypatch.setattr(rv, "CLOCK", rv.FixedClock(T0))
    out = _cli(["review", "--lang", "en"])
    assert out.exit_code == 0 and "Nothing to review yet" in out.output
    assert "review" not in _cli(["--lang", "en"]).output.split("Next:")[1]


# -- the web app in-process -----------------------------------------------------------------------

@pytest.fixture
def client(tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from alignlings.web.app import create_app

    monkeypatch.setattr(rv, "CLOCK", rv.FixedClock(T0 + timedelta(days=3)))
    store = ProgressStore(tmp_path / "web.sqlite3")
    seed_history(store)
    app = create_app(store=store, warm_up=False)
    with TestClient(app) as c:
        yield c
    store.close()


def test_web_queue_answer_and_mastery(client):
    page = client.get("/review?lang=zh")
    assert page.status_code == 200 and 'id="review-item"' in page.text and "复习" in page.text
    # the nav's count, on the home page too: the solved exercise (rated easy) is not due yet
    assert 'id="review-due">3<' in client.get("/").text
    data = client.get("/api/review/queue").json()
    assert {k: data["counts"][k] for k in ("due", "items")} == {"due": 3, "items": 4}
    # the solved exercise (Easy: 8 days) comes next, its date moved by the fuzz (a few days either way)
    assert timedelta(days=6) <= rv._utc(data["counts"]["next"]) - T0 <= timedelta(days=10)
    assert len(data["items"]) == 3
    assert all("answer" not in json.dumps(i) for i in data["items"])  # no answers are sent
    quiz = next(i for i in data["items"] if i["kind"] == "quiz")
    pack = load_pack()
    right = next(q.answer for q in pack.get("concepts").quiz if q.id == "bt-probability")
    res = client.post("/api/review/answer", json={"item": quiz["item"], "pack": PACK, "answer": right, "seconds": 4})
    assert res.status_code == 200 and res.json()["result"]["correct"] and res.json()["schedule"]["rating"] == "good"
    assert res.json()["counts"]["due"] == 2
    assert client.post("/api/review/answer", json={"item": "quiz/nope", "pack": PACK, "answer": 0}).status_code == 404
    assert client.post("/api/review/answer", json={"item": quiz["item"], "pack": PACK, "answer": 9}).status_code == 422
    assert client.get("/api/review/queue?limit=0").status_code == 422
    mastery = client.get("/api/review/mastery?lang=zh").json()["concepts"]
    started = [c for c in mastery if c["mastery"] is not None]
    assert started and [c["mastery"] for c in started] == sorted(c["mastery"] for c in started)
    assert mastery.index(started[-1]) < mastery.index(next(c for c in mastery if c["mastery"] is None))
    assert started[0]["practise"].startswith("/review?concept=") and "数值稳定性" in {c["title"] for c in mastery}
    concept = client.get("/api/review/queue?concept=loss-aggregation").json()["items"]
    assert [i["item"] for i in concept] == ["misconception/dpo-loss/sum-not-mean"]
    assert 'id="mastery"' in client.get("/progress").text


def test_web_rate_re_rates_the_right_answer_just_given(client):
    pack = load_pack()
    right = next(q.answer for q in pack.get("concepts").quiz if q.id == "bt-probability")
    quiz = KEYS["quiz"]
    # nothing answered yet in review: there is no answer to re-rate
    assert client.post("/api/review/rate", json={"item": quiz, "pack": PACK, "rating": "easy"}).status_code == 422
    good = client.post("/api/review/answer", json={"item": quiz, "pack": PACK, "answer": right}).json()["schedule"]
    easy = client.post("/api/review/rate", json={"item": quiz, "pack": PACK, "rating": "easy"})
    assert easy.status_code == 200 and easy.json()["recorded"] and easy.json()["schedule"]["rating"] == "easy"
    hard = client.post("/api/review/rate", json={"item": quiz, "pack": PACK, "rating": "hard"}).json()["schedule"]
    assert hard["interval_days"] < good["interval_days"] < easy.json()["schedule"]["interval_days"]
    back = client.post("/api/review/rate", json={"item": quiz, "pack": PACK, "rating": "good"}).json()["schedule"]
    assert back["due"] == good["due"]  # taking it back gives the schedule of the answer as rated
    # bad input: an unknown rating, an item not met, again (not a re-rating of a right answer)
    assert client.post("/api/review/rate", json={"item": quiz, "pack": PACK, "rating": "again"}).status_code == 422
    assert client.post("/api/review/rate", json={"item": "quiz/nope", "pack": PACK, "rating": "easy"}).status_code == 404
    # a wrong answer cannot be called easy; nor can an item answered before the one just reviewed
    q2 = KEYS["misconception"]
    assert client.post("/api/review/rate", json={"item": q2, "pack": PACK, "rating": "easy"}).status_code == 422
    wrong = (right + 1) % 3
    client.post("/api/review/answer", json={"item": quiz, "pack": PACK, "answer": wrong})
    refused = client.post("/api/review/rate", json={"item": quiz, "pack": PACK, "rating": "easy"})
    assert refused.status_code == 422 and "wrong" in refused.text


# -- "hard after a hint": the server knows which hints it served (issue 30 §1) --------------------

CLOZE_RIGHT = {"12:4": "loss", "12:11": "-", "12:12": "F", "12:14": "logsigmoid", "12:25": "margin", "12:33": "mean"}


def test_web_rates_hard_after_a_hint_it_served_whatever_the_client_says(client):
    items = {i["item"]: i for i in client.get("/api/review/queue").json()["items"]}
    cloze, quiz = items[KEYS["cloze"]], items[KEYS["quiz"]]
    assert cloze["has_hint"] and "hints" not in cloze and "hint" not in cloze  # served only on request
    assert not quiz["has_hint"]
    hint = client.post("/api/review/hint", json={"item": KEYS["cloze"], "pack": PACK})
    assert hint.status_code == 200 and hint.json()["hints"] == ["l", "-", "F", "l", "m", "m"]
    assert hint.json()["recorded"]
    # a client that says it took no hint is still rated Hard ...
    res = client.post("/api/review/answer", json={"item": KEYS["cloze"], "pack": PACK, "answer": CLOZE_RIGHT,
                                                  "hinted": False}).json()
    assert res["result"]["correct"] and res["schedule"]["rating"] == "hard"
    # ... one that says it took a hint it was never served is rated Good (a quiz item has none)
    assert client.post("/api/review/hint", json={"item": KEYS["quiz"], "pack": PACK}).status_code == 422
    right = next(q.answer for q in load_pack().get("concepts").quiz if q.id == "bt-probability")
    res = client.post("/api/review/answer", json={"item": KEYS["quiz"], "pack": PACK, "answer": right,
                                                  "hinted": True}).json()
    assert res["result"]["correct"] and res["schedule"]["rating"] == "good"
    assert client.post("/api/review/hint", json={"item": "cloze/nope/1", "pack": PACK}).status_code == 404


def test_a_hint_counts_for_the_review_it_was_served_in_only(tmp_path, pack):
    from alignlings.practice.session import Practice

    store = ProgressStore(tmp_path / "p.sqlite3")
    seed_history(store)
    grader = _WrongGrader()  # exact tokens: the sandbox is never asked
    grader.pack = pack
    practice = Practice(store, pack, grader, clock=rv.FixedClock(T0 + timedelta(days=3)))
    assert practice.review_hint(PACK, KEYS["cloze"]).hints[0] == "l"
    first = practice.review_answer(PACK, KEYS["cloze"], CLOZE_RIGHT)
    assert first.rating == "hard"
    # the next review of the same item, without a hint: Good (the hint was for the review before)
    later = Practice(store, pack, grader, clock=rv.FixedClock(rv._utc(first.schedule["due"]) + timedelta(hours=1)))
    assert later.review_answer(PACK, KEYS["cloze"], CLOZE_RIGHT).rating == "good"
    store.close()


def test_cli_rates_hard_after_a_hint_served_by_the_session(monkeypatch):
    t = T0.isoformat()
    with ProgressStore() as store:
        store.import_({"format": "alignlings-progress", "version": 2, "cloze": [
            {"uuid": _u(), "pack": PACK, "snippet": "dpo-loss", "key": k, "token": tok, "correct": True,
             "created_at": t} for k, tok in CLOZE_RIGHT.items()]})
    monkeypatch.setattr(rv, "CLOCK", rv.FixedClock(T0 + timedelta(days=3)))
    tokens = list(CLOZE_RIGHT.values())
    out = _cli(["review", "--lang", "en"], "?\n" + "\n".join(tokens) + "\n\n")
    assert out.exit_code == 0, out.output
    assert "Hint: starts with 'l'" in out.output and "Rated hard" in out.output
    with ProgressStore() as store:
        assert store.review_log(pack=PACK, item=KEYS["cloze"])[-1]["rating"] == rv.HARD


# -- the Review page in a real browser, keyboard only ----------------------------------------------

@pytest.mark.browser
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_review_page_keyboard_only(tmp_path, monkeypatch, lang):
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("needs /usr/bin/chromium")
    import socket

    import uvicorn
    from playwright.sync_api import sync_playwright

    from alignlings.web.app import create_app

    monkeypatch.setattr(rv, "CLOCK", rv.FixedClock(T0 + timedelta(days=3)))
    store = ProgressStore(tmp_path / "web.sqlite3")
    store.import_({"format": "alignlings-progress", "version": 2, "quiz_answers": [
        {"uuid": _u(), "pack": PACK, "question_id": q, "choice": 0, "correct": True, "created_at": T0.isoformat()}
        for q in ("bt-probability", "grpo-vs-ppo")]})
    app = create_app(store=store, warm_up=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    quiz = {q.id: q for q in load_pack().get("concepts").quiz}
    try:
        while not server.started:
            threading.Event().wait(0.05)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-sync"])
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/?lang={lang}")
            badge = page.locator("#review-due")
            assert badge.inner_text() == "2"
            # from the home page to the Review page with the keyboard alone
            for _ in range(12):
                page.keyboard.press("Tab")
                if page.evaluate("document.activeElement.id") == "nav-review":
                    break
            assert page.evaluate("document.activeElement.id") == "nav-review"
            page.keyboard.press("Enter")
            page.wait_for_selector("#review-item:not([hidden])")
            assert page.locator("#nav-review").get_attribute("aria-current") == "page"
            expected_label = "复习" if lang == "zh" else "Review"
            assert page.locator("h1").inner_text() == expected_label
            for n in range(2):
                heading = page.locator("#review-item .q-text").inner_text()
                q = next(q for q in quiz.values() if q.question[lang].split("$")[0][:12] in heading)
                wrong = n == 1
                letter = "abcd"[(q.answer + 1) % len(q.options) if wrong else q.answer]
                page.keyboard.press(letter)  # A-D answer a question
                page.wait_for_selector(".review-rated")
                result = page.locator(".review-result").inner_text()
                assert result == ({"en": "Not quite.", "zh": "不对。"} if wrong else {"en": "Right.", "zh": "答对了。"})[lang]
                rated = page.locator(".review-rated").inner_text()
                if wrong:
                    assert ("again" if lang == "en" else "重来") in rated
                assert page.evaluate("document.activeElement.id") == "review-next"
                page.keyboard.press("Enter")
            page.wait_for_selector("#review-done:not([hidden])")
            done = page.locator("#review-done").inner_text()
            assert ("1 right" if lang == "en" else "答对 1 项") in done
            assert page.evaluate("document.activeElement.id") == "review-done"
            # the lapse comes back tomorrow: nothing is left for today
            counts = page.locator("#review-counts").inner_text()
            assert counts.startswith("Nothing due today:" if lang == "en" else "今天没有要复习的内容："), counts
            assert "scheduled, the next on" in counts if lang == "en" else "已安排" in counts, counts
            shots = Path("test-artifacts/screenshots")
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shots / f"review-{lang}.png"), full_page=True)
            # the progress page draws the mastery chart, weakest first, with links to practise
            page.goto(f"http://127.0.0.1:{port}/progress?lang={lang}")
            page.wait_for_selector("#mastery-list li")
            first = page.locator("#mastery-list li").first
            assert first.locator("a").get_attribute("href").startswith("/review?concept=")
            page.screenshot(path=str(shots / f"progress-mastery-{lang}.png"), full_page=True)
            browser.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        store.close()


# -- review never hands out what would solve an exercise (issue 19 §2) ------------------------------

class _WrongGrader:
    """Every code answer is wrong (no sandbox needed to judge what the learner is shown)."""

    def check(self, key, code=None, *, fills=None, **kw):
        if code is not None:  # a bug drill's whole file
            return {"exercise": key, "passed": False, "blanks": [], "cases": [], "error": None,
                    "bug": {"changes": "no lines changed", "diff": "", "failing": ["spec"]}}
        return {"exercise": key, "passed": False, "cases": [], "error": None,
                "blanks": [{"index": i, "passed": False, "message": "not yet"} for i in range(1, len(fills) + 1)]}


def test_review_serves_only_met_items_and_withholds_the_answer_of_an_unsolved_exercise(tmp_path, pack, monkeypatch):
    from alignlings.practice.session import Practice, UsageError

    monkeypatch.setattr(rv, "CLOCK", rv.FixedClock(T0 + timedelta(days=3)))
    store = ProgressStore(tmp_path / "p.sqlite3")
    seed_history(store)
    bug = pack.get("scale-rewards-batch")
    store.import_({"format": "alignlings-progress", "version": 2, "attempts": [
        {"uuid": _u(), "pack": bug.pack, "exercise": bug.id, "passed": True, "created_at": T0.isoformat(),
         "code": "", "verdict": {"passed": True, "blanks": [], "cases": []}, "source": "cli"}]})
    practice = Practice(store, pack, _WrongGrader())
    # a catalog item the learner never met is neither served nor accepted
    assert "quiz/grpo-vs-ppo" not in {p.shown.item for p in practice.review_queue().items}
    with pytest.raises(UsageError, match="not an item you have met"):
        practice.review_answer(PACK, "quiz/grpo-vs-ppo", 0)
    # dpo-loss is neither solved nor revealed: a wrong answer to its misconception does not give the fill
    miss = practice.review_answer(PACK, KEYS["misconception"], "x", seconds=3)
    assert miss.rating == "again" and miss.result["expected"] is None and miss.result["withheld"]
    # grpo-advantages is solved: its reference fill is shown; reset it, and it is not any more
    solved = practice.review_answer(PACK, KEYS["exercise"], "x")
    assert solved.result["expected"] and not solved.result.get("withheld")
    store.reset("grpo-advantages", pack=PACK)
    assert practice.review_answer(PACK, KEYS["exercise"], "x").result["expected"] is None
    # a bug drill fixed once, then reset: a wrong answer does not show the fix's diff ...
    store.reset(bug.id, pack=bug.pack)
    assert practice.review_answer(bug.pack, f"bug/{bug.id}", bug.buggy_source).result["expected"] is None
    # ... until the solution was seen (and the teacher's view says so)
    practice.reveal(bug)
    practice.reveal(pack.get("dpo-loss"))
    assert "@@" in practice.review_answer(bug.pack, f"bug/{bug.id}", bug.buggy_source).result["expected"]
    assert practice.review_answer(PACK, KEYS["misconception"], "x").result["expected"]
    assert store.summary(PACK)["dpo-loss"]["revealed"]
    store.close()


def test_web_review_refuses_an_item_not_met(client):
    # in the catalog (a quiz question of the pack) but never answered: 404, not graded, not scheduled
    r = client.post("/api/review/answer", json={"item": "quiz/grpo-vs-ppo", "pack": PACK, "answer": 0})
    assert r.status_code == 404 and "not an item you have met" in r.json()["detail"]
    assert "quiz/grpo-vs-ppo" not in json.dumps(client.get("/api/review/queue").json())
