"""Predict items (issue 21 §5) end to end: predict.toml's loader, the variant runner (separate process,
cache, time limit, crashes), the session's rules (the prediction is recorded before anything is run
or shown; a store failure hides nothing), spaced review, ``dev check``, the CLI and the web app.

A toy pack in tmp_path keeps the runs fast (its variant is plain Python); one test proves the two
built-in predict items with their real torch variants."""

from __future__ import annotations

import json
import re
import sqlite3
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from alignlings.content import predictions as pr
from alignlings.content.pack import PackError, load_pack
from alignlings.practice.store import ProgressStore
from alignlings.practice.session import Practice, UsageError

VARIANT = '''
def run_toy():
    xs = [0.1 * i for i in range(10)]
    return {"values": {"slow": 0.25, "fast": 0.75}, "series": {"slow": [x * 0.25 for x in xs], "fast": [x * 0.75 for x in xs]}}


def supports_toy(result):
    v = result["values"]
    return 1 if v["fast"] > 2 * v["slow"] else 0
'''

PREDICT = '''
[[question]]
id = "toy-speed"
concepts = ["toy-tag"]
answer = 1
run = "run_toy"
supports = "supports_toy"
question.en = "Which grows faster?"
question.zh = "哪个增长得更快？"
result.en = "slow ends at {slow:.2f}, fast at {fast:.2f}."
result.zh = "slow 最终为 {slow:.2f}，fast 为 {fast:.2f}。"
explanation.en = "Because fast has the larger slope."
explanation.zh = "因为 fast 的斜率更大。"

[[question.option]]
text.en = "slow"
text.zh = "slow"
why.en = "Its slope is 0.25."
why.zh = "它的斜率是 0.25。"

[[question.option]]
text.en = "fast"
text.zh = "fast"
why.en = "Right: slope 0.75."
why.zh = "正确：斜率 0.75。"

[[question.option]]
text.en = "the same"
text.zh = "一样"
why.en = "The slopes differ."
why.zh = "斜率不同。"

[question.chart]
x.en = "step"
x.zh = "步数"
y.en = "value"
y.zh = "取值"
[question.chart.series.slow]
en = "slow line"
zh = "慢的那条"
[question.chart.series.fast]
en = "fast line"
zh = "快的那条"
'''


def make_pack(root: Path, *, variant: str = VARIANT, predict: str = PREDICT) -> Path:
    """A pack with one predict item (``predict-toy``) before one quiz."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pack.toml").write_text(textwrap.dedent('''
        [pack]
        id = "toy"
        title = { en = "Toy", zh = "玩具" }
        order = ["predict-toy", "toy-quiz"]
    '''), encoding="utf-8")
    (root / "texts").mkdir(exist_ok=True)
    (root / "texts" / "en.toml").write_text('[concepts]\ntoy-tag = "Toy tag"\n', encoding="utf-8")
    (root / "texts" / "zh.toml").write_text('[concepts]\ntoy-tag = "玩具标签"\n', encoding="utf-8")
    ex = root / "predict-toy"
    (ex / "texts").mkdir(parents=True, exist_ok=True)
    (ex / "exercise.toml").write_text('id = "predict-toy"\nkind = "predict"\ntitle = { en = "Predict: toy", '
                                      'zh = "预测：玩具" }\n', encoding="utf-8")
    (ex / "texts" / "en.toml").write_text('statement = "Two lines with different slopes."\n', encoding="utf-8")
    (ex / "texts" / "zh.toml").write_text('statement = "两条斜率不同的直线。"\n', encoding="utf-8")
    (ex / "predict.toml").write_text(predict, encoding="utf-8")
    (ex / "variant.py").write_text(variant, encoding="utf-8")
    quiz = root / "toy-quiz"
    (quiz / "texts").mkdir(parents=True, exist_ok=True)
    (quiz / "exercise.toml").write_text('id = "toy-quiz"\nkind = "quiz"\ntitle = "Quiz"\n', encoding="utf-8")
    for lang in ("en", "zh"):
        (quiz / "texts" / f"{lang}.toml").write_text('statement = "Q"\nhints = ["a", "b", "c"]\nexplanation = "E"\n',
                                                     encoding="utf-8")
    (quiz / "quiz.toml").write_text(textwrap.dedent('''
        [[question]]
        id = "toy-q"
        answer = 0
        question = { en = "?", zh = "？" }
        [[question.option]]
        text = { en = "yes", zh = "是" }
        why = { en = "y", zh = "是" }
        [[question.option]]
        text = { en = "no", zh = "否" }
        why = { en = "n", zh = "否" }
    '''), encoding="utf-8")
    return root


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ALIGNLINGS_LANG", "en")
    return tmp_path / "home"


@pytest.fixture
def pack(tmp_path):
    return load_pack(make_pack(tmp_path / "pack"))


# -- the loader ----------------------------------------------------------------------------------------

def test_predict_toml_loads_into_typed_questions(pack):
    ex = pack.get("predict-toy")
    assert ex.kind_spec.name == "predict" and not ex.kind_spec.answered_by_choice and not ex.kind_spec.graded_as_file
    (q,) = ex.predict
    assert isinstance(q, pr.PredictQuestion) and q.id == "toy-speed" and q.answer == 1
    assert q.concepts == ("toy-tag",) and q.run == "run_toy" and q.supports == "supports_toy"
    assert [o.text["zh"] for o in q.options] == ["slow", "fast", "一样"]
    assert q.chart is not None and q.chart.series["fast"] == {"en": "fast line", "zh": "快的那条"}
    assert q.result_fields() == {"slow", "fast"} and q.line == 3
    assert pack.get("toy-quiz").predict == ()  # other kinds have no predict questions


@pytest.mark.parametrize("find, replace, field, expected", [
    ('question.zh = "哪个增长得更快？"\n', "", "question", "missing zh text"),
    ("answer = 1", "answer = 3", "answer", "expected an option index 0..2 (0-based), got 3"),
    ("answer = 1", 'answer = "1"', "answer", "expected an option index 0..2"),
    ('result.en = "slow ends at {slow:.2f}', 'result.en = "slow ends at {v.slow:.2f}', "result",
     "expected a plain value name"),
    ('run = "run_toy"', 'run = "run toy()"', "run", "expected the name of a function in variant.py"),
    ('concepts = ["toy-tag"]', 'concepts = ["Toy Tag"]', "concepts", "expected a list of concept tags"),
    ('why.zh = "斜率不同。"\n', "", "option #3 why", "missing zh text"),  # option 3's own why, not option 2's
    ('[question.chart.series.slow]\nen = "slow line"\nzh = "慢的那条"\n[question.chart.series.fast]\n'
     'en = "fast line"\nzh = "快的那条"\n', "", "chart", "expected one table per series"),
])
def test_loader_errors_name_the_file_line_and_field(tmp_path, find, replace, field, expected):
    assert find in PREDICT
    text = PREDICT.replace(find, replace)
    root = make_pack(tmp_path / "bad", predict=text)
    with pytest.raises(PackError) as err:
        _ = load_pack(root).get("predict-toy").predict
    message = str(err.value)
    path = root / "predict-toy" / "predict.toml"
    at = re.match(rf"^{re.escape(str(path))}:(\d+): question #1 {field}", message)
    assert at, message
    assert expected in message
    line = text.splitlines()[int(at.group(1)) - 1]
    assert field.split(".")[0].split()[-1] in line or line.startswith("[[question]]") or "question.chart" in line, line


def test_a_question_without_a_required_field_is_named(tmp_path):
    root = make_pack(tmp_path / "bad", predict=PREDICT.replace('supports = "supports_toy"\n', ""))
    with pytest.raises(PackError, match=r"predict\.toml:3: question #1: missing field 'supports'"):
        _ = load_pack(root).get("predict-toy").predict


# -- the runner ----------------------------------------------------------------------------------------

def test_the_variant_runs_in_its_own_process_and_is_cached(pack, home):
    ex = pack.get("predict-toy")
    (q,) = ex.predict
    first = pr.run_variant(ex, q)
    assert not first.cached and first.values == {"slow": 0.25, "fast": 0.75} and first.supports == 1
    assert len(first.series["fast"]) == 10
    path = pr.cache_path(ex, q)
    assert path.is_file() and path.is_relative_to(home / "cache" / "predict")
    again = pr.run_variant(ex, q)
    assert again.cached and again.values == first.values and again.series == first.series
    path.write_text("{not json", encoding="utf-8")  # a corrupt cache file is ignored and replaced
    fresh = pr.run_variant(ex, q)
    assert not fresh.cached and fresh.values == first.values
    assert json.loads(path.read_text(encoding="utf-8"))["result"]["values"] == first.values
    path.write_text(json.dumps({"result": {"values": {"slow": "NaN"}}}), encoding="utf-8")  # valid JSON, bad data
    assert not pr.run_variant(ex, q).cached


def test_the_cache_key_follows_the_variant_and_the_version(pack, monkeypatch):
    ex = pack.get("predict-toy")
    (q,) = ex.predict
    before = pr.cache_path(ex, q)
    monkeypatch.setattr(pr, "_version", lambda: "9.9.9")
    assert pr.cache_path(ex, q) != before
    monkeypatch.undo()
    (ex.path / "variant.py").write_text(VARIANT + "\n# edited\n", encoding="utf-8")
    assert pr.cache_path(ex, q) != before


def test_the_child_is_isolated_from_this_process(tmp_path):
    probe = VARIANT.replace('return {"values": {"slow": 0.25, "fast": 0.75}',
                            'import os, sys\n    assert sys.flags.isolated and os.environ.get("SECRET") is None\n'
                            '    return {"values": {"slow": 0.25, "fast": 0.75}')
    ex = load_pack(make_pack(tmp_path / "p", variant=probe)).get("predict-toy")
    import os

    os.environ["SECRET"] = "x"
    try:
        assert pr.run_variant(ex, ex.predict[0]).values["fast"] == 0.75
    finally:
        del os.environ["SECRET"]


@pytest.mark.parametrize("body, expected", [
    ("while True:\n        pass", "took longer than 2 s and was stopped"),
    ("return 1 / 0", "failed: ZeroDivisionError: division by zero"),
    ('return {"values": {"slow": float("nan")}}', "returned malformed data: 'values'['slow']: expected a finite number"),
    ('return {"values": {"a": 1.0}, "series": {"s": [1.0] * 500}}', "'series'['s']: expected a list of 2 to 200"),
    ('return {"values": {"a": 1.0}, "series": {"s": [1.0, 2.0], "t": [1.0, 2.0, 3.0]}}', "of one length"),
    ('return {"values": {"a": 1.0}, "extra": 1}', "unexpected keys ['extra']"),
])
def test_a_failing_run_is_one_sentence_without_a_traceback(tmp_path, body, expected):
    variant = f"def run_toy():\n    {body}\n\n\ndef supports_toy(result):\n    return 1\n"
    ex = load_pack(make_pack(tmp_path / "p", variant=variant)).get("predict-toy")
    with pytest.raises(pr.VariantError) as err:
        pr.run_variant(ex, ex.predict[0], timeout=2)
    assert expected in err.value.message
    assert "Traceback" not in err.value.message and "\n" not in err.value.message
    assert not pr.cache_path(ex, ex.predict[0]).exists()  # nothing cached


# -- the session -----------------------------------------------------------------------------------------

def test_the_prediction_is_recorded_before_anything_runs_or_is_shown(pack, tmp_path, monkeypatch):
    store = ProgressStore(tmp_path / "p.sqlite3")
    practice = Practice(store, pack)
    ex = pack.get("predict-toy")
    (ask,) = practice.predict_questions(ex)
    assert set(vars(ask)) == {"exercise", "question_id", "intro", "question", "options", "answered"}
    assert ask.options == ["slow", "fast", "the same"] and not ask.answered
    events: list[str] = []
    real_record, real_run = store.record_quiz_answer, pr.run_variant

    def record(*a, **kw):
        events.append("record")
        return real_record(*a, **kw)

    def run(*a, **kw):
        events.append("run")
        return real_run(*a, **kw)

    monkeypatch.setattr(store, "record_quiz_answer", record)
    monkeypatch.setattr(pr, "run_variant", run)
    wrong = practice.predict_answer(ex, "toy-speed", 0, lang="zh")
    assert events == ["record", "run"]
    assert not wrong.correct and wrong.answer == 1 and wrong.why == "它的斜率是 0.25。" and wrong.recorded
    assert wrong.result_text == "slow 最终为 0.25，fast 为 0.75。" and wrong.explanation == "因为 fast 的斜率更大。"
    assert wrong.chart["x"] == "步数" and [s["label"] for s in wrong.chart["series"]] == ["慢的那条", "快的那条"]
    assert wrong.score == {"right": 0, "total": 1, "passed": False}
    assert not practice.summary().exercises["predict-toy"].solved  # the quiz's rule: all right
    right = practice.predict_answer(ex, "toy-speed", 1)
    assert right.correct and right.cached and right.score["passed"]
    assert practice.summary().exercises["predict-toy"].solved
    assert store.quiz_answers(pack="toy")["toy-speed"]["attempts"] == 2
    assert practice.predict_questions(ex)[0].answered
    store.close()


class _Broken:
    """A store every write of which fails like a locked database; reads answer like an empty one."""

    learner = ""

    def __getattr__(self, name):
        if name.startswith(("record", "take", "set_", "reset", "mark", "import_")):
            def fail(*a, **kw):
                raise sqlite3.OperationalError("database is locked")
            return fail
        empty = {"summary": {}, "quiz_answers": {}, "attempts": [], "get_setting": None}
        return lambda *a, **kw: empty[name]


def test_a_store_that_cannot_be_written_still_gives_the_result(pack, caplog):
    practice = Practice(_Broken(), pack)
    result = practice.predict_answer(pack.get("predict-toy"), "toy-speed", 1)
    assert result.correct and not result.recorded and result.result_text.startswith("slow ends at 0.25")
    assert result.score == {"right": 1, "total": 1, "passed": True}
    assert "database is locked" in caplog.text


def test_bad_predictions_name_their_argument(pack):
    practice = Practice(_Broken(), pack)
    ex = pack.get("predict-toy")
    with pytest.raises(UsageError) as choice:
        practice.predict_answer(ex, "toy-speed", 3)
    assert choice.value.argument == "choice"
    with pytest.raises(UsageError) as question:
        practice.predict_answer(ex, "no-such-question", 0)
    assert question.value.missing and question.value.argument == "question"
    with pytest.raises(UsageError, match="is not a predict item") as other:
        practice.predict_answer(pack.get("toy-quiz"), "toy-q", 0)
    assert other.value.missing


def test_a_failing_run_still_records_the_prediction_and_explains(tmp_path):
    course = load_pack(make_pack(tmp_path / "p", variant="def run_toy():\n    raise RuntimeError('no')\n"))
    store = ProgressStore(tmp_path / "p.sqlite3")
    result = Practice(store, course).predict_answer(course.get("predict-toy"), "toy-speed", 1)
    assert result.correct and result.recorded and result.result_text is None and result.chart is None
    assert result.run_error == "the run of predict-toy failed: RuntimeError: no"
    assert result.explanation
    store.close()


# -- spaced review ---------------------------------------------------------------------------------------

def test_each_question_is_a_review_item_asked_again_then_shown_the_run(pack, tmp_path):
    from alignlings.practice import review as rv

    t0 = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)
    store = ProgressStore(tmp_path / "p.sqlite3")
    assert rv.catalog(pack)[("toy", "predict/toy-speed")].concepts == ("toy-tag",)
    clock = rv.FixedClock(t0)
    Practice(store, pack, clock=clock).predict_answer(pack.get("predict-toy"), "toy-speed", 1)
    practice = Practice(store, pack, clock=rv.FixedClock(datetime.now(timezone.utc) + timedelta(days=30)))
    queue = practice.review_queue().items
    (prompt,) = [p for p in queue if p.shown.item == "predict/toy-speed"]
    shown = prompt.shown
    assert isinstance(shown, rv.PredictPrompt) and isinstance(shown, rv.QuizPrompt)
    assert shown.kind == "predict" and shown.form == "quiz" and shown.options == ["slow", "fast", "the same"]
    assert "answer" not in shown.as_dict() and "explanation" not in shown.as_dict()
    done = practice.review_answer("toy", "predict/toy-speed", 1, lang="zh")
    assert done.rating == "good" and done.recorded and done.result["correct"]
    assert done.result["result_text"] == "slow 最终为 0.25，fast 为 0.75。" and done.result["explanation"]
    assert practice.review_rate("toy", "predict/toy-speed", "easy").rating == "easy"
    log = store.review_log(pack="toy", item="predict/toy-speed")
    assert [(r["source"], r["rating"]) for r in log] == [("quiz", rv.GOOD), ("review", rv.EASY)]
    wrong = Practice(store, pack, clock=rv.FixedClock(datetime.now(timezone.utc) + timedelta(days=400)))
    assert wrong.review_answer("toy", "predict/toy-speed", 2).rating == "again"
    mastery = {row["concept"]: row for row in practice.mastery()}
    assert mastery["toy-tag"]["seen"] == 1
    store.close()


def test_an_import_of_the_loaded_course_keeps_predictions(pack, tmp_path):
    store = ProgressStore(tmp_path / "a.sqlite3")
    Practice(store, pack).predict_answer(pack.get("predict-toy"), "toy-speed", 1)
    data = store.export()
    other = ProgressStore(tmp_path / "b.sqlite3")
    Practice(other, pack).import_(data, only_loaded=True)
    assert other.quiz_answers(pack="toy")["toy-speed"]["correct"] is True
    store.close()
    other.close()


# -- dev check ---------------------------------------------------------------------------------------------

def test_dev_check_reports_a_wrong_answer_and_other_faults_at_their_lines(tmp_path):
    from alignlings.grading.devcheck import check_exercise

    good = load_pack(make_pack(tmp_path / "good")).get("predict-toy")
    report = check_exercise(good, None)
    assert report.ok, report.problems
    assert "supports(run()) == answer" in report.checked

    text = (PREDICT.replace("answer = 1", "answer = 0").replace('concepts = ["toy-tag"]', 'concepts = ["no-such-tag"]')
            .replace("{fast:.2f}.", "{fastest:.2f}.").replace("[question.chart.series.fast]", "[question.chart.series.faster]"))
    bad = load_pack(make_pack(tmp_path / "bad", predict=text)).get("predict-toy")
    problems = check_exercise(bad, None).problems
    path = bad.path / "predict.toml"
    lines = text.splitlines()

    def line_of(prefix: str) -> int:
        return next(i for i, line in enumerate(lines, start=1) if line.startswith(prefix))

    wrong = next(p for p in problems if "supports_toy(run_toy()) = option 1" in p)
    assert wrong.startswith(f"{path}:{line_of('answer = ')}: answer = 0, but ")
    # concept tags are checked against every loaded pack (packlint), as a quiz's or a drill's are (issue 34)
    from alignlings.content import packlint

    course = load_pack(str(bad.path.parent))
    structure = [str(p) for p in packlint.lint_pack(course.packs[-1], course=course)]
    assert any(p.startswith(f"{path}:{line_of('concepts')}: unknown concept tag 'no-such-tag'") for p in structure)
    assert not any("no-such-tag" in p for p in problems)  # once, not again by the item's own check
    assert any(p.startswith(f"{path}:{line_of('result.en')}: result names fastest") for p in problems)
    assert any(p.startswith(f"{path}:{line_of('[question.chart]')}: chart series faster") for p in problems)

    missing = load_pack(make_pack(tmp_path / "missing", predict=PREDICT.replace('run = "run_toy"', 'run = "run_other"')))
    problems = check_exercise(missing.get("predict-toy"), None).problems
    assert any(f":{line_of('run = ')}: run = 'run_other': variant.py defines no function run_other()" in p
               for p in problems), problems


def test_the_built_in_predict_items_pass_dev_check():
    """Their real torch variants run and support the answer the items give (a few seconds each)."""
    from alignlings.content.kinds.predict import check_predict

    course = load_pack()
    items = [ex for ex in course if ex.kind == "predict"]
    assert {"predict-k3-gradient", "predict-clipfrac-lr"} <= {ex.id for ex in items}
    for ex in items:
        if ex.id not in ("predict-k3-gradient", "predict-clipfrac-lr"):
            continue
        problems, checked = check_predict(ex)
        assert problems == [] and "variant runs" in checked
        track = course.track_of(ex.key)
        assert track is not None
        after = track.exercises[track.exercises.index(ex.key) + 1]  # right before the exercise it previews
        assert after == {"predict-k3-gradient": "kl-estimators", "predict-clipfrac-lr": "ppo-clip"}[ex.id]


# -- the CLI ----------------------------------------------------------------------------------------------

def test_the_cli_asks_commits_runs_and_explains(pack, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from alignlings.cli.app import app

    monkeypatch.setenv("COLUMNS", "160")
    monkeypatch.setenv("ALIGNLINGS_WORKSPACE", str(tmp_path / "ws"))
    root = str(pack.path)
    runner = CliRunner()
    first = runner.invoke(app, ["--pack", root], catch_exceptions=False)
    assert "Predict, then see the run: `alignlings predict predict-toy --pack" in first.output.replace("\n", " ")
    out = runner.invoke(app, ["predict", "predict-toy", "--pack", root], input="x\nA\n", catch_exceptions=False)
    assert out.exit_code == 0, out.output
    text = out.output
    assert text.index("Which grows faster?") < text.index("Please answer with a letter A-C.")
    assert "Not what the run shows: it supports B." in text
    assert "slow ends at 0.25, fast at 0.75." in text and "Because fast has the larger slope." in text
    assert "fast line" in text and "▁" in text  # the chart as a text table with sparklines
    zh = runner.invoke(app, ["predict", "--pack", root, "--lang", "zh"], input="B\n", catch_exceptions=False)
    assert "你的预测是对的。" in zh.output and "slow 最终为 0.25" in zh.output
    home = runner.invoke(app, ["--pack", root], catch_exceptions=False)
    assert "Next: toy-quiz" in home.output  # predict-toy is solved by the right prediction above
    start = runner.invoke(app, ["start", "predict-toy", "--pack", root])
    assert start.exit_code == 2 and "alignlings predict predict-toy" in start.output
    listed = runner.invoke(app, ["list", "--pack", root], catch_exceptions=False)
    assert re.search(r"predict-toy .* predict ", listed.output)
    quiz = runner.invoke(app, ["predict", "toy-quiz", "--pack", root])
    assert quiz.exit_code == 2 and "is not a predict item" in quiz.output


# -- the web app -------------------------------------------------------------------------------------------

def test_the_web_page_asks_first_and_shows_the_run_after_the_form_commit(pack, tmp_path):
    from fastapi.testclient import TestClient

    from alignlings.web.app import create_app

    client = TestClient(create_app(str(pack.path), db_path=tmp_path / "w.sqlite3", warm_up=False))
    page = client.get("/exercises/predict-toy")
    assert page.status_code == 200
    assert "Which grows faster?" in page.text and 'type="radio"' in page.text
    for secret in ("Right: slope 0.75.", "Its slope is 0.25.", "Because fast has", "slow ends at"):
        assert secret not in page.text
    home = client.get("/")
    assert 'href="/exercises/predict-toy"' in home.text and "kind-predict" in home.text
    form = {"question": "toy-speed", "choice": "2"}
    assert client.post("/exercises/predict-toy/predict", data=form).status_code == 415  # no proof of origin
    assert client.post("/exercises/predict-toy/predict", data=form,
                       headers={"Origin": "http://evil.example"}).status_code == 403
    assert client.post("/exercises/predict-toy/predict", data=form,
                       headers={"Origin": "null", "Sec-Fetch-Site": "cross-site"}).status_code == 403
    same = client.post("/exercises/predict-toy/predict", data=form,  # a browser's form under no-referrer
                       headers={"Origin": "null", "Sec-Fetch-Site": "same-origin"})
    assert same.status_code == 200 and "predict-result" in same.text
    assert client.post("/api/quiz/toy-q", data={"choice": "0"},  # other routes still take JSON only
                       headers={"Origin": "null", "Sec-Fetch-Site": "same-origin"}).status_code in (403, 415)
    done = client.post("/exercises/predict-toy/predict?lang=zh", data=form, headers={"Origin": "http://testserver"})
    assert done.status_code == 200
    assert "你预测的是 C：运行结果支持的是 B。" in done.text and "slow 最终为 0.25，fast 为 0.75。" in done.text
    assert '<svg class="predict-svg"' in done.text and 'role="img"' in done.text
    assert '<table class="visually-hidden">' in done.text and "<td>0.675</td>" in done.text  # fast at step 9
    assert "因为 fast 的斜率更大。" in done.text and "斜率不同。" in done.text
    api = client.get("/api/predict/predict-toy").json()
    assert api["questions"][0]["answered"] is True and "answer" not in api["questions"][0]
    answered = client.post("/api/predict/predict-toy/toy-speed", json={"choice": 1}).json()
    assert answered["correct"] and answered["cached"] and answered["chart_svg"].startswith("<svg")
    assert client.post("/api/predict/predict-toy/toy-speed", json={"choice": 9}).status_code == 422
    assert client.post("/api/predict/toy-quiz/toy-q", json={"choice": 0}).status_code == 404
    assert client.get("/exercises/predict-toy").text.count("✓") >= 1  # solved now
    reviewed = client.post("/api/review/answer?lang=en", json={"item": "predict/toy-speed", "pack": "toy", "answer": 2})
    assert reviewed.status_code == 200, reviewed.text
    shown = reviewed.json()["result"]
    assert not shown["correct"] and shown["options"][1]["why_html"]
    assert "slow ends at 0.25" in shown["predict_html"] and "larger slope" in shown["predict_html"]
    assert shown["chart_html"].startswith('<figure class="predict-chart"') and "visually-hidden" in shown["chart_html"]


def test_the_dev_check_command_fails_on_a_wrong_answer(tmp_path):
    from typer.testing import CliRunner

    from alignlings.cli.app import app

    root = make_pack(tmp_path / "wrong", predict=PREDICT.replace("answer = 1", "answer = 2"))
    result = CliRunner().invoke(app, ["dev", "check", "--pack", str(root)], env={"COLUMNS": "1000"})
    assert result.exit_code == 1
    line = PREDICT.splitlines().index("answer = 1") + 1
    assert f"{root / 'predict-toy' / 'predict.toml'}:{line}: answer = 2, but supports_toy(run_toy()) = option 1" in \
        result.output


def test_the_cli_and_the_web_app_share_one_record_of_predictions(pack, home, monkeypatch):
    """One store, both interfaces: the same answers, the same solved state, the same review history."""
    from fastapi.testclient import TestClient
    from typer.testing import CliRunner

    from alignlings.cli.app import app
    from alignlings.practice import review as rv
    from alignlings.web.app import create_app

    monkeypatch.setenv("COLUMNS", "160")
    out = CliRunner().invoke(app, ["predict", "predict-toy", "--pack", str(pack.path)], input="A\n",
                             catch_exceptions=False)
    assert "it supports B" in out.output
    web = create_app(str(pack.path), db_path=home / "progress.sqlite3", warm_up=False)
    client = TestClient(web)
    assert client.post("/api/predict/predict-toy/toy-speed", json={"choice": 1}).json()["correct"]
    store = ProgressStore(home / "progress.sqlite3")
    assert store.quiz_answers(pack="toy")["toy-speed"] == {**store.quiz_answers(pack="toy")["toy-speed"],
                                                           "choice": 1, "correct": True, "attempts": 2}
    practice = Practice(store, pack)
    assert practice.summary().exercises["predict-toy"].solved
    practice.review().sync()
    log = store.review_log(pack="toy", item="predict/toy-speed")
    assert [(r["source"], r["rating"]) for r in log] == [("quiz", rv.AGAIN), ("quiz", rv.GOOD)]
    sources = {a["source"] for a in store.attempts("predict-toy", pack="toy")}
    assert sources == {"cli", "web"}  # each interface closed a round
    store.close()
    web.state.ctx.store.close()


def test_the_cli_shows_formulas_as_text_and_reflows_the_statement(tmp_path, monkeypatch):
    """A predict item's statement, question, options and explanation carry LaTeX: the terminal shows
    it as Unicode (KL's double bar included), never as ``$...$`` or backslashes."""
    from typer.testing import CliRunner

    from alignlings.cli.app import app

    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path))
    out = CliRunner().invoke(app, ["predict", "predict-k3-gradient"], input="B\n", catch_exceptions=False)
    assert out.exit_code == 0, out.output
    assert "KL(π_θ‖π_ref)" in out.output and "KL(π_refπ_θ)" not in out.output
    assert "$" not in out.output and "\\pi" not in out.output and "\\mathbb" not in out.output
    assert "∇k_3 = (1 - r)" in out.output  # the explanation, rendered
