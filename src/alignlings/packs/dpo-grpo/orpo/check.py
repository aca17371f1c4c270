"""Cases for the orpo exercise: the statement's pairs, log odds where P(y|x) nears 1 (saturation),
random padded batches, the effect of beta and of the SFT term, gradients, an empty completion."""

from alignlings.content.checks import Case


def cases():
    import torch

    CHOSEN = torch.tensor([[-0.3, -0.5, -0.1, 0.0], [-0.9, -0.7, 0.0, 0.0]])
    CHOSEN_MASK = torch.tensor([[1.0, 1, 1, 0], [1, 1, 0, 0]])
    REJECTED = torch.tensor([[-1.2, -0.8, -1.0, -1.4], [-0.6, -0.9, -0.6, 0.0]])
    REJECTED_MASK = torch.tensor([[1.0, 1, 1, 1], [1, 1, 1, 0]])

    def padded(g, B, T, scale=2.0):
        lengths = torch.randint(1, T + 1, (B,), generator=g)
        mask = (torch.arange(T) < lengths[:, None]).float()  # [B, T]
        logps = -torch.rand(B, T, generator=g) * scale - 5 * (1 - mask)  # padding holds garbage
        return logps, mask

    def spec(m):
        c = m.average_logps(CHOSEN, CHOSEN_MASK)
        r = m.average_logps(REJECTED, REJECTED_MASK)
        return (c, r, m.log_odds(c), m.log_odds(r), m.orpo_loss(CHOSEN, CHOSEN_MASK, REJECTED, REJECTED_MASK, 0.45))

    def near_one(m):
        # average log-probs from -20 (P ~ 2e-9) to -1e-8 (P ~ 1 - 1e-8): the odds span 8e-9 to 1e8
        return m.log_odds(torch.tensor([-20.0, -3.0, -0.7, -0.69, -0.01, -1e-5, -1e-8]))

    def saturated_loss(m):
        # pair 0: the rejected answer has P ~ 1 and the chosen answer P ~ e^-100: log odds ratio ~ -118
        chosen, chosen_mask = torch.tensor([[-100.0, -100.0], [-0.5, -0.3]]), torch.ones(2, 2)
        rejected, rejected_mask = torch.tensor([[-1e-8, -1e-8], [-2.0, -1.0]]), torch.ones(2, 2)
        return m.orpo_loss(chosen, chosen_mask, rejected, rejected_mask, 0.3, beta=0.2)

    def random_batch(seed, B, T, beta):
        def run(m):
            g = torch.Generator().manual_seed(seed)
            c, cm = padded(g, B, T)
            r, rm = padded(g, B, T)
            nll = torch.rand((), generator=g) * 2
            if beta is None:
                return m.orpo_loss(c, cm, r, rm, nll)
            return m.orpo_loss(c, cm, r, rm, nll, beta=beta)
        return run

    def gradient(m):
        g = torch.Generator().manual_seed(9)
        c, cm = padded(g, 4, 6)
        r, rm = padded(g, 4, 6)
        c.requires_grad_()
        r.requires_grad_()
        nll = torch.tensor(0.8, requires_grad=True)
        return torch.autograd.grad(m.orpo_loss(c, cm, r, rm, nll, beta=0.5), (c, r, nll))

    def empty_completion(m):
        chosen, chosen_mask = torch.tensor([[-0.4, -0.2, 0.0], [-0.5, 0.0, 0.0]]), torch.tensor([[1.0, 1, 0], [1, 0, 0]])
        rejected, rejected_mask = torch.tensor([[0.0, 0.0, 0.0], [-1.0, -1.5, -0.5]]), torch.tensor([[0.0, 0, 0], [1, 1, 1]])
        # an empty rejected answer has average log-prob 0 (P = 1): infinite odds, loss term beta * inf
        return m.average_logps(rejected, rejected_mask), m.orpo_loss(chosen[1:], chosen_mask[1:], rejected[1:], rejected_mask[1:], 0.2)

    return [
        Case("the statement's pairs: averages, log odds, loss (nll 0.45, beta 0.1)", "visible", spec,
             label={"zh": "题目中的样本对：平均值、log odds、损失（nll 0.45，beta 0.1）"}),
        Case("log odds from P ~ 2e-9 to P ~ 1 - 1e-8", "visible", near_one,
             label={"zh": "P 从约 2e-9 到约 1 - 1e-8 的 log odds"},
             note={"en": "At log P = -1e-8, 1 - exp(log P) is 0 in float32 and log(0) = -inf, so the odds come out infinite; "
                         "log1mexp uses -expm1 there and gives log odds 18.42.",
                   "zh": "log P = -1e-8 时，float32 中 1 - exp(log P) 为 0，log(0) = -inf，odds 变成无穷大；"
                         "log1mexp 在那里用 -expm1，得到 log odds 18.42。"}),
        Case("random padded batch of 8 (beta 0.1)", "hidden", random_batch(1, 8, 10, 0.1),
             label={"zh": "8 对随机带 padding 样本（beta 0.1）"}),
        Case("random padded batch of 3 (beta 1.0)", "hidden", random_batch(2, 3, 5, 1.0),
             label={"zh": "3 对随机带 padding 样本（beta 1.0）"}),
        Case("default beta is 0.1", "hidden", random_batch(3, 4, 6, None), label={"zh": "beta 默认为 0.1"}),
        Case("gradients w.r.t. the log-probs and the NLL", "hidden", gradient, label={"zh": "对对数概率和 NLL 的梯度"}),
        Case("a rejected answer with P ~ 1 (log odds ratio near -118)", "edge", saturated_loss,
             label={"zh": "P 约为 1 的 rejected 回答（log odds ratio 约为 -118）"},
             note={"en": "The odds saturate: the loss must stay finite (0.2 * 118 + ...), which needs log1mexp for the "
                         "log odds and F.logsigmoid, since sigmoid(-118) is 0 in float32.",
                   "zh": "odds 饱和了：损失必须保持有限（0.2 * 118 + ...），这需要用 log1mexp 算 log odds，并用 F.logsigmoid，"
                         "因为 float32 中 sigmoid(-118) 等于 0。"}),
        Case("an empty completion (0 tokens)", "edge", empty_completion, label={"zh": "空回答（0 个 token）"},
             note={"en": "A completion with no tokens must average to 0, not 0/0 = NaN: clamp the count to at least 1.",
                   "zh": "没有 token 的回答平均值应为 0，而不是 0/0 = NaN：把 token 数 clamp 到至少 1。"}),
    ]
