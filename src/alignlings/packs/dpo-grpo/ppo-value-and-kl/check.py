"""Cases for ppo-value-and-kl: the spec's rewards and value loss, random padded batches (left, right,
full rows) with gradients, one-token completions, values far from the old ones."""

from alignlings.content.checks import Case


def cases():
    import torch

    def spec_reward_inputs():
        scores = torch.tensor([2.0, 3.0])
        logps = torch.tensor([[-1.0, -2.0, -3.0, -0.5], [-0.5, -1.0, -2.0, -3.0]])
        ref_logps = torch.tensor([[-1.1, -1.8, -3.0, -0.1], [-0.1, -1.1, -1.8, -3.0]])
        mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [0.0, 1.0, 1.0, 1.0]])
        return scores, logps, ref_logps, mask

    def spec_rewards(m):
        return m.kl_shaped_rewards(*spec_reward_inputs(), kl_coef=0.5)

    def spec_value_loss(m):
        values = torch.tensor([[0.5, 0.5, 0.5, 9.0], [9.0, 0.1, 0.9, 0.0]], requires_grad=True)
        old_values = torch.tensor([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
        returns = torch.tensor([[1.0, 0.0, 0.45, 0.0], [0.0, 0.5, 1.5, 1.0]])
        loss = m.ppo_value_loss(values, old_values, returns, spec_reward_inputs()[3])
        return loss.detach(), torch.autograd.grad(loss, values)[0]

    def padded_mask(g, B, T, left):
        lengths = torch.randint(1, T, (B,), generator=g)  # every row has padding
        pos = torch.arange(T).expand(B, T)
        return ((pos >= T - lengths[:, None]) if left else (pos < lengths[:, None])).float()

    def random_rewards(seed, B, T, left, kl_coef=0.05):
        def run(m):
            g = torch.Generator().manual_seed(seed)
            logps = -torch.rand(B, T, generator=g) * 4
            ref_logps = logps + torch.randn(B, T, generator=g) * 0.5
            scores = torch.randn(B, generator=g) * 2
            return m.kl_shaped_rewards(scores, logps, ref_logps, padded_mask(g, B, T, left), kl_coef=kl_coef)
        return run

    def random_value_loss(seed, B, T, spread, clip_range_value=0.2):
        def run(m):
            g = torch.Generator().manual_seed(seed)
            old_values = torch.randn(B, T, generator=g)
            values = (old_values + torch.randn(B, T, generator=g) * spread).requires_grad_(True)
            returns = old_values + torch.randn(B, T, generator=g)
            mask = padded_mask(g, B, T, False)
            loss = m.ppo_value_loss(values, old_values, returns, mask, clip_range_value)
            return loss.detach(), torch.autograd.grad(loss, values)[0]
        return run

    def one_token(m):
        scores = torch.tensor([1.5, -2.0])
        logps = torch.tensor([[-0.3, -9.0, -9.0], [-9.0, -9.0, -0.7]])
        ref_logps = torch.tensor([[-0.6, -1.0, -1.0], [-1.0, -1.0, -0.2]])
        mask = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
        return m.kl_shaped_rewards(scores, logps, ref_logps, mask, kl_coef=0.1)

    return [
        Case("spec rewards: right- and left-padded rows", "visible", spec_rewards,
             label={"zh": "题目中的奖励：右侧与左侧 padding 的两行"}),
        Case("spec value loss and its gradient", "visible", spec_value_loss,
             label={"zh": "题目中的价值损失及其梯度"}),
        Case("B=5, T=8, right padding, kl_coef 0.05", "hidden", random_rewards(1, 5, 8, False),
             label={"zh": "B=5, T=8，右侧 padding，kl_coef 0.05"}, note={
            "en": "With right padding the position after the last real token is padding: a score placed at "
                  "index = length lands there, on a token that was never generated (TRL's p1 convention, "
                  "disputed in issue #3750). Here it belongs on the last real token.",
            "zh": "右侧 padding 时，最后一个真实 token 之后的位置就是 padding：放在 index = length 处的得分会落到那里，"
                  "落在一个从未生成过的 token 上（TRL 的 p1 约定，issue #3750 对此有争议）。这里它应放在最后一个真实 token 上。"}),
        Case("B=4, T=6, left padding, kl_coef 0.2", "hidden", random_rewards(2, 4, 6, True, kl_coef=0.2),
             label={"zh": "B=4, T=6，左侧 padding，kl_coef 0.2"}, note={
            "en": "With left padding every row ends at the last position, and length - 1 points into the middle "
                  "(TRL issue #2778).",
            "zh": "左侧 padding 时每行都在最后一个位置结束，length - 1 则指向序列中间（TRL issue #2778）。"}),
        Case("value loss B=4, T=7: loss and gradient", "hidden", random_value_loss(3, 4, 7, 0.3),
             label={"zh": "价值损失，B=4, T=7：损失与梯度"}),
        Case("value loss, clip_range_value 0.5, values far from the old ones", "hidden",
             random_value_loss(4, 3, 9, 1.5, clip_range_value=0.5),
             label={"zh": "价值损失，clip_range_value 0.5，values 离旧值很远"}),
        Case("one-token completions", "edge", one_token, label={"zh": "只有一个 token 的回答"}),
    ]
