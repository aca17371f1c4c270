"""The whole-file blank finder reads code only (issue 19 §4): a docstring or a comment that repeats a
blank's line is never taken for the learner's fill, a fill is claimed only where the code around
the blank is the template's, and a verdict passes only when every blank it found passed.

Before the change, the original page's reward-model file (its docstring says
``loss = -log(sigmoid(r_chosen - r_rejected))``) passed as a whole while blank 7 was marked wrong.
"""

from __future__ import annotations

import pytest

from alignlings.content import blanks as bl
from alignlings.grading.grader import Grader
from alignlings.content.pack import load_pack

PACK = load_pack("dpo-grpo")

PAGE_REWARD_MODEL = ["backbone", "param.requires_grad_(False)", "nn.Linear(hidden_dim, 1)",
                     "self.backbone(input_ids)", "hidden_states[:, -1, :]",
                     "self.value_head(last_hidden).squeeze(-1)",
                     "-F.logsigmoid(reward_chosen - reward_rejected).mean()"]

DOCSTRING = '''    def compute_preference_loss(self, reward_chosen, reward_rejected):
        """Bradley-Terry loss over a batch of pairs:

        loss = -log(sigmoid(r_chosen - r_rejected))
        """
'''

ONE_LINE_DOCSTRING = '''    def compute_preference_loss(self, reward_chosen, reward_rejected):
        """loss = -log(sigmoid(r_chosen - r_rejected))"""
'''

COMMENT = '''    def compute_preference_loss(self, reward_chosen, reward_rejected):
        # loss = -torch.log(torch.sigmoid(reward_chosen - reward_rejected)).mean()
'''

STRING_VALUE = '''    def compute_preference_loss(self, reward_chosen, reward_rejected):
        note = """
        loss = -log(sigmoid(r_chosen - r_rejected))
        """
'''


def _page_file(header: str) -> str:
    ex = PACK.get("reward-model")
    source = ex.solution_source
    code = bl.render(source, bl.find_blanks(source), dict(enumerate(PAGE_REWARD_MODEL, start=1)))
    head = "    def compute_preference_loss(self, reward_chosen, reward_rejected):\n"
    assert head in code
    return code.replace(head, header)


@pytest.mark.parametrize("header", [DOCSTRING, ONE_LINE_DOCSTRING, COMMENT, STRING_VALUE],
                         ids=["docstring", "one-line docstring", "comment", "multi-line string value"])
def test_a_repeated_line_in_a_docstring_or_comment_is_not_the_fill(header):
    ex = PACK.get("reward-model")
    blanks = bl.find_blanks(ex.solution_source)
    fills = bl.extract_fills(_page_file(header), ex.solution_source, blanks)
    assert fills == dict(enumerate(PAGE_REWARD_MODEL, start=1))


def test_a_docstring_above_a_still_empty_blank_leaves_it_empty():
    ex = PACK.get("reward-model")
    blanks = bl.find_blanks(ex.solution_source)
    code = _page_file(DOCSTRING).replace(PAGE_REWARD_MODEL[6], bl.PLACEHOLDER)
    assert bl.extract_fills(code, ex.solution_source, blanks)[7] == bl.PLACEHOLDER


def test_a_rewritten_function_is_not_read_as_a_fill():
    """Code around the blank changed too: the finder does not guess (the whole file decides)."""
    ex = PACK.get("dpo-loss")
    blanks = bl.find_blanks(ex.solution_source)
    rewritten = ("import torch\nimport torch.nn.functional as F\n\n\n"
                 "def dpo_loss(policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp, beta=0.1):\n"
                 "    logits = (policy_chosen_logp - policy_rejected_logp) - (ref_chosen_logp - ref_rejected_logp)\n"
                 "    loss = -F.logsigmoid(beta * logits)\n"
                 "    return loss.mean()\n")
    assert bl.extract_fills(rewritten, ex.solution_source, blanks) == {1: None, 2: None, 3: None, 4: None}


def test_a_template_filled_line_for_line_is_read_exactly():
    ex = PACK.get("dpo-loss")
    source = ex.solution_source
    blanks = bl.find_blanks(source)
    fills = {1: "torch.sub(policy_chosen_logp, ref_chosen_logp)", 2: "policy_rejected_logp - ref_rejected_logp",
             3: "beta*(chosen_implicit_r - rejected_implicit_r)", 4: "F.softplus(-margin).mean()"}
    code = bl.render(source, blanks, fills, todos=["a", "b", "c", "d"])
    assert bl.extract_fills(code, source, blanks) == fills


@pytest.fixture(scope="module")
def grader(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("ALIGNLINGS_HOME", str(tmp_path_factory.mktemp("home")))
    with Grader(PACK, warm=True) as g:
        yield g
    mp.undo()


@pytest.mark.parametrize("header", [DOCSTRING, COMMENT], ids=["docstring", "comment"])
def test_the_page_file_passes_with_every_blank_right(grader, header):
    verdict = grader.check("reward-model", _page_file(header), run_main=False)
    assert verdict["passed"], [(b["index"], b["message"]) for b in verdict["blanks"]]
    assert [b["passed"] for b in verdict["blanks"]] == [True] * 7


def test_a_verdict_with_a_wrong_blank_never_passes(grader):
    """Blanks that cancel out: the whole file computes the loss right, every blank alone is wrong.
    The verdict follows the blanks (it said passed before, with three blanks marked wrong)."""
    fills = ["2 * (policy_chosen_logp - ref_chosen_logp)", "2 * (policy_rejected_logp - ref_rejected_logp)",
             "beta * (chosen_implicit_r - rejected_implicit_r) / 2", "-F.logsigmoid(margin).mean()"]
    verdict = grader.check("dpo-loss", fills=fills, run_main=False, variant=0)
    assert all(c["passed"] for c in verdict["cases"])
    assert [b["passed"] for b in verdict["blanks"]] == [False, False, False, True]
    assert verdict["passed"] is False
    empty = _page_file(DOCSTRING).replace(PAGE_REWARD_MODEL[6], bl.PLACEHOLDER)
    verdict = grader.check("reward-model", empty, run_main=False)
    assert verdict["blanks"][6]["passed"] is False and verdict["passed"] is False
