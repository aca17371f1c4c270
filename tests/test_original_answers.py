"""The original practice page's answers paste into our templates verbatim and pass, and its test
scripts run unchanged against our solutions (shared/spec/original-answers.md).

1. Every blank filled with the page's answer, graded by the real grader: the verdict passes and
   every blank is marked right (toy-grpo's training runs too, so that case is marked slow).
2. The page's test script, appended to our template filled with the page's answers, as the page has
   it in the same cell, prints the page's figures (DPO Loss: 0.6590, GRPO Loss: 1.1845, A[7] 6.43,
   trainable 65 of 10625 parameters).
"""

from __future__ import annotations

import contextlib
import io

import pytest

torch = pytest.importorskip("torch")

from alignlings.content import blanks as bl  # noqa: E402
from alignlings.grading.grader import Grader  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402

PACK = load_pack()

# the page's answers, blank by blank, verbatim (original-answers.md)
PAGE_ANSWERS = {
    "dpo-loss": [
        "policy_chosen_logp - ref_chosen_logp",
        "policy_rejected_logp - ref_rejected_logp",
        "beta * (chosen_implicit_r - rejected_implicit_r)",
        "-F.logsigmoid(margin).mean()",
    ],
    "grpo-advantages": ["(group_rewards - group_rewards.mean()) / (group_rewards.std() + eps)"],
    "grpo-loss": [
        "advantage.unsqueeze(dim=1)",
        "torch.exp(pi_logprob - pi_old_logprob)",
        "torch.clamp(ratio, 1 - epsilon, 1 + epsilon)",
        "torch.minimum(ratio * advantage, ratio_clip * advantage)",
        "approx_kl(pi_logprob, pi_ref_logprob)",
    ],
    "reward-model": [
        "backbone",
        "param.requires_grad_(False)",
        "nn.Linear(hidden_dim, 1)",
        "self.backbone(input_ids)",
        "hidden_states[:, -1, :]",
        "self.value_head(last_hidden).squeeze(-1)",
        "-F.logsigmoid(reward_chosen - reward_rejected).mean()",
    ],
    "toy-grpo": [
        "old(prompt_id).logits[0, -1]",
        "torch.multinomial(probs, num_samples=G, replacement=True).squeeze(0)",
        "F.log_softmax(logits, dim=-1)[samples]",
        "(rewards - rewards.mean()) / (rewards.std() + 1e-8)",
        "(new_lp - old_lp).exp()",
        "torch.minimum(unclipped, clipped)",
        "log_r.exp() - log_r - 1",
        "old.load_state_dict(policy.state_dict())",
    ],
}

# the page's test scripts, as described in original-answers.md; each runs after the exercise's code
PAGE_SCRIPTS = {
    "dpo-loss": """
policy_chosen = torch.tensor([-23.41, -9.85, -17.62, -12.07])
policy_rejected = torch.tensor([-25.30, -8.71, -16.94, -13.85])
ref_chosen = torch.tensor([-22.96, -10.12, -17.40, -12.45])
ref_rejected = torch.tensor([-23.88, -9.04, -16.71, -12.30])
loss = dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1)
print(f"DPO Loss: {loss.item():.4f}")
""",
    "grpo-advantages": """
for rewards in ([0.83, 0.41, 0.95, 0.27, 0.62, 0.09, 0.51, 0.78], [0.5] * 8,
                [0.10, 0.12, 0.85, 0.08, 0.15, 0.11, 0.09, 0.13]):
    print(compute_grpo_advantages(rewards))
rewards = torch.zeros(128)
rewards[7] = rewards[53] = rewards[91] = 1.0
A = compute_grpo_advantages(rewards)
print(f"A[7] = {A[7].item():.2f}")
print(f"A[0] = {A[0].item():.2f}")
""",
    "grpo-loss": """
def compute_grpo_advantages(group_rewards, eps=1e-4):
    group_rewards = torch.as_tensor(group_rewards, dtype=torch.float)
    return (group_rewards - group_rewards.mean()) / (group_rewards.std() + eps)

torch.manual_seed(42)
group_size, seq_len, vocab = 4, 8, 50
pi_logits = torch.randn(group_size, seq_len, vocab)
old_logits = torch.randn(group_size, seq_len, vocab)
ref_logits = torch.randn(group_size, seq_len, vocab)
token_ids = torch.randint(0, vocab, (group_size, seq_len))
pi_logprob = torch.log_softmax(pi_logits, dim=-1).gather(-1, token_ids.unsqueeze(-1)).squeeze(-1)
pi_old_logprob = torch.log_softmax(old_logits, dim=-1).gather(-1, token_ids.unsqueeze(-1)).squeeze(-1)
pi_ref_logprob = torch.log_softmax(ref_logits, dim=-1).gather(-1, token_ids.unsqueeze(-1)).squeeze(-1)
advantage = compute_grpo_advantages([0.7, 0.2, 0.4, 0.85])
loss = grpo_loss(pi_logprob, pi_old_logprob, pi_ref_logprob, advantage, input_len=3)
print(f"GRPO Loss: {loss.item():.4f}")
""",
    "reward-model": """
class SimpleBackbone(nn.Module):
    def __init__(self, vocab_size, hidden_dim, seq_len):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, hidden_dim)
        self.linear = nn.Linear(hidden_dim, hidden_dim)

    def forward(self, input_ids):
        return F.gelu(self.linear(self.embedding(input_ids)))

torch.manual_seed(42)
vocab_size, hidden_dim, seq_len = 100, 64, 10
backbone = SimpleBackbone(vocab_size, hidden_dim, seq_len)
reward_model = RewardModel(backbone, hidden_dim)
chosen_ids = torch.randint(0, vocab_size, (4, seq_len))
rejected_ids = torch.randint(0, vocab_size, (4, seq_len))
r_chosen = reward_model(chosen_ids)
r_rejected = reward_model(rejected_ids)
loss = reward_model.compute_preference_loss(r_chosen, r_rejected)
print(f"loss: {loss.item():.4f}")
trainable = sum(p.numel() for p in reward_model.parameters() if p.requires_grad)
total = sum(p.numel() for p in reward_model.parameters())
print(f"trainable: {trainable}, total: {total}")
""",
}


def _page_fills(eid: str) -> list[str]:
    fills = PAGE_ANSWERS[eid]
    assert len(fills) == len(bl.find_blanks(PACK.get(eid).solution_source)), eid
    return fills


@pytest.fixture(scope="module")
def grader():
    with Grader(PACK, warm=True) as g:
        yield g


@pytest.mark.parametrize("eid", [pytest.param(e, marks=[pytest.mark.slow] if e == "toy-grpo" else [])
                                 for e in PAGE_ANSWERS])
def test_page_answers_pass_verbatim(grader, eid):
    v = grader.check(eid, fills=_page_fills(eid), run_main=False)
    assert v["passed"], ([c["message"] for c in v["cases"] if not c["passed"]],
                         [(b["index"], b["message"]) for b in v["blanks"] if b["passed"] is not True], v["error"])
    assert all(b["passed"] is True for b in v["blanks"])


def test_toy_accepts_model_in_blank_one_and_trl_eps(grader):
    """The page says old(...) where the function receives model; exercise 3's eps (1e-4) is also right."""
    fills = list(_page_fills("toy-grpo"))
    fills[0] = "model(prompt_id).logits[0, -1]"
    fills[3] = "(rewards - rewards.mean()) / (rewards.std() + 1e-4)"
    v = grader.check("toy-grpo", fills=fills, run_main=False)
    assert all(b["passed"] is True for b in v["blanks"]), [b["message"] for b in v["blanks"]]


def _run_page_script(eid: str) -> str:
    ex = PACK.get(eid)
    source = ex.solution_source
    blanks = bl.find_blanks(source)
    code = bl.render(source, blanks, dict(enumerate(_page_fills(eid), start=1)))
    code = code[: code.index('if __name__ == "__main__":')]  # the page's script replaces our own
    out = io.StringIO()
    namespace = {"__name__": "page"}
    with contextlib.redirect_stdout(out):
        exec(compile(code + PAGE_SCRIPTS[eid], f"{eid}.py", "exec"), namespace)  # noqa: S102 - pack code
    return out.getvalue()


def test_page_script_dpo_loss():
    assert "DPO Loss: 0.6590" in _run_page_script("dpo-loss")


def test_page_script_grpo_advantages():
    out = _run_page_script("grpo-advantages")
    assert "A[7] = 6.43" in out and "A[0] = -0.15" in out


def test_page_script_grpo_loss():
    assert "GRPO Loss: 1.1845" in _run_page_script("grpo-loss")


def test_page_script_reward_model():
    out = _run_page_script("reward-model")
    assert "trainable: 65, total: 10625" in out
    assert "loss: " in out


@pytest.mark.slow
def test_page_toy_training_reaches_the_target():
    """The toy's own loop, with the page's answers: P(a) from about 0.1 to above 0.7."""
    ex = PACK.get("toy-grpo")
    source = ex.solution_source
    code = bl.render(source, bl.find_blanks(source), dict(enumerate(_page_fills("toy-grpo"), start=1)))
    namespace = {"__name__": "page"}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with contextlib.redirect_stdout(io.StringIO()) as out:
            exec(compile(code, "toy_grpo.py", "exec"), namespace)  # noqa: S102 - pack code
            history = namespace["train"](log_every=10)
    finally:
        torch.set_num_threads(threads)
    assert 0.05 < history[0] < 0.15
    assert history[-1] > 0.7
    assert out.getvalue().count("P(a) = ") == 4  # every 10 of the 40 iterations


PAGE_LOOP = '''
# the original page's loop, at module level: no train() function
for it in range(40):
    samples, old_lp, rewards = sample_group(old, G=32)
    adv = grpo_advantage(rewards)
    for _ in range(2):
        loss = grpo_step(samples, old_lp, adv)
        opt.zero_grad()
        loss.backward()
        opt.step()
    old.load_state_dict(policy.state_dict())
    if it % 10 == 0:
        print(f"iter {it}: P(a) = {p_target():.3f}")
'''


def _page_whole_file() -> str:
    ex = PACK.get("toy-grpo")
    source = ex.solution_source
    code = bl.render(source, bl.find_blanks(source), dict(enumerate(_page_fills("toy-grpo"), start=1)))
    return code[: code.index("def train(")] + PAGE_LOOP


@pytest.mark.slow
def test_page_whole_file_with_its_loop_at_module_level_grades(grader):
    """Issue 21 §4: the page's toy GRPO file trains at import and defines no train(); graded as a learner's
    whole file, the sync and training cases inspect the models its loop trained."""
    code = _page_whole_file()
    assert "def train(" not in code
    v = grader.check("toy-grpo", code, run_main=False)
    assert v["passed"], ([c["message"] for c in v["cases"] if not c["passed"]], v["error"])
    names = {c["name"] for c in v["cases"]}
    assert "training: P('a') after 40 iterations" in names and "train: old is synced from policy after each iteration" in names


@pytest.mark.slow
def test_page_whole_file_without_the_sync_fails_the_sync_case(grader):
    code = _page_whole_file().replace("    old.load_state_dict(policy.state_dict())\n", "")
    v = grader.check("toy-grpo", code, run_main=False)
    failed = {c["name"] for c in v["cases"] if not c["passed"]}
    assert "train: old is synced from policy after each iteration" in failed
