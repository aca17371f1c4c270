"""The progress store: history, summaries, resets, migrations, export/import, concurrent writers.

Every test works in tmp_path; ALIGNLINGS_HOME is pointed there too, so the real user data folder
is never touched.
"""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import threading
from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alignlings.practice import store as P
from alignlings.practice.store import ProgressStore


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))


@pytest.fixture
def store(tmp_path):
    s = ProgressStore(tmp_path / "p.sqlite3")
    yield s
    s.close()


def verdict(passed: bool, **extra) -> dict:
    return {"exercise": "dpo-loss", "passed": passed, "blanks": [], "cases": [], "error": None, **extra}


# -- where the database lives ------------------------------------------------------------------

def test_default_path_follows_alignlings_home(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "elsewhere"))
    assert P.default_db_path() == tmp_path / "elsewhere" / "progress.sqlite3"
    s = ProgressStore()  # creates the folder
    try:
        assert s.path == tmp_path / "elsewhere" / "progress.sqlite3"
        assert s.path.is_file()
    finally:
        s.close()


def test_default_path_without_home_is_the_platform_data_dir(monkeypatch, tmp_path):
    import platformdirs

    monkeypatch.delenv("ALIGNLINGS_HOME", raising=False)
    monkeypatch.setattr(platformdirs, "user_data_dir", lambda app, appauthor=None: str(tmp_path / "data" / app))
    assert P.default_db_path() == tmp_path / "data" / "alignlings" / "progress.sqlite3"


def test_wal_mode_and_schema_version(store):
    db = sqlite3.connect(store.path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA user_version").fetchone()[0] == P.SCHEMA_VERSION == len(P.schema.MIGRATIONS)
    db.close()


# -- attempts, hints, solutions ------------------------------------------------------------------

def test_attempts_oldest_first_with_verdicts(store):
    a = store.record_attempt("dpo-loss", verdict(False, note="第一次"), code="x = 1\n")
    b = store.record_attempt("dpo-loss", verdict(True), code="x = 2\n", source="web")
    store.record_attempt("grpo-loss", verdict(True), code="y\n")
    rows = store.attempts("dpo-loss")
    assert [r["id"] for r in rows] == [a, b]
    assert [r["passed"] for r in rows] == [False, True]
    assert rows[0]["verdict"]["note"] == "第一次" and rows[0]["code"] == "x = 1\n"
    assert [r["source"] for r in rows] == ["cli", "web"]
    for r in rows:
        t = datetime.fromisoformat(r["created_at"])
        assert t.utcoffset().total_seconds() == 0  # UTC
        assert abs((datetime.now(timezone.utc) - t).total_seconds()) < 60
    assert rows[0]["created_at"] < rows[1]["created_at"]
    assert store.attempts("nothing") == []


def test_hints_count_up(store):
    assert store.hints_taken("dpo-loss") == 0
    assert [store.record_hint("dpo-loss") for _ in range(3)] == [1, 2, 3]
    assert store.hints_taken("dpo-loss") == 3
    assert store.hints_taken("grpo-loss") == 0


def test_summary(store):
    store.record_attempt("dpo-loss", verdict(False), code="a")
    store.record_hint("dpo-loss")
    store.record_attempt("dpo-loss", verdict(True), code="b")
    store.record_attempt("dpo-loss", verdict(False), code="c")  # a later failing attempt does not unsolve it
    store.record_solution_revealed("grpo-loss")
    s = store.summary()
    d = s["dpo-loss"]
    assert d["solved"] is True and d["attempts"] == 3 and d["hints"] == 1 and d["revealed"] is False
    rows = store.attempts("dpo-loss")
    assert d["solved_at"] == rows[1]["created_at"] and d["last_attempt_at"] == rows[2]["created_at"]
    g = s["grpo-loss"]
    assert g == {"solved": False, "attempts": 0, "hints": 0, "revealed": True, "solved_at": None,
                 "last_attempt_at": None}


def test_reset_restarts_the_summary_but_keeps_history(store):
    store.record_attempt("dpo-loss", verdict(True), code="a")
    store.record_hint("dpo-loss")
    store.record_solution_revealed("dpo-loss")
    store.record_attempt("grpo-loss", verdict(True), code="g")
    store.reset("dpo-loss")
    s = store.summary()
    assert s["dpo-loss"] == {"solved": False, "attempts": 0, "hints": 0, "revealed": False, "solved_at": None,
                             "last_attempt_at": None}
    assert s["grpo-loss"]["solved"] is True  # other exercises untouched
    assert store.hints_taken("dpo-loss") == 0
    assert store.record_hint("dpo-loss") == 1
    store.record_attempt("dpo-loss", verdict(False), code="b")
    rows = store.attempts("dpo-loss")
    assert [r["code"] for r in rows] == ["a", "b"]  # history is never deleted
    assert [r["before_reset"] for r in rows] == [True, False]
    assert rows[0]["reset_at"] is not None and rows[0]["created_at"] < rows[0]["reset_at"] < rows[1]["created_at"]
    assert store.summary()["dpo-loss"]["attempts"] == 1
    assert store.attempts("grpo-loss")[0]["before_reset"] is False


def test_timestamps_strictly_increase():
    stamps = [P.utcnow() for _ in range(1000)]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)


# -- quiz, cloze, settings -------------------------------------------------------------------

def test_quiz_answers_keep_the_last(store):
    store.record_quiz_answer("bt-probability", 1, False)
    store.record_quiz_answer("bt-probability", 2, True)
    store.record_quiz_answer("kl-direction", 0, True)
    q = store.quiz_answers()
    assert q["bt-probability"]["choice"] == 2 and q["bt-probability"]["correct"] is True
    assert q["bt-probability"]["attempts"] == 2 and q["kl-direction"]["attempts"] == 1
    datetime.fromisoformat(q["kl-direction"]["answered_at"])


def test_cloze_stats_and_due_weights(store):
    store.record_cloze("dpo-loss", [{"key": "8:43", "token": "-", "correct": False},
                                    {"key": "12:33", "token": "mean", "correct": True}])
    store.record_cloze("dpo-loss", [{"key": "8:43", "token": "-", "correct": False}])
    store.record_cloze("grpo-loss", [{"key": "1:1", "token": "x", "correct": True}])
    s = store.cloze_stats("dpo-loss")
    assert set(s) == {"8:43", "12:33"}
    assert (s["8:43"]["seen"], s["8:43"]["wrong"], s["8:43"]["streak"]) == (2, 2, 0)
    assert (s["12:33"]["seen"], s["12:33"]["wrong"], s["12:33"]["streak"]) == (1, 0, 1)
    assert s["8:43"]["due"] == pytest.approx(4.0)  # always wrong: 1 + 3 * 2/2
    assert s["12:33"]["due"] < 1.0  # known: comes back less often than an unseen position
    # right answers in a row bring a hard position back down
    for _ in range(3):
        store.record_cloze("dpo-loss", [{"key": "8:43", "token": "-", "correct": True}])
    s = store.cloze_stats("dpo-loss")["8:43"]
    assert (s["seen"], s["wrong"], s["streak"]) == (5, 2, 3)
    assert s["due"] == pytest.approx((1 + 3 * 2 / 5) * 0.5 ** 3)
    with pytest.raises(ValueError, match=r"results\[0\]"):
        store.record_cloze("dpo-loss", [{"key": "1:1"}])


def test_due_weight_bounds():
    assert P.sqlite.cloze_due(0, 0, 0) == 1.0
    assert P.sqlite.cloze_due(10, 10, 0) == pytest.approx(4.0)
    assert P.sqlite.cloze_due(10, 0, 10) == pytest.approx(0.2)  # floor: mastered positions still come back


def test_first_run_and_settings(store):
    assert store.is_first_run()
    store.mark_welcomed()
    assert not store.is_first_run()
    store.mark_welcomed()  # idempotent
    assert store.get_setting("lang") is None and store.get_setting("lang", "en") == "en"
    store.set_setting("lang", "zh")
    store.set_setting("lang", "en")
    store.set_setting("ui", {"theme": "暗色", "ratio": 0.2})
    assert store.get_setting("lang") == "en" and store.get_setting("ui") == {"theme": "暗色", "ratio": 0.2}
    with pytest.raises(ValueError, match="setting 'bad'"):
        store.set_setting("bad", object())


def test_data_survives_a_restart(tmp_path):
    path = tmp_path / "sub" / "dir" / "p.sqlite3"
    with ProgressStore(path) as s:
        s.record_attempt("dpo-loss", verdict(True), code="a")
        s.mark_welcomed()
    with ProgressStore(path) as s:
        assert s.summary()["dpo-loss"]["solved"] and not s.is_first_run()


def test_threads_share_a_store_and_their_connections_end_with_them(store):
    import gc

    def work(i):
        store.record_attempt("dpo-loss", verdict(True), code=str(i), source="web")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    del t, threads
    gc.collect()
    assert len(store.attempts("dpo-loss")) == 8
    assert len(store._all) == 1  # only this thread's connection is left open


def test_closed_store_refuses(store):
    store.close()
    with pytest.raises(RuntimeError, match="closed"):
        store.summary()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(code=st.text(alphabet=st.characters(blacklist_categories=("Cs",))),
       message=st.text(alphabet=st.characters(blacklist_categories=("Cs",))))
def test_any_text_round_trips(tmp_path, code, message):
    with ProgressStore(tmp_path / "text.sqlite3") as s:
        s.record_attempt("ex", verdict(False, message=message), code=code)
        last = s.attempts("ex")[-1]
        assert last["code"] == code and last["verdict"]["message"] == message


# -- migrations ----------------------------------------------------------------------------------

def test_a_v1_database_is_migrated(tmp_path):
    path = tmp_path / "old.sqlite3"
    db = P.connect(path)
    assert P.migrate(db, target=1) == 1
    db.execute("INSERT INTO attempts (uuid, exercise, passed, created_at, code, verdict) VALUES (?, ?, ?, ?, ?, ?)",
               ("9b2f3c2e-0000-4000-8000-000000000001", "dpo-loss", 1, "2024-05-01T10:00:00.000000+00:00",
                "old code", json.dumps({"passed": True})))
    db.execute("INSERT INTO events (uuid, exercise, kind, created_at) VALUES (?, ?, ?, ?)",
               ("9b2f3c2e-0000-4000-8000-000000000002", "dpo-loss", "hint", "2024-05-01T09:00:00.000000+00:00"))
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    assert "source" not in [r[1] for r in db.execute("PRAGMA table_info(attempts)")]
    db.close()

    with ProgressStore(path) as s:
        assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == P.SCHEMA_VERSION
        (row,) = s.attempts("dpo-loss")
        assert row["code"] == "old code" and row["source"] == "cli" and row["passed"]
        assert s.hints_taken("dpo-loss") == 1
        s.record_cloze("dpo-loss", [{"key": "8:43", "token": "-", "correct": True}])  # a v2 table
        assert s.cloze_stats("dpo-loss")["8:43"]["seen"] == 1


def test_a_newer_database_is_refused(tmp_path):
    path = tmp_path / "future.sqlite3"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {P.SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(RuntimeError, match="newer"):
        ProgressStore(path)


# -- export / import -----------------------------------------------------------------------------

def _fill(s: ProgressStore) -> None:
    s.record_attempt("dpo-loss", verdict(False, message="边界情况失败"), code="loss = _____\n")
    s.record_attempt("dpo-loss", verdict(True), code="loss = -F.logsigmoid(m).mean()\n", source="web")
    s.record_hint("dpo-loss")
    s.record_hint("grpo-loss")
    s.record_solution_revealed("grpo-loss")
    s.reset("grpo-loss")
    s.record_quiz_answer("bt-probability", 2, True)
    s.record_cloze("dpo-loss", [{"key": "8:43", "token": "-", "correct": False}])
    s.set_setting("lang", "zh")
    s.mark_welcomed()


def test_export_import_round_trip(tmp_path):
    with ProgressStore(tmp_path / "a.sqlite3") as a, ProgressStore(tmp_path / "b.sqlite3") as b:
        _fill(a)
        data = json.loads(json.dumps(a.export(), ensure_ascii=False))  # through a file: JSON-able
        assert data["format"] == "alignlings-progress" and data["version"] == 3
        counts = b.import_(data)
        assert counts == {"attempts": 2, "events": 4, "quiz_answers": 1, "cloze": 1, "settings": 2, "review_log": 0}
        assert b.summary() == a.summary()
        assert b.quiz_answers() == a.quiz_answers()
        assert b.cloze_stats("dpo-loss") == a.cloze_stats("dpo-loss")
        assert [r["uuid"] for r in b.attempts("dpo-loss")] == [r["uuid"] for r in a.attempts("dpo-loss")]
        assert b.attempts("dpo-loss")[0]["verdict"]["message"] == "边界情况失败"
        assert b.get_setting("lang") == "zh" and not b.is_first_run()
        # idempotent, both ways
        assert set(b.import_(data).values()) == {0}
        assert set(a.import_(b.export()).values()) == {0}
        assert b.export()["attempts"] == data["attempts"]


def test_import_merges_two_machines(tmp_path):
    with ProgressStore(tmp_path / "a.sqlite3") as a, ProgressStore(tmp_path / "b.sqlite3") as b:
        a.record_attempt("dpo-loss", verdict(False), code="a1")
        b.record_attempt("dpo-loss", verdict(True), code="b1")
        a.record_attempt("dpo-loss", verdict(False), code="a2")
        a.import_(b.export())
        assert [r["code"] for r in a.attempts("dpo-loss")] == ["a1", "b1", "a2"]  # by time
        assert a.summary()["dpo-loss"]["solved"] and a.summary()["dpo-loss"]["attempts"] == 3


def test_import_settings_newest_wins(tmp_path):
    with ProgressStore(tmp_path / "a.sqlite3") as a, ProgressStore(tmp_path / "b.sqlite3") as b:
        b.set_setting("lang", "zh")
        a.set_setting("lang", "en")  # later
        a.import_(b.export())
        assert a.get_setting("lang") == "en"
        b.import_(a.export())
        assert b.get_setting("lang") == "en"


def _valid_export() -> dict:
    return {"format": "alignlings-progress", "version": 1, "attempts": [
        {"uuid": "9b2f3c2e-0000-4000-8000-000000000001", "exercise": "dpo-loss", "passed": True,
         "created_at": "2024-05-01T10:00:00Z", "code": "x", "verdict": {"passed": True}}]}


@pytest.mark.parametrize("change, field", [
    (lambda d: d.update(format="something-else"), "format"),
    (lambda d: d.update(version=99), "version"),
    (lambda d: d.update(version="1"), "version"),
    (lambda d: d.update(attempts={}), "attempts"),
    (lambda d: d["attempts"].append("nope"), r"attempts\[1\]"),
    (lambda d: d["attempts"][0].update(uuid="not-a-uuid"), r"attempts\[0\]\.uuid"),
    (lambda d: d["attempts"][0].pop("code"), r"attempts\[0\]\.code"),
    (lambda d: d["attempts"][0].update(passed="yes"), r"attempts\[0\]\.passed"),
    (lambda d: d["attempts"][0].update(created_at="yesterday"), r"attempts\[0\]\.created_at"),
    (lambda d: d["attempts"][0].update(verdict="passed"), r"attempts\[0\]\.verdict"),
    (lambda d: d.update(events=[{"uuid": "9b2f3c2e-0000-4000-8000-000000000003", "exercise": "x", "kind": "party",
                                 "created_at": "2024-05-01T10:00:00Z"}]), r"events\[0\]\.kind"),
    (lambda d: d.update(quiz_answers=[{"uuid": "9b2f3c2e-0000-4000-8000-000000000004", "question_id": "q",
                                       "choice": True, "correct": True, "created_at": "2024-05-01T10:00:00Z"}]),
     r"quiz_answers\[0\]\.choice"),
    (lambda d: d.update(settings=[]), "settings"),
])
def test_import_rejects_bad_data_naming_the_field(store, change, field):
    data = _valid_export()
    change(data)
    with pytest.raises(ValueError, match=field):
        store.import_(data)
    assert store.attempts("dpo-loss") == []  # nothing half-imported


def test_import_rejects_non_objects(store):
    with pytest.raises(ValueError, match="expected a JSON object"):
        store.import_([])


def test_import_normalises_timestamps_to_utc(store):
    data = _valid_export()
    data["attempts"][0]["created_at"] = "2024-05-01T18:00:00+08:00"
    store.import_(data)
    assert store.attempts("dpo-loss")[0]["created_at"] == "2024-05-01T10:00:00.000000+00:00"


# -- concurrent writers --------------------------------------------------------------------------

N_THREADS, N_EACH = 3, 20


def _writer(path: str, tag: str, out) -> None:
    """A process writing from several threads at once (like a web server), next to the CLI."""
    store = ProgressStore(path)
    hints: list[int] = []

    def work(t):
        for i in range(N_EACH):
            store.record_attempt("dpo-loss", verdict(i % 2 == 0), code=f"{tag}-{t}-{i}", source=tag)
            hints.append(store.record_hint("dpo-loss"))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(N_THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    store.close()
    if out is not None:
        out.put(hints)


def test_two_processes_and_threads_lose_nothing(tmp_path):
    path = str(tmp_path / "shared.sqlite3")
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, f"proc{p}", queue)) for p in range(2)]
    for p in procs:  # the processes open a brand-new database at the same time: migrations race too
        p.start()
    local: list[int] = []
    box = _Box()
    _writer(path, "main", box)
    local = box.items
    hints = [*local]
    for _ in procs:
        hints += queue.get(timeout=120)
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    with ProgressStore(path) as s:
        rows = s.attempts("dpo-loss")
        total = 3 * N_THREADS * N_EACH
        assert len(rows) == total
        assert {r["code"] for r in rows} == {f"{tag}-{t}-{i}" for tag in ("main", "proc0", "proc1")
                                             for t in range(N_THREADS) for i in range(N_EACH)}
        assert len({r["uuid"] for r in rows}) == total
        assert s.hints_taken("dpo-loss") == total
        assert s.summary()["dpo-loss"]["attempts"] == total
    assert sorted(hints) == list(range(1, total + 1))  # each hint counted exactly once, no two alike


class _Box:
    def __init__(self):
        self.items: list[int] = []

    def put(self, items):
        self.items = items


# -- packs -----------------------------------------------------------------------------------------

def test_a_v2_database_keeps_its_rows_as_the_builtin_packs(tmp_path):
    path = tmp_path / "v2.sqlite3"
    db = P.connect(path)
    assert P.migrate(db, target=2) == 2
    db.execute("INSERT INTO attempts (uuid, exercise, passed, created_at, code, verdict, source) "
               "VALUES (?, ?, ?, ?, ?, ?, ?)", ("9b2f3c2e-0000-4000-8000-000000000011", "dpo-loss", 1,
                                              "2024-05-01T10:00:00.000000+00:00", "c", json.dumps({"passed": True}), "web"))
    db.execute("INSERT INTO quiz_answers (uuid, question_id, choice, correct, created_at) VALUES (?, ?, ?, ?, ?)",
               ("9b2f3c2e-0000-4000-8000-000000000012", "bt-probability", 2, 1, "2024-05-01T10:00:01.000000+00:00"))
    db.close()
    with ProgressStore(path) as s:
        assert s.summary("dpo-grpo")["dpo-loss"]["solved"] and s.summary()["dpo-loss"]["attempts"] == 1
        assert s.summary("ipo-course") == {}
        assert s.quiz_answers()["bt-probability"]["correct"] and s.quiz_answers(pack="ipo-course") == {}
        assert s.packs() == ["dpo-grpo"]


def test_two_packs_with_one_exercise_id_stay_apart(store):
    store.record_attempt("dpo-loss", verdict(True), code="a")
    store.record_attempt("dpo-loss", verdict(False), code="b", pack="ipo-course")
    store.record_hint("dpo-loss", pack="ipo-course")
    store.reset("dpo-loss")  # the built-in one only
    assert store.summary()["dpo-loss"] == {**store.summary()["dpo-loss"], "solved": False, "attempts": 0}
    theirs = store.summary("ipo-course")["dpo-loss"]
    assert theirs["attempts"] == 1 and theirs["hints"] == 1 and not theirs["solved"]
    assert [a["code"] for a in store.attempts("dpo-loss", pack="ipo-course")] == ["b"]
    assert store.hints_taken("dpo-loss") == 0 and store.packs() == ["dpo-grpo", "ipo-course"]
    with pytest.raises(ValueError, match="pack"):
        store.record_hint("dpo-loss", pack="")


def test_hints_never_count_past_the_available_ones(store):
    assert [store.record_hint("dpo-loss", available=3) for _ in range(5)] == [1, 2, 3, 3, 3]
    assert store.summary()["dpo-loss"]["hints"] == 3
    with pytest.raises(ValueError, match="available"):
        store.record_hint("dpo-loss", available=-1)


def test_export_carries_the_pack_and_a_version_1_file_imports_as_builtin(tmp_path):
    with ProgressStore(tmp_path / "a.sqlite3") as a, ProgressStore(tmp_path / "b.sqlite3") as b:
        a.record_attempt("dpo-loss", verdict(True), code="x", pack="ipo-course")
        data = a.export()
        assert data["version"] == 3 and data["attempts"][0]["pack"] == "ipo-course"
        b.import_(data)
        assert b.summary("ipo-course")["dpo-loss"]["solved"] and "dpo-loss" not in b.summary()
        old = {"format": "alignlings-progress", "version": 1, "attempts": [
            {k: v for k, v in data["attempts"][0].items() if k != "pack"}
            | {"uuid": "9b2f3c2e-0000-4000-8000-000000000021"}]}
        assert b.import_(old)["attempts"] == 1
        assert b.summary()["dpo-loss"]["solved"]


def test_migration_6_moves_the_web_hint_counters_and_round_keys_losing_nothing(tmp_path):
    """The web app kept per-blank hints in ``web.blank_hints_taken:ID`` (no hint event, blind to
    resets) and the quiz round in ``web.quiz_round_started:ID``; the CLI in ``blank_hints/PACK/ID/N``
    with a hint event each. After migration 6 both interfaces read one form and every hint counts."""
    path = tmp_path / "p.sqlite3"
    db = P.connect(path)
    P.migrate(db, target=5)  # a store as the previous release left it

    def event(learner, pack, exercise, kind, at):
        db.execute("INSERT INTO events (uuid, learner, pack, exercise, kind, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                   (f"{learner}-{exercise}-{kind}-{at}", learner, pack, exercise, kind, at))

    def setting(learner, key, value, at):
        db.execute("INSERT INTO settings (learner, key, value, updated_at) VALUES (?, ?, ?, ?)",
                   (learner, key, json.dumps(value), at))

    t = [f"2026-01-0{i}T00:00:00.000000+00:00" for i in range(1, 8)]
    event("", "dpo-grpo", "dpo-loss", "hint", t[0])  # the CLI: one hint of the exercise's own ...
    event("", "dpo-grpo", "dpo-loss", "hint", t[1])  # ... and one about blank 2
    setting("", "blank_hints/dpo-grpo/dpo-loss/2", {"taken": 1, "reset_at": ""}, t[1])
    setting("", "web.blank_hints_taken:dpo-loss", {"1": 2, "2": 1}, t[2])  # the web: 3 blank hints, no events
    setting("", "web.blank_hints_taken:my-pack/ipo-loss", {"1": 1}, t[2])
    setting("", "web.quiz_round_started:concepts", t[3], t[3])
    setting("", "welcomed_at", t[0], t[0])
    # a classroom learner whose web blank hint came before a reset of the exercise
    setting("L1", "web.blank_hints_taken:grpo-loss", {"1": 1}, t[4])
    event("L1", "dpo-grpo", "grpo-loss", "reset", t[5])
    db.close()

    store = ProgressStore(path)
    settings = {k: v["value"] for k, v in store.export()["settings"].items()}
    assert not [k for k in settings if k.startswith("web.")]
    assert settings["blank_hints/dpo-grpo/dpo-loss/1"] == {"taken": 2, "reset_at": ""}
    assert settings["blank_hints/dpo-grpo/dpo-loss/2"] == {"taken": 2, "reset_at": ""}  # CLI 1 + web 1
    assert settings["hints/dpo-grpo/dpo-loss"] == {"taken": 1, "reset_at": ""}
    assert settings["blank_hints/my-pack/ipo-loss/1"] == {"taken": 1, "reset_at": ""}
    assert settings["quiz_round/dpo-grpo/concepts"] == t[3] and settings["welcomed_at"] == t[0]
    assert store.summary()["dpo-loss"]["hints"] == 5  # the web's blank hints count now
    assert store.summary("my-pack")["ipo-loss"]["hints"] == 1
    learner = store.for_learner("L1")
    assert learner.summary()["grpo-loss"]["hints"] == 0  # taken before the reset: history, not the count
    assert [e["kind"] for e in learner.export()["events"]] == ["hint", "reset"]
    assert learner.get_setting("blank_hints/dpo-grpo/grpo-loss/1") is None
    # each progression goes on from where it was, through the one method both interfaces use
    assert store.take_hint("dpo-loss", key="blank_hints/dpo-grpo/dpo-loss/1", limit=3) == 3
    assert store.take_hint("dpo-loss", key="hints/dpo-grpo/dpo-loss", limit=4) == 2
    assert store.summary()["dpo-loss"]["hints"] == 7
    store.close()


def test_take_hint_counts_one_event_per_hint_up_to_the_limit_and_restarts_after_a_reset(store):
    key = "blank_hints/dpo-grpo/dpo-loss/1"
    assert [store.take_hint("dpo-loss", key=key, limit=2) for _ in range(3)] == [1, 2, 2]
    assert store.hint_progress("dpo-loss", key=key) == 2 and store.hints_taken("dpo-loss") == 2
    store.reset("dpo-loss")
    assert store.hint_progress("dpo-loss", key=key) == 0
    assert store.take_hint("dpo-loss", key=key, limit=2) == 1 and store.summary()["dpo-loss"]["hints"] == 1
    with pytest.raises(ValueError, match="limit"):
        store.take_hint("dpo-loss", key=key, limit=-1)


def test_the_postgresql_adapter_numbers_only_the_placeholders_outside_literals():
    """``?`` becomes ``$1, $2, ...`` (PostgreSQL's own placeholders); a ``?``, ``%`` or ``$`` in a string
    literal, a quoted identifier or a comment stays as it is; SQL the store never writes is refused."""
    from alignlings.practice.store.postgres import placeholders

    assert placeholders("SELECT * FROM t WHERE a = ? AND b = ?") == "SELECT * FROM t WHERE a = $1 AND b = $2"
    assert placeholders("SELECT 'it''s ? %s $1', ? FROM t") == "SELECT 'it''s ? %s $1', $1 FROM t"
    assert placeholders('SELECT "odd?col" FROM t WHERE x = ?') == 'SELECT "odd?col" FROM t WHERE x = $1'
    assert placeholders("SELECT ? -- why?\n, /* ? */ ?") == "SELECT $1 -- why?\n, /* ? */ $2"
    assert placeholders("SELECT 100 % 7, ?") == "SELECT 100 % 7, $1"
    for bad in ("SELECT 'open ?", 'SELECT "open', "SELECT /* open ?", "SELECT $1"):
        with pytest.raises(ValueError, match="sql: expected the store's portable SQL"):
            placeholders(bad)
