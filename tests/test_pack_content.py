"""Content of the built-in pack beyond what `alignlings dev check` proves.

The proof that every template fails, every reference passes, every misconception is rejected on
its own blank with its own feedback and every listed equivalent passes exists once, in
``grading/devcheck.py``; tests/test_devcheck.py runs it on every exercise. Here:
1. the reference passes through the real (warm) grader and prints the spec's figures, and
   solution.py runs as a script with the same figures;
2. texts load in both languages with one ``blanks`` entry per blank, every TOML file parses, the
   per-blank hints go from a nudge to the answer and TODO comments state the task, not the answer;
3. every code exercise lists right answers written differently.
The quiz gets the same text checks plus its own shape (3 questions, 4 explained options each).
"""
from __future__ import annotations

import contextlib
import io
import re
import runpy
import tomllib

import pytest

torch = pytest.importorskip("torch")

from alignlings.content import blanks as bl  # noqa: E402
from alignlings.grading.grader import Grader  # noqa: E402
from alignlings.content.pack import LANGS, builtin_pack_path, load_pack  # noqa: E402

PACK_DIR = builtin_pack_path()
PACK = load_pack("dpo-grpo")  # the fill-in pack; the drills are proven in tests/test_bugdrill.py
CODE = [ex.id for ex in PACK.fill_exercises()]
MISCONCEPTIONS = [(ex.id, m.id) for ex in PACK.fill_exercises() for m in ex.misconceptions]
TRAINS = {"toy-grpo", "toy-ppo"}  # its full grading runs the 40-iteration training (reference, learner, __main__)


def _slow_if_training(eid: str, *values):
    """A pytest.param marked slow where the test runs toy-grpo's training (a few seconds each)."""
    return pytest.param(*(values or (eid,)), marks=[pytest.mark.slow] if eid in TRAINS else [])


# -- what each solution.py must print (the spec's figures) ------------------------------------------
def _number(pattern: str, text: str) -> float:
    found = re.search(pattern, text)
    assert found, f"{pattern!r} not found in:\n{text}"
    return float(found.group(1))


def _dpo_loss(out: str) -> None:
    assert _number(r"DPO loss: (-?[\d.]+)", out) == pytest.approx(0.658979, abs=1e-5)


def _grpo_advantages(out: str) -> None:
    assert "continuous: +0.925 -0.501 +1.332 -0.976 +0.212 -1.587 -0.161 +0.755" in out
    assert "all equal: " + " ".join(["+0.000"] * 8) in out
    assert "one outlier: -0.396 -0.319 +2.465 -0.472 -0.205 -0.358 -0.434 -0.281" in out
    assert _number(r"each success ([-+\d.]+)", out) == pytest.approx(6.425, abs=1e-3)
    assert _number(r"each failure ([-+\d.]+)", out) == pytest.approx(-0.154, abs=1e-3)


def _grpo_loss(out: str) -> None:
    assert _number(r"GRPO loss: (-?[\d.]+)", out) == pytest.approx(1.184475, abs=1e-5)
    assert _number(r"all three policies agree: (-?[\d.]+)", out) == pytest.approx(0.0, abs=1e-6)


def _reward_model(out: str) -> None:
    assert _number(r"preference loss: (-?[\d.]+)", out) == pytest.approx(0.599120, abs=1e-5)
    assert "trainable parameters: 65 of 10625" in out
    assert "rewards (chosen):   [-0.1765, 0.1257, -0.0868, 0.0098]" in out


def _toy_grpo(out: str) -> None:
    start = _number(r'P\("a"\) went from ([\d.]+)', out)
    end = _number(r'P\("a"\) went from [\d.]+ to ([\d.]+)', out)
    assert 0.05 < start < 0.15  # near uniform over 10 tokens
    assert end > 0.70


def _runs(out: str) -> None:
    """Exercises without figures from the original page: the script runs and prints something."""
    assert out.strip()


FIGURES = {"dpo-loss": _dpo_loss, "grpo-advantages": _grpo_advantages, "grpo-loss": _grpo_loss,
           "reward-model": _reward_model, "toy-grpo": _toy_grpo}

# -- correct fills written differently from the reference: the pack's [[equivalent]] tables, each alone
EQUIVALENTS = [(ex.id, e.blank, e.fill) for ex in PACK.fill_exercises() for e in ex.equivalents]



# tiny tensors: a second torch thread costs more than it saves (see conftest.one_torch_thread)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def grader(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("ALIGNLINGS_HOME", str(tmp_path_factory.mktemp("home")))
    g = Grader(PACK, warm=True)
    yield g
    g.close()
    mp.undo()


def _reference_fills(ex) -> list[str]:
    return [b.answer for b in bl.find_blanks(ex.solution_source)]


# -- 5. files and texts ----------------------------------------------------------------------------
def test_pack_lists_every_exercise_folder():
    folders = sorted(p.name for p in PACK_DIR.iterdir() if (p / "exercise.toml").is_file())
    assert sorted(PACK.exercises) == folders
    # learning order: the tracks, in order, hold every exercise once (issue 21 §4)
    assert [key for t in PACK.tracks for key in t.exercises] == list(PACK.exercises)
    # the original page's six, in its order (a predict item may stand before the exercise it previews)
    seed = tuple(e for e in PACK.track("dpo-grpo-fill").exercises if not e.startswith("predict-"))
    assert seed == ("concepts", "dpo-loss", "grpo-advantages", "grpo-loss", "reward-model", "toy-grpo")


# what each exercise needs, and the exercise that teaches it (issue 21 §4: foundations first)
TAUGHT_BEFORE = {
    "dpo-loss": ["token-logprobs"],  # summed completion log-probs
    "grpo-loss": ["ppo-clip", "kl-estimators"],  # the ratio, the clip, k3
    "grpo-advantages": ["reinforce-rloo"],  # baselines
    "reward-model": ["reward-pooling"],  # Bradley-Terry
    "toy-grpo": ["grpo-advantages", "grpo-loss"],
    "ppo-clip": ["token-logprobs", "kl-estimators"],
    "gae": ["ppo-clip"],
    "ppo-value-and-kl": ["gae", "kl-estimators"],
    "grpo-aggregation": ["grpo-loss", "sft-loss"],
    "ipo": ["dpo-loss"], "simpo": ["dpo-loss"], "orpo": ["sft-loss", "dpo-loss"], "kto": ["dpo-loss"],
    "toy-dpo": ["dpo-loss", "token-logprobs"],
    "toy-ppo": ["token-logprobs", "ppo-clip", "gae", "ppo-value-and-kl"],
}


def test_course_is_in_learning_order():
    order = list(PACK.exercises)
    taught = [e for e in order if PACK.get(e).kind != "predict"]  # a predict item previews the exercise after it
    assert taught[:3] == ["token-logprobs", "sft-loss", "kl-estimators"]
    for e in order:
        if PACK.get(e).kind == "predict":
            assert PACK.get(order[order.index(e) + 1]).kind == "code", e
    for eid, needs in TAUGHT_BEFORE.items():
        for need in needs:
            assert order.index(need) < order.index(eid), (need, eid)
    tracks = {t.id: t for t in PACK.tracks}
    assert len(tracks) == 7
    position = {t.id: i for i, t in enumerate(PACK.tracks)}
    for t in PACK.tracks:  # a track comes after every track it requires
        assert all(position[r] < position[t.id] for r in t.requires), t.id
    assert set(tracks["dpo-grpo-fill"].requires) == {"foundations", "policy-gradient"}


def test_every_exercise_tags_every_blank_with_named_concepts():
    """Issue 21 §4: review and mastery cover all of Curriculum I (GAE, value clipping, label masking,
    baselines) and II; every tag is named in both languages."""
    from alignlings.practice import review as rv

    names = {lang: rv.concept_names(PACK, lang) for lang in LANGS}
    used = set()
    for ex in PACK.fill_exercises():
        tags = rv.blank_concepts(ex)
        assert sorted(tags) == [b.index for b in bl.find_blanks(ex.solution_source)], ex.id
        used |= {t for ts in tags.values() for t in ts}
    assert {"gae", "value-clipping", "label-masking", "baselines", "kl-shaped-reward"} <= used
    for lang in LANGS:
        assert used <= set(names[lang]), (lang, used - set(names[lang]))
    assert all(names["zh"][t] != names["en"][t] for t in ("gae", "value-clipping", "label-masking", "baselines"))


@pytest.mark.parametrize("path", sorted(PACK_DIR.rglob("*.toml")), ids=lambda p: str(p.relative_to(PACK_DIR)))
def test_toml_parses(path):
    tomllib.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("eid", list(PACK.exercises))
def test_texts_in_both_languages(eid):
    ex = PACK.get(eid)
    for lang in LANGS:
        texts = ex.texts(lang)
        assert texts.statement.strip(), lang
        if ex.kind_spec.texts_need_hints:  # a predict item's explanations are per question (predict.toml)
            assert texts.explanation.strip(), lang
            assert len(texts.hints) >= 3, lang
        assert ex.title.get(lang), lang
    if ex.kind_spec.graded_as_file:
        n = len(bl.find_blanks(ex.solution_source))
        for lang in LANGS:
            assert len(ex.texts(lang).blanks) == n, lang
            assert all(d.strip() for d in ex.texts(lang).blanks), lang
        comments = {text[1:].strip() for _, _, text in bl._comments(ex.solution_source)}
        dead = set(ex.texts("zh").comments) - comments
        assert not dead, f"zh [comments] translate comments that solution.py does not have: {dead}"
        assert len(ex.misconceptions) >= 3
        assert len({m.id for m in ex.misconceptions}) == len(ex.misconceptions)
        for m in ex.misconceptions:
            assert 1 <= m.blank <= n and m.fill.strip()
            assert all(m.feedback.get(lang, "").strip() for lang in LANGS), m.id
        assert set(ex.entry) and all(re.search(rf"^(def|class) {name}\b", ex.solution_source, re.M)
                                     for name in ex.entry)


def test_quiz_questions():
    quiz = PACK.get("concepts").quiz
    assert [q.id for q in quiz] == ["bt-probability", "dpo-key-idea", "grpo-vs-ppo"]
    for q in quiz:
        assert len(q.options) == 4
        for lang in LANGS:
            assert q.question[lang].strip()
            assert all(o.text[lang].strip() and o.why[lang].strip() for o in q.options), (q.id, lang)
    bt = quiz[0]
    assert bt.options[bt.answer].text["en"] == "0.95"
    assert 1 / (1 + torch.exp(torch.tensor(-3.0))).item() == pytest.approx(0.95, abs=0.005)


# -- 1. the reference passes and prints the spec's figures ------------------------------------------
@pytest.mark.parametrize("eid", [_slow_if_training(e) for e in CODE])
def test_reference_passes(grader, eid):
    ex = PACK.get(eid)
    v = grader.check(eid, fills=_reference_fills(ex), run_main=True)
    assert v["passed"], [c["message"] for c in v["cases"] if not c["passed"]] or v["error"]
    assert all(b["passed"] is True for b in v["blanks"])
    FIGURES.get(eid, _runs)(v["stdout"])


@pytest.mark.parametrize("eid", [_slow_if_training(e) for e in CODE])
def test_solution_file_runs_as_a_script(eid):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(PACK.get(eid).path / "solution.py"), run_name="__main__")
    torch.set_num_threads(1)  # toy-grpo's script sets it too; keep the module's setting either way
    FIGURES.get(eid, _runs)(out.getvalue())


# -- 4. every code exercise lists right answers written differently (dev check proves they pass) ------------------------------------------------------
def test_every_code_exercise_lists_equivalents():
    assert all(ex.equivalents for ex in PACK.fill_exercises())


def test_blank_hints_go_from_a_nudge_to_the_answer():
    for ex in PACK.fill_exercises():
        answers = _reference_fills(ex)
        for lang in LANGS:
            per_blank = ex.texts(lang).blank_hints
            assert len(per_blank) == len(answers), (ex.id, lang)
            for i, hints in enumerate(per_blank):
                assert len(hints) >= 2, (ex.id, lang, i + 1)
                if not answers[i].isidentifier():  # a bare name (e.g. `backbone`) is also the concept's word
                    assert answers[i] not in hints[0], (ex.id, lang, i + 1)  # the first is a nudge
                assert answers[i] in hints[-1], (ex.id, lang, i + 1)  # the last gives the answer


def test_todo_comments_state_the_task_not_the_answer():
    for ex in PACK.fill_exercises():
        for lang in LANGS:
            for answer, todo in zip(_reference_fills(ex), ex.texts(lang).blanks):
                assert answer.isidentifier() or answer not in todo, (ex.id, lang, todo)


def test_pack_intro_in_both_languages():
    n_code = len(PACK.fill_exercises())
    for lang in LANGS:
        intro = PACK.intro(lang)
        assert "Bradley-Terry" in intro and "k3" in intro, lang
        assert str(n_code) in intro and str(len(PACK.tracks)) in intro, lang  # "23 coding exercises ... 7 tracks"
        assert "three ways" not in intro.lower()
        for track in PACK.tracks:  # the map names every track and every exercise
            name = track.title[lang].split("：")[0].split(":")[0].split(",")[0].split("（")[0]
            assert name in intro, (lang, track.id)
            assert all(f"`{e}`" in intro for e in track.exercises), (lang, track.id)
    # the page is named, not "the original page" to learners who never saw it (issue 31 §9)
    assert "Start here if you came from the practice page this course began from" in PACK.intro("en")
    assert "如果你来自本课程最初依据的那份练习页面，从这里开始" in PACK.intro("zh")
