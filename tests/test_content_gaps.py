"""Wrong answers that used to pass now fail, each on its own blank (issue 21 §1), and the reference still
passes: one grading run per wrong answer through the real grader, the rest of the file the reference.

Each wrong answer is also a misconception of its exercise (so `alignlings dev check` proves its feedback);
here the grading itself is the subject: the case that catches it, not the feedback text.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from alignlings.content import blanks as bl  # noqa: E402
from alignlings.grading.grader import Grader  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402

PACK = load_pack("dpo-grpo")
DRILLS = load_pack("bug-drills")

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# (exercise, blank, wrong fill, the case that must catch it)
WRONG = [
    ("grpo-aggregation", 1, "torch.nan_to_num((per_token_loss*mask).sum(-1)/mask.sum(-1))",
     "an empty completion: gradients"),
    ("grpo-off-policy", 6, "gradient_accumulation_steps < steps_per_generation*num_iterations",
     "when TRL records pi_old's log-probs: accumulation longer than one generation"),
    ("dapo", 3, "rewards.std(dim=-1) > 0", "one group of eight equal rewards, 1.0 + (-0.3)"),
    ("toy-dpo", 7, "dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected)",
     "train(beta=0.5) against a reference that differs from the policy: P('a') over 3 steps"),
    ("toy-dpo", 6, "sequence_logps(policy, chosen)",
     "train(beta=0.5) against a reference that differs from the policy: P('a') over 3 steps"),
]


@pytest.fixture(scope="module")
def grader(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("ALIGNLINGS_HOME", str(tmp_path_factory.mktemp("home")))
    g = Grader(PACK, warm=True)
    yield g
    g.close()
    mp.undo()


def _fills(eid: str) -> list[str]:
    return [b.answer for b in bl.find_blanks(PACK.get(eid).solution_source)]


def _failed_cases(verdict) -> set[str]:
    return {c["name"] for c in verdict["cases"] if not c["passed"]}


@pytest.mark.parametrize("eid", sorted({w[0] for w in WRONG}))
def test_reference_passes(grader, eid):
    v = grader.check(eid, fills=_fills(eid), run_main=False, quick=True)
    assert v["passed"], _failed_cases(v) or v["error"]


@pytest.mark.parametrize(("eid", "blank", "fill", "case"), WRONG, ids=[f"{w[0]}-{w[1]}" for w in WRONG])
def test_wrong_answer_fails_on_its_blank(grader, eid, blank, fill, case):
    fills = _fills(eid)
    fills[blank - 1] = fill
    v = grader.check(eid, fills=fills, run_main=False, quick=True)
    assert not v["passed"]
    by_blank = {b["index"]: b["passed"] for b in v["blanks"]}
    assert by_blank[blank] is not True, by_blank
    assert all(ok is True for i, ok in by_blank.items() if i != blank), by_blank
    assert case in _failed_cases(v)


def test_dapo_case_holds_equal_rewards_with_a_positive_std():
    """Why the [1, 8] case exists: eight equal float32 rewards whose std is not 0."""
    one = (torch.ones(1, 8) + torch.tensor(-0.3))
    assert bool((one.max(-1).values == one.min(-1).values).all())  # all eight are equal
    assert one.std(-1).item() > 0  # yet float32's std is not 0 (6.4e-8)


def test_grad_accum_empty_micro_batch_is_named_in_the_note():
    """A fix that gives NaN on the micro-batch with no trained token fails there, and the note says why."""
    ex = DRILLS.get("grad-accum-loss")
    nan_fix = ex.solution_source.replace(
        "total = total + causal_lm_loss(logits, labels, num_items_in_batch=num_items)",
        "total = total + causal_lm_loss(logits, labels) * int((labels[:, 1:] != IGNORE_INDEX).sum()) / num_items")
    assert nan_fix != ex.solution_source
    with Grader(DRILLS, warm=False) as g:
        v = g.check("grad-accum-loss", nan_fix, run_main=False)
    failed = [c for c in v["cases"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["micro-batches of 1 and 4 sequences"]
    assert "no trained token" in str(failed[0])


def test_dpo_chosen_reward_falls_code_is_trainable_and_its_numbers_agree():
    """The bug-or-not drill's answer is "expected": its code must be TRL's, with a loss that has a gradient,
    and the observation must quote the table (issue 21 §2)."""
    import tomllib

    import torch.nn.functional as F

    data = tomllib.loads((DRILLS.get("dpo-chosen-reward-falls").path / "bugornot.toml").read_text(encoding="utf-8"))
    assert data["answer"] == "expected"
    logps = {k: torch.randn(4, requires_grad=True) for k in ("chosen_logps", "rejected_logps")}
    ns = {"F": F, "beta": 0.1, "ref_chosen_logps": torch.randn(4), "ref_rejected_logps": torch.randn(4), **logps}
    exec(compile(data["code"], "bugornot", "exec"), ns)  # noqa: S102 - pack data
    grads = torch.autograd.grad(ns["loss"], list(logps.values()))
    assert all(g.abs().sum() > 0 for g in grads)
    assert torch.allclose(ns["chosen_rewards"] - ns["rejected_rewards"],
                       0.1 * (ns["chosen_logratios"] - ns["rejected_logratios"]).detach())
    table = [line.split() for line in data["code"].splitlines() if line.startswith("#  ")]
    step500 = next(row for row in table if row[1] == "500")
    for lang in ("en", "zh"):
        assert step500[2] in data["observation"][lang], lang  # rewards/chosen
    quoted = [r["why"][lang] for r in data["reason"] for lang in ("en", "zh") if "0.8" in r["why"][lang]]
    assert quoted and all(step500[5] in why for why in quoted)  # rewards/accuracies


def test_rloo_drill_says_plainly_that_std_positive_is_not_enough():
    """The drill's fix (`std > 0`) passes its cases, and its explanation says it fails for rewards like 0.35:
    the explanation's figures are what the reference computes."""
    import runpy

    ex = DRILLS.get("rloo-variance-cancellation")
    m = runpy.run_path(str(ex.path / "solution.py"))
    rewards = torch.tensor([[0.35] * 7 + [1.0]])
    _, std = m["loo_baseline_and_std"](rewards)
    assert 1e-4 < std[0, -1].item() < 2e-4  # equal others, yet a positive std
    assert m["rloo_advantages"](rewards)[0, -1].item() > 4000
    for lang in ("en", "zh"):
        assert "0.35" in ex.texts(lang).explanation and "1.5e-4" in ex.texts(lang).explanation


def test_kl_estimators_todo_comments_state_the_task_not_the_formula():
    """Issue 21 §3: the TODO comments of kl-estimators name what to compute, never how."""
    formulas = ["-log r", "−log r", "(log r)", "r - 1", "r − 1", "exp(", "log pi_ref - log", "log π_ref − log", "^2", "²"]
    ex = PACK.get("kl-estimators")
    for lang in ("en", "zh"):
        for todo in ex.texts(lang).blanks:
            assert not any(f in todo for f in formulas), (lang, todo)


NEW_MISCONCEPTIONS = {  # issue 21 §3: behaviour-matched, each with its feedback in both languages
    "dpo-loss": ["mean-inside-logsigmoid"],
    "grpo-loss": ["clipped-branch-detached", "kl-times-ratio"],
    "ppo-clip": ["clipped-branch-detached"],
    "token-logprobs": ["softmax-over-time"],
}


@pytest.mark.parametrize("eid", sorted(NEW_MISCONCEPTIONS))
def test_named_misconceptions_are_rejected_with_their_feedback(grader, eid):
    ex = PACK.get(eid)
    by_id = {m.id: m for m in ex.misconceptions}
    for mid in NEW_MISCONCEPTIONS[eid]:
        m = by_id[mid]
        assert m.feedback["en"].strip() and m.feedback["zh"].strip()
        fills = _fills(eid)
        fills[m.blank - 1] = m.fill
        v = grader.check(eid, fills=fills, lang="zh", run_main=False, quick=True)
        blank = next(b for b in v["blanks"] if b["index"] == m.blank)
        assert blank["passed"] is not True, (eid, mid)
        assert m.feedback["zh"] in str(blank), (eid, mid, blank)
