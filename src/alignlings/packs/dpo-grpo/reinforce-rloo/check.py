"""Cases for reinforce-rloo: the spec's rewards, the loss and its gradient with padding, other group
layouts, G = 2, flat groups, and the exact expected gradient on a 3-answer bandit."""

from alignlings.content.checks import Case


def cases():
    import torch

    def spec_advantages(m):
        rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.9, 0.1, 0.5, 0.5])
        return m.rloo_advantages(rewards, 4)

    def loss_case(seed, P, G, T):
        def run(m):
            g = torch.Generator().manual_seed(seed)
            B = P * G
            rewards = torch.rand(B, generator=g)
            per_token = -(torch.rand(B, T, generator=g) * 3 + 0.05)
            lengths = torch.randint(1, T + 1, (B,), generator=g)
            mask = (torch.arange(T).expand(B, T) < lengths[:, None]).float()
            per_token = per_token + (1 - mask) * 7.0  # garbage on padding
            per_token.requires_grad_(True)
            advantages = m.rloo_advantages(rewards, G)
            loss = m.reinforce_loss(per_token, mask, advantages)
            return advantages, loss.detach(), torch.autograd.grad(loss, per_token)[0]
        return run

    def layout(m):
        # P = G = 3: grouping by rows or by columns gives different, equally shaped answers
        rewards = torch.tensor([0.0, 1.0, 2.0, 10.0, 11.0, 15.0, -1.0, -3.0, -2.0])
        return m.rloo_advantages(rewards, 3)

    def two_per_group(m):
        rewards = torch.tensor([0.2, 0.9, 0.5, 0.5, -1.0, 1.0])
        return m.rloo_advantages(rewards, 2)

    def exact_gradient(m):
        theta = torch.tensor([0.3, -0.2, 0.1], requires_grad=True)
        reward_of = torch.tensor([1.0, 0.0, 0.5])
        logp = torch.log_softmax(theta, dim=0)
        expected = torch.zeros(3)
        for idx in torch.cartesian_prod(torch.arange(3), torch.arange(3), torch.arange(3)):  # all 27 groups
            prob = logp.detach()[idx].exp().prod()
            loss = m.reinforce_loss(logp[idx].unsqueeze(1), torch.ones(3, 1), m.rloo_advantages(reward_of[idx], 3))
            expected = expected + prob * torch.autograd.grad(loss, theta, retain_graph=True)[0]
        return expected

    return [
        Case("spec rewards: P=2 prompts, G=4", "visible", spec_advantages, label={"zh": "题目奖励：P=2 个 prompt，G=4"}),
        Case("exact expected gradient on the 3-answer bandit (G=3)", "visible", exact_gradient,
             label={"zh": "3 个答案的 bandit 上精确的期望梯度（G=3）"}, note={
            "en": "With the leave-one-out baseline the expected gradient equals the gradient of -E[r] "
                  "exactly; a baseline that contains the sample itself shrinks it by (G-1)/G.",
            "zh": "用留一基线时，期望梯度恰好等于 -E[r] 的梯度；基线里包含样本自身时，它会缩小为 (G-1)/G 倍。"}),
        Case("P=3, G=5, T=8 with padding: advantages, loss, gradient", "hidden", loss_case(1, 3, 5, 8),
             label={"zh": "P=3, G=5, T=8，含 padding：优势、损失与梯度"}),
        Case("P=2, G=8, T=4", "hidden", loss_case(2, 2, 8, 4), label={"zh": "P=2, G=8, T=4"}),
        Case("P = G = 3: which rewards form a group", "hidden", layout, label={"zh": "P = G = 3：哪些奖励属于同一组"},
             note={"en": "The G completions of one prompt are consecutive: rows of a [P, G] view.",
                   "zh": "同一个 prompt 的 G 个回答是相邻的：对应 [P, G] 视图中的一行。"}),
        Case("G = 2: the baseline is the other completion", "edge", two_per_group,
             label={"zh": "G = 2：基线就是另一个回答"}),
    ]
