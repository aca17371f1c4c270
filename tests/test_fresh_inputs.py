"""Fresh inputs for review re-tests: ``Grader.check(variant=n)`` draws other random inputs for the
learner, the splices and the reference alike (``checks.fresh``), and a misconception's re-test asks
for a new draw at every review."""

from __future__ import annotations

import types

import pytest

from alignlings.practice import review as rv
from alignlings.grading import values as V
from alignlings.grading.grader import Grader
from alignlings.content.pack import load_pack

PACK = load_pack("dpo-grpo")


@pytest.fixture(scope="module")
def grader(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("ALIGNLINGS_HOME", str(tmp_path_factory.mktemp("home")))
    with Grader(PACK, warm=True) as g:
        yield g
    mp.undo()


def test_a_variant_redraws_the_random_cases_and_keeps_the_spec(grader):
    ex = PACK.get("dpo-loss")
    own, other = grader.trusted(ex, 0), grader.trusted(ex, 1)
    same = {n: V.compare(own.expected[n].value, other.expected[n].value) is None for n in own.names}
    assert same["spec batch (beta 0.1)"] and same["very negative margins"]  # spec data stays
    assert not same["random batch of 8, beta 0.1"] and not same["random batch of 3, beta 0.5"]


@pytest.mark.parametrize("variant", [1, 3])
def test_on_fresh_inputs_the_reference_passes_and_a_misconception_is_still_named(grader, variant):
    ex = PACK.get("dpo-loss")
    fills = [b.answer for b in grader.blanks(ex)]
    assert grader.check(ex.key, fills=fills, variant=variant, run_main=False)["passed"]
    m = next(m for m in ex.misconceptions if m.id == "sum-not-mean")
    wrong = list(fills)
    wrong[m.blank - 1] = m.fill
    v = grader.check(ex.key, fills=wrong, variant=variant, quick=True, run_main=False)
    assert not v["passed"] and v["blanks"][m.blank - 1]["misconception"] == m.id


def test_variant_must_be_a_non_negative_int(grader):
    with pytest.raises(ValueError, match="variant"):
        grader.check("dpo-loss", fills=[b.answer for b in grader.blanks(PACK.get("dpo-loss"))], variant=-1)


def test_a_misconception_retest_asks_for_a_new_draw_at_every_review():
    log: list[dict] = []
    store = types.SimpleNamespace(review_log=lambda pack, item: list(log))
    review = types.SimpleNamespace(store=store)
    item = rv.Item(key="misconception/dpo-loss/sum-not-mean", kind="misconception", pack="dpo-grpo",
                   exercise="dpo-loss", blank=4, misconception="sum-not-mean")
    draws = []
    for _ in range(rv.MAX_REVIEW_VARIANTS + 2):
        draws.append(rv.fresh_inputs(review, item))
        log.append({"source": "review"})
    # a new draw at every review, cycling through a bounded few (each draw is a trusted run and a cache entry)
    assert draws == [*range(1, rv.MAX_REVIEW_VARIANTS + 1), 1, 2]
    quiz = rv.Item(key="quiz/bt-probability", kind="quiz", pack="dpo-grpo", exercise="concepts")
    assert rv.fresh_inputs(review, quiz) == 0
