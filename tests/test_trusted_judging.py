"""Issue 29 §1: the learner's job holds only the learner's code and the case inputs.

Each blank is judged from the learner's own run (``practice.record`` records its value and the
values in scope; the reference fill is evaluated on them in a trusted job, ``practice.instrument``),
so no job that runs learner code is ever given reference text:

1. No job that runs learner code is sent a reference fill (a spy on every job's payload).
2. A walker inside the learner's fill (frames, gc'd objects and code objects, modules, the
   environment, readable files) finds none of the reference's fill texts nor its spec value, and
   signals it through an exception's *type* (the side channel that read dpo-loss in 59 checks): the
   verdict carries no such exception. The control proves the walker finds a text that is there.
3. Per-blank verdicts stay exact after an earlier blank is wrong, and the original page's own
   dpo-loss file (signature over three lines, a docstring, a test script below) gets a verdict
   naming its one wrong blank and misconception.
"""

from __future__ import annotations

import json

import pytest

from alignlings.content import blanks as bl
from alignlings.grading import grader as grader_module
from alignlings.grading.grader import Grader
from alignlings.content.pack import load_pack

PACK = load_pack("dpo-grpo")
EX = PACK.get("dpo-loss")
ANSWERS = [b.answer for b in bl.find_blanks(EX.solution_source)]
SPEC_LOSS = 0.658981


@pytest.fixture(scope="module")
def grader(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("ALIGNLINGS_HOME", str(tmp_path_factory.mktemp("home")))
    with Grader(PACK, warm=True) as g:
        yield g
    mp.undo()


WALKER = r'''
import gc, os, sys, types
needles = [n[::-1] for n in NEEDLES]
found = []
def look(s):
    if isinstance(s, str):  # a text holding a needle, not a needle itself (an earlier walker's)
        found.extend(n for n in needles if n in s and s != n)
    elif isinstance(s, float) and abs(s - SPEC) < 1e-5 and s != SPEC:  # not its own constant
        found.append(repr(s))
def code(c):
    for k in c.co_consts:
        look(k)
        if isinstance(k, types.CodeType):
            code(k)
f = sys._getframe()
while f is not None:
    for v in list(f.f_locals.values()) + list(f.f_globals.values()):
        look(v)
    code(f.f_code)
    f = f.f_back
for o in gc.get_objects():
    if isinstance(o, dict):
        for v in list(o.values()):
            look(v)
    elif isinstance(o, (list, tuple)):
        for v in list(o):
            look(v)
    elif isinstance(o, types.CodeType):
        code(o)
    elif type(o).__name__ == "Tensor" and o.numel() < 100 and o.is_floating_point():
        for x in o.detach().flatten().tolist():
            look(x)
for m in list(sys.modules.values()):
    for v in list(getattr(m, "__dict__", {}).values()):
        look(v)
for v in os.environ.values():
    look(v)
for top in (".", "/tmp", os.path.expanduser("~")):
    try:
        names = os.listdir(top)
    except OSError:
        continue
    for name in names[:200]:
        try:
            with open(os.path.join(top, name), errors="replace") as fh:
                look(fh.read(1 << 20))
        except (OSError, ValueError):
            pass
if found:
    raise KeyError(repr(found)[:300])
'''


def _walker_fill(needles: list[str], fill: str) -> str:
    """``fill``, preceded by the walker (the needles reversed, so its own text does not hold them)."""
    code = WALKER.replace("NEEDLES", repr([n[::-1] for n in needles])).replace("SPEC", repr(SPEC_LOSS))
    return f"exec({code!r}, {{}}) or ({fill})"


WRONG = ["policy_chosen_logp - ref_rejected_logp", "policy_rejected_logp - ref_chosen_logp",
         "(chosen_implicit_r - rejected_implicit_r)", "-F.logsigmoid(margin).sum()"]


def _messages(verdict: dict) -> str:
    """What a verdict says (the learner's own fills, which hold the walker's text, left out)."""
    return json.dumps([b["message"] for b in verdict["blanks"]] + [c["message"] for c in verdict["cases"]]
                      + [verdict["error"], verdict["stdout"]])


def test_no_job_that_runs_learner_code_is_sent_reference_text(grader, monkeypatch):
    sent = []
    real = Grader._run

    def spy(self, target, payload, exercise, *, trusted=False):
        if target == grader_module.RUN_CASES:
            sent.append(json.dumps(payload))
        return real(self, target, payload, exercise, trusted=trusted)

    monkeypatch.setattr(Grader, "_run", spy)
    fills = list(ANSWERS)
    fills[1] = WRONG[1]
    verdict = grader.check("dpo-loss", fills=fills, run_main=False, variant=0)
    assert verdict["blanks"][1]["passed"] is False
    assert sent
    for payload in sent:
        code = json.loads(payload)["code"]
        assert ANSWERS[1] not in code
        # the other blanks' reference fills are the learner's own here: only where the learner wrote them
        assert code.count(ANSWERS[0]) == 1, "a job was sent the reference with the learner's fill spliced in"


@pytest.mark.parametrize("blank", [1, 4])
def test_a_walker_in_the_job_finds_no_reference_text_nor_value(grader, blank):
    fills = list(WRONG)
    fills[blank - 1] = _walker_fill(ANSWERS, WRONG[blank - 1])
    verdict = grader.check("dpo-loss", fills=fills, run_main=False, variant=0)
    said = _messages(verdict)
    assert "KeyError" not in said, said
    assert not verdict["passed"]


def test_the_walker_finds_a_text_that_is_there(grader):
    """The control: the learner's own wrong fill of blank 2 is in its job, and the walker finds it."""
    fills = list(WRONG)
    fills[0] = _walker_fill([WRONG[1]], WRONG[0])
    verdict = grader.check("dpo-loss", fills=fills, run_main=False, variant=0)
    assert "KeyError" in _messages(verdict)


def test_later_blanks_are_judged_exactly_after_an_earlier_wrong_one(grader):
    fills = list(ANSWERS)
    fills[1] = WRONG[1]
    fills[3] = "-F.logsigmoid(margin).mean() * 1.5"
    verdict = grader.check("dpo-loss", fills=fills, run_main=False, variant=0)
    assert [b["passed"] for b in verdict["blanks"]] == [True, False, True, False]
    assert verdict["blanks"][1]["misconception"] == "rejected-uses-chosen-ref"


PAGE_FILE = '''import torch
import torch.nn.functional as F


def dpo_loss(policy_chosen_logp, policy_rejected_logp,
             ref_chosen_logp, ref_rejected_logp,
             beta=0.1):
    """DPO loss of a batch of preference pairs.

    margin = beta * (chosen_implicit_r - rejected_implicit_r)
    """
    chosen_implicit_r = policy_chosen_logp - ref_chosen_logp
    rejected_implicit_r = policy_rejected_logp - ref_chosen_logp
    margin = beta * (chosen_implicit_r - rejected_implicit_r)
    loss = -F.logsigmoid(margin).mean()
    return loss


# test
policy_chosen = torch.tensor([-23.41, -9.85, -17.62, -12.07])
policy_rejected = torch.tensor([-25.30, -8.71, -16.94, -13.85])
ref_chosen = torch.tensor([-22.96, -10.12, -17.40, -12.45])
ref_rejected = torch.tensor([-23.88, -9.04, -16.71, -12.30])
loss = dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1)
print(f"DPO Loss: {loss.item():.4f}")
'''


def test_the_original_pages_file_gets_a_per_blank_verdict(grader):
    verdict = grader.check("dpo-loss", PAGE_FILE, run_main=False, variant=0)
    blanks = verdict["blanks"]
    assert [b["passed"] for b in blanks] == [True, False, True, True], [b["message"] for b in blanks]
    assert blanks[1]["misconception"] == "rejected-uses-chosen-ref"
    assert blanks[1]["fill"] == "policy_rejected_logp - ref_chosen_logp"
    right = grader.check("dpo-loss", PAGE_FILE.replace("rejected_logp - ref_chosen", "rejected_logp - ref_rejected"),
                         run_main=False, variant=0)
    assert right["passed"] and all(b["passed"] for b in right["blanks"])


TOY_GRPO_FORGERY = '''
import gc

from alignlings.content.checks import Case

for case in [o for o in gc.get_objects() if isinstance(o, Case)]:
    if case.name.startswith("training"):
        case.run = lambda m: 0.99  # "P('a') after training", as the predicate wanted it
'''


def test_a_toy_grpo_file_that_replaces_the_case_functions_fails(grader):
    """Issue 29 §1: the training case's pass was decided from a number the learner's process
    reported; it now returns the policy's weights and P("a") is measured on the trusted side."""
    verdict = grader.check("toy-grpo", TOY_GRPO_FORGERY, run_main=False, variant=0)
    training = next(c for c in verdict["cases"] if c["name"].startswith("training"))
    assert training["passed"] is False, training
    assert not verdict["passed"]


def test_the_toy_grpo_reference_still_trains(grader):
    """The control: the reference's own weights, measured on the trusted side, pass."""
    from alignlings.grading.grader import solution_for

    ex = PACK.get("toy-grpo")
    verdict = grader.check("toy-grpo", solution_for(ex), run_main=False, variant=0)
    training = next(c for c in verdict["cases"] if c["name"].startswith("training"))
    assert training["passed"], training["message"]
    assert verdict["passed"]


TOY_GRPO_SUMMARY_FORGERY = '''
import gc

from alignlings.content.checks import Case

SUMMARY = {"shape": [4000], "default G": [32], "dtype": "int64", "ids in 0..9": True,
           "old_lp is log pi_old at the samples": True, "frequencies follow pi_old": True,
           "old_lp has no gradient": True, "rewards are 1 for 'a', 0 otherwise": True, "mean old_lp": -2.0}
SYNCED = {"old is a separate model": True, "old equals policy after an iteration": True,
          "ref is still the initial model": True}
for case in [o for o in gc.get_objects() if isinstance(o, Case)]:
    if case.name.startswith("sample_group"):
        case.run = lambda m: SUMMARY  # the group summary, as the predicate wanted it
    elif case.name.startswith("train: old is synced"):
        case.run = lambda m: SYNCED  # "old is synced", as the reference reports it
    case.expect = lambda value: (True, "")  # and the predicates too: they are judged elsewhere
'''


def test_a_toy_grpo_file_that_forges_the_group_summary_and_the_sync_fails(grader):
    """Issue 29 §1: the sampling case's pass was decided from a summary the learner's process
    computed, and the sync case from three booleans it reported; both now return what the code
    produced (the samples, the models' weights) and the trusted side measures."""
    verdict = grader.check("toy-grpo", TOY_GRPO_SUMMARY_FORGERY, run_main=False, variant=0)
    cases = {c["name"]: c for c in verdict["cases"]}
    sampling = next(c for n, c in cases.items() if n.startswith("sample_group"))
    sync = next(c for n, c in cases.items() if n.startswith("train: old is synced"))
    assert sampling["passed"] is False, sampling
    assert sync["passed"] is False, sync
    assert not verdict["passed"]


TOY_DPO_FORGERY = TOY_GRPO_FORGERY  # the same file: toy DPO's training case also judged a reported P("a")


def test_a_toy_dpo_file_that_replaces_the_case_functions_fails(grader):
    """Issue 29 §1: toy DPO's training case passed on the P("a") the learner's process reported; it
    now returns the policy's weights and P("a") is measured on the trusted side."""
    verdict = grader.check("toy-dpo", TOY_DPO_FORGERY, run_main=False, variant=0)
    training = next(c for c in verdict["cases"] if c["name"].startswith("training"))
    assert training["passed"] is False, training
    assert not verdict["passed"]


def test_the_toy_dpo_reference_still_trains(grader):
    """The control: the reference's own weights, measured on the trusted side, pass."""
    from alignlings.grading.grader import solution_for

    verdict = grader.check("toy-dpo", solution_for(PACK.get("toy-dpo")), run_main=False, variant=0)
    training = next(c for c in verdict["cases"] if c["name"].startswith("training"))
    assert training["passed"], training["message"]
    assert verdict["passed"]


TOY_PPO_FORGERY = '''
import gc

from alignlings.content.checks import Case

for case in [o for o in gc.get_objects() if isinstance(o, Case)]:
    if case.name.startswith("training"):
        case.run = lambda m: (0.99, 0.99, 0.7, 0.7)  # P("aaaa"), the score, the critic and its target
    case.expect = lambda value: (True, "")  # and the predicates too: they are judged elsewhere
'''


def test_a_toy_ppo_file_that_replaces_the_case_functions_fails(grader):
    """Issue 29 §1: toy PPO's training case passed on P("aaaa"), the score and the critic's numbers the
    learner's process reported; it now returns the policy's and the critic's weights and the trusted
    side measures them on fresh batches."""
    verdict = grader.check("toy-ppo", TOY_PPO_FORGERY, run_main=False, variant=0)
    training = next(c for c in verdict["cases"] if c["name"].startswith("training"))
    assert training["passed"] is False, training
    assert not verdict["passed"]


def test_the_toy_ppo_reference_still_trains(grader):
    """The control: the reference's own weights, measured on the trusted side, pass."""
    from alignlings.grading.grader import solution_for

    verdict = grader.check("toy-ppo", solution_for(PACK.get("toy-ppo")), run_main=False, variant=0)
    training = next(c for c in verdict["cases"] if c["name"].startswith("training"))
    assert training["passed"], training["message"]
    assert verdict["passed"]


def test_a_detached_fill_is_wrong_though_its_value_is_right(grader):
    """Values alone would call it right: the gradient recorded with each occurrence tells."""
    fills = list(ANSWERS)
    fills[3] = "-F.logsigmoid(margin.detach()).mean()"
    verdict = grader.check("dpo-loss", fills=fills, run_main=False, variant=0)
    assert [b["passed"] for b in verdict["blanks"]] == [True, True, True, False], verdict["blanks"]


def test_a_blank_in_a_loop_is_judged_on_every_occurrence():
    """Record and judge in this process (no sandbox): a fill right on the first iteration only."""
    from alignlings.grading import casejob, instrument

    source = "def f(xs):\n    out = []\n    for x in xs:\n        y = x * 2  # BLANK\n        out.append(y)\n" \
             "    return out\n"
    blanks = bl.find_blanks(source)
    learner = source.replace("x * 2  # BLANK", "x * 2 if x < 1 else x * 3")
    located = instrument.locate(learner, source, blanks)
    assert located is not None and located.fills[1] == "x * 2 if x < 1 else x * 3"
    recorder = __import__("alignlings.grading.record", fromlist=["Recorder"]).Recorder()
    module = casejob.load_module(learner, recorder=recorder, sites=located.sites)
    recorder.case = "loop"
    module.f([0.5, 1.5, 2.5])
    assert len(recorder.records) == 3
    results = casejob.judge_blanks({"reference": bl.reference(source, blanks),
                                    "blanks": {"1": {"fill": "x * 2", "miscs": {"triple": "x * 3"}}},
                                    "records": recorder.records})["results"]
    judged = instrument.judge(1, recorder.records, results, rtol=1e-6, atol=1e-9)
    assert judged.passed is False and judged.occurrences == 3
    assert judged.misconception is None  # "x * 3" is wrong on the first occurrence, where the learner is right


def _judge_here(source: str, learner: str, miscs: dict[int, dict[str, str]] | None = None, call=None):
    """Record ``learner`` (located against ``source``) in this process, judge every blank on the
    trusted side as the grader does; returns {blank: Judged}."""
    from alignlings.grading import casejob, instrument, record

    blanks = bl.find_blanks(source)
    located = instrument.locate(learner, source, blanks)
    assert located is not None
    recorder = record.Recorder()
    module = casejob.load_module(learner, recorder=recorder, sites=located.sites)
    recorder.case = "here"
    call(module)
    recorder.end_case(None)
    records = json.loads(json.dumps(recorder.records))  # as data, the way it crosses the boundary
    spec = {str(b.index): {"fill": b.answer, "miscs": (miscs or {}).get(b.index, {})} for b in blanks}
    results = casejob.judge_blanks({"reference": bl.reference(source, blanks), "blanks": spec,
                                    "records": records})["results"]
    return {b.index: instrument.judge(b.index, records, results, rtol=1e-6, atol=1e-7) for b in blanks}


STATEMENT = '''import torch
def shape(rewards, scores, last):
    rewards = rewards.clone()
    rewards[torch.arange(len(scores)), last] += scores  # BLANK: stmt
    return rewards
'''


def test_a_statement_blank_is_judged_by_what_it_leaves_in_scope():
    """Issue 29 §1: a statement blank is recorded before and after it runs; the reference statement
    runs on the recorded scope on the trusted side and the names it touches are compared."""
    def call(m):
        m.shape(torch.zeros(3, 4), torch.tensor([1.0, 2.0, 3.0]), torch.tensor([3, 1, 2]))

    import torch

    right = STATEMENT.replace("rewards[torch.arange(len(scores)), last] += scores  # BLANK: stmt",
                              "rewards[range(3), last] = rewards[range(3), last] + scores")
    assert _judge_here(STATEMENT, right, call=call)[1].passed is True
    wrong = STATEMENT.replace("rewards[torch.arange(len(scores)), last] += scores  # BLANK: stmt",
                              "rewards[:, -1] += scores")
    judged = _judge_here(STATEMENT, wrong, {1: {"last-column": "rewards[:, -1] += scores"}}, call=call)[1]
    assert judged.passed is False and judged.misconception == "last-column"
    assert "rewards" in judged.failed["diff"]["path"]


MODEL = '''import torch
import torch.nn as nn
class Head(nn.Module):
    def __init__(self, backbone, hidden):
        super().__init__()
        self.backbone = backbone  # BLANK
        for p in self.backbone.parameters():
            p.requires_grad = False  # BLANK: stmt
        self.head = nn.Linear(hidden, 1)  # BLANK
    def forward(self, ids):
        h = self.backbone(ids)  # BLANK
        return self.head(h[:, -1]).squeeze(-1)  # BLANK
'''


def test_models_in_scope_are_sent_as_data():
    """A torch.nn model (allowlisted classes), an object of the learner's own class (a bare module
    with its children and parameters) and a freshly initialised layer (torch's random state) are
    rebuilt on the trusted side: every blank of a small reward model is judged on its own."""
    import torch

    def call(m):
        torch.manual_seed(0)
        backbone = torch.nn.Sequential(torch.nn.Embedding(20, 8), torch.nn.Linear(8, 8), torch.nn.GELU())
        m.Head(backbone, 8)(torch.randint(0, 20, (2, 5)))

    judged = _judge_here(MODEL, MODEL, call=call)
    assert all(j.passed is True for j in judged.values()), judged
    wrong = MODEL.replace("p.requires_grad = False  # BLANK: stmt", "p.requires_grad = True") \
        .replace("nn.Linear(hidden, 1)  # BLANK", "nn.Linear(hidden, hidden)")
    judged = _judge_here(MODEL, wrong, {2: {"not-frozen": "p.requires_grad = True"},
                                        3: {"wide": "nn.Linear(hidden, hidden)"}}, call=call)
    assert (judged[2].passed, judged[2].misconception) == (False, "not-frozen")
    assert (judged[3].passed, judged[3].misconception) == (False, "wide")
    assert judged[1].passed is True


def test_a_scalar_carries_its_graph_as_data():
    """``torch.autograd.grad(loss, x)`` on the trusted side needs the learner's graph: a scalar in
    scope is sent with its gradient with respect to each leaf in scope, and rebuilt as its value
    plus that first-order term."""
    import torch

    source = '''import torch
def weights(mask):
    x = torch.zeros(mask.shape, dtype=torch.float64, requires_grad=True)
    loss = (x * mask).sum() / mask.sum()
    return torch.autograd.grad(loss, x)[0]  # BLANK
'''
    def call(m):
        m.weights(torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]], dtype=torch.float64))

    assert _judge_here(source, source, call=call)[1].passed is True
    wrong = source.replace("torch.autograd.grad(loss, x)[0]  # BLANK", "mask / mask.numel()")
    assert _judge_here(source, wrong, call=call)[1].passed is False


@pytest.fixture(scope="module")
def both_packs(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("ALIGNLINGS_HOME", str(tmp_path_factory.mktemp("home2")))
    with Grader(load_pack(), warm=True) as g:
        yield g
    mp.undo()


@pytest.mark.parametrize("exercise,blank,misconception", [
    ("reward-model", 2, "backbone-not-frozen"),  # a statement, with an object of the learner's class in scope
    ("reward-model", 3, "value-head-wrong-size"),  # a model built by the fill
    ("ppo-value-and-kl", 4, None),  # a statement that changes a tensor in place
    ("toy-grpo", 8, "sync-forgotten"),  # a statement on two transformers models
    ("toy-grpo", 8, "sync-rebinds-old"),  # fails before its blank is reached: named by behaviour
    ("grpo-aggregation", 5, None),  # autograd through the learner's own loss
])
def test_blanks_once_spliced_are_judged_from_the_learners_run_alone(both_packs, monkeypatch, exercise, blank,
                                                                    misconception):
    """The blanks that were judged by splicing the learner's fill into the reference (statements,
    models or the learner's own class in scope, a loss's graph) are judged from the learner's own
    run: a check runs exactly one job with learner code, and the verdict still names the blank and
    its misconception."""
    ex = both_packs.pack.get(exercise)
    blanks = both_packs.blanks(ex)
    if misconception is None:
        m = next(m for m in ex.misconceptions if m.blank == blank)
        misconception = m.id
    fill = next(m.fill for m in ex.misconceptions if m.id == misconception)
    jobs = []
    real = Grader._run

    def spy(self, target, payload, exercise_, *, trusted=False):
        if not trusted:
            jobs.append(target)
        return real(self, target, payload, exercise_, trusted=trusted)

    monkeypatch.setattr(Grader, "_run", spy)
    fills = [fill if b.index == blank else b.answer for b in blanks]
    verdict = both_packs.check(exercise, fills=fills, run_main=False, quick=True, variant=0)
    assert jobs == [grader_module.RUN_CASES], jobs
    entry = verdict["blanks"][blank - 1]
    assert entry["passed"] is False and entry["misconception"] == misconception, entry
    assert all(b["passed"] is True for b in verdict["blanks"] if b["index"] != blank), verdict["blanks"]


@pytest.mark.slow
def test_every_blank_of_both_packs_is_judged_from_the_learners_run(both_packs):
    """No blank of the built-in packs falls back to the cases alone (``dev check`` says the same
    per exercise): every reference fill, evaluated on the reference's own recorded scopes, gives
    back the recorded values."""
    missing = {ex.id: sorted({b.index for b in both_packs.blanks(ex)} - both_packs.trusted(ex).recorded)
               for ex in both_packs.pack.fill_exercises()}
    assert not {k: v for k, v in missing.items() if v}
