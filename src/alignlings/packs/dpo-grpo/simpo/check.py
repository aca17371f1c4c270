"""Cases for the simpo exercise: the statement's pairs, random padded batches, a long and a short
answer with the same per-token log-probs, gradients (padding gets none), underflow and an empty
completion."""

from alignlings.content.checks import Case


def cases():
    import torch

    CHOSEN = torch.tensor([[-0.5, -0.7, 0.0, 0.0], [-0.2, -0.4, -0.3, -0.5]])
    CHOSEN_MASK = torch.tensor([[1.0, 1, 0, 0], [1, 1, 1, 1]])
    REJECTED = torch.tensor([[-0.9, -1.1, -0.8, -1.2], [-1.6, 0.0, 0.0, 0.0]])
    REJECTED_MASK = torch.tensor([[1.0, 1, 1, 1], [1, 0, 0, 0]])

    def padded(g, B, T):
        lengths = torch.randint(1, T + 1, (B,), generator=g)
        mask = (torch.arange(T) < lengths[:, None]).float()  # [B, T]
        logps = -torch.rand(B, T, generator=g) * 3 - 5 * (1 - mask)  # padding holds garbage
        return logps, mask

    def random_batch(seed, B, T, beta, gamma):
        def run(m):
            g = torch.Generator().manual_seed(seed)
            c, cm = padded(g, B, T)
            r, rm = padded(g, B, T)
            return m.simpo_loss(c, cm, r, rm, beta, gamma)
        return run

    def averages(m):
        g = torch.Generator().manual_seed(4)
        logps, mask = padded(g, 6, 9)
        return m.average_logps(logps, mask)

    def spec(m):
        return (m.average_logps(CHOSEN, CHOSEN_MASK), m.average_logps(REJECTED, REJECTED_MASK),
                m.simpo_loss(CHOSEN, CHOSEN_MASK, REJECTED, REJECTED_MASK, 2.0, 0.5))

    def no_length_bias(m):
        # chosen: 12 tokens at -0.4 each; rejected: 3 tokens at -0.4 each. Summed, the short rejected answer
        # looks 3.6 nats better; averaged, the two are equal and only the margin gamma remains.
        chosen, chosen_mask = torch.full((1, 12), -0.4), torch.ones(1, 12)
        rejected = torch.tensor([[-0.4, -0.4, -0.4] + [0.0] * 9])
        rejected_mask = torch.tensor([[1.0, 1, 1] + [0] * 9])
        return m.simpo_loss(chosen, chosen_mask, rejected, rejected_mask, 2.5, 1.0)

    def gradient(m):
        g = torch.Generator().manual_seed(7)
        c, cm = padded(g, 4, 6)
        r, rm = padded(g, 4, 6)
        c.requires_grad_()
        r.requires_grad_()
        return torch.autograd.grad(m.simpo_loss(c, cm, r, rm, 2.0, 0.8), (c, r))

    def underflow(m):
        # the policy gives the chosen answer -60 per token and the rejected -0.1: logits near -150
        chosen, chosen_mask = torch.full((2, 3), -60.0), torch.ones(2, 3)
        rejected, rejected_mask = torch.full((2, 3), -0.1), torch.ones(2, 3)
        return m.simpo_loss(chosen, chosen_mask, rejected, rejected_mask, 2.5, 0.5)

    def empty_completion(m):
        chosen, chosen_mask = torch.tensor([[0.0, 0.0, 0.0], [-0.3, -0.6, 0.0]]), torch.tensor([[0.0, 0, 0], [1, 1, 0]])
        rejected, rejected_mask = torch.tensor([[-1.0, -2.0, 0.0], [-1.5, -0.5, -1.0]]), torch.tensor([[1.0, 1, 0], [1, 1, 1]])
        return m.simpo_loss(chosen, chosen_mask, rejected, rejected_mask, 2.0, 0.5)

    return [
        Case("the statement's pairs (beta 2.0, gamma 0.5)", "visible", spec, label={"zh": "题目中的样本对（beta 2.0，gamma 0.5）"}),
        Case("a long chosen and a short rejected answer, same per-token log-probs", "visible", no_length_bias,
             label={"zh": "长的 chosen 与短的 rejected 回答，每个 token 的对数概率相同"},
             note={"en": "Averaged per token, the two rewards are equal and the loss is -log sigma(-gamma) = 1.3133: "
                         "neither length is favoured. Summed log-probs would call the short answer much better.",
                   "zh": "按 token 平均后两个奖励相等，损失为 -log sigma(-gamma) = 1.3133：不偏向任何长度。"
                         "用求和的对数概率时，短回答会显得好得多。"}),
        Case("average log-probs of a random padded batch", "hidden", averages, label={"zh": "随机带 padding 批次的平均对数概率"}),
        Case("random padded batch of 8 (beta 2.5, gamma 1.4)", "hidden", random_batch(1, 8, 10, 2.5, 1.4),
             label={"zh": "8 对随机带 padding 样本（beta 2.5，gamma 1.4）"}),
        Case("random padded batch of 3 (beta 10, gamma 3)", "hidden", random_batch(2, 3, 5, 10.0, 3.0),
             label={"zh": "3 对随机带 padding 样本（beta 10，gamma 3）"}),
        Case("gradient w.r.t. the per-token log-probs", "hidden", gradient, label={"zh": "对逐 token 对数概率的梯度"},
             note={"en": "Each completion token gets beta / |y| times the sigmoid weight; padding gets exactly 0.",
                   "zh": "每个回答 token 得到 beta / |y| 乘以 sigmoid 权重；padding 的梯度恰好为 0。"}),
        Case("a pair the policy gets badly wrong (logits near -150)", "edge", underflow,
             label={"zh": "策略严重判断错误的一对（logits 约为 -150）"},
             note={"en": "sigmoid(-150) underflows to 0 in float32 and log(0) = -inf; F.logsigmoid computes the same quantity stably.",
                   "zh": "float32 中 sigmoid(-150) 下溢为 0，log(0) = -inf；F.logsigmoid 以数值稳定的方式计算同一个量。"}),
        Case("an empty completion (0 tokens)", "edge", empty_completion, label={"zh": "空回答（0 个 token）"},
             note={"en": "A completion with no tokens must not give 0/0 = NaN: clamp the token count to at least 1.",
                   "zh": "没有 token 的回答不能得到 0/0 = NaN：把 token 数 clamp 到至少 1。"}),
    ]
