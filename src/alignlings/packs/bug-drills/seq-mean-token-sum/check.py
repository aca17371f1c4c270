from alignlings.content.checks import Case


def cases():
    import torch

    def symptom(m):
        # a loss of 1 on every token: a 1-token and a 4-token answer
        loss = torch.ones(2, 4)
        mask = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 1]])
        return [m.agg_loss(loss, mask, mode) for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum")]

    def random_sum(m):
        g = torch.Generator().manual_seed(7)
        loss = torch.randn(5, 9, generator=g)
        mask = (torch.arange(9)[None] < torch.randint(1, 10, (5, 1), generator=g)).long()
        return m.agg_loss(loss, mask, "seq-mean-token-sum")

    def random_other_modes(m):
        g = torch.Generator().manual_seed(8)
        loss = torch.randn(4, 6, generator=g)
        mask = (torch.arange(6)[None] < torch.randint(1, 7, (4, 1), generator=g)).long()
        return [m.agg_loss(loss, mask, "token-mean"), m.agg_loss(loss, mask, "seq-mean-token-mean")]

    def gradient(m):
        g = torch.Generator().manual_seed(9)
        loss = torch.randn(3, 5, generator=g, requires_grad=True)
        mask = torch.tensor([[1, 1, 0, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
        (grad,) = torch.autograd.grad(m.agg_loss(loss, mask, "seq-mean-token-sum"), loss)
        return grad

    return [
        Case("three modes on a 1-token and a 4-token answer", "visible", symptom,
             label={"zh": "1 个 token 与 4 个 token 的回答上的三种模式"},
             note={"en": "with a loss of 1 per token, seq-mean-token-sum is (1 + 4) / 2 = 2.5, not 1",
                   "zh": "每个 token 的损失都是 1 时，seq-mean-token-sum 应为 (1 + 4) / 2 = 2.5，而不是 1"}),
        Case("seq-mean-token-sum, random lengths", "hidden", random_sum, label={"zh": "seq-mean-token-sum，随机长度"}),
        Case("the other two modes", "hidden", random_other_modes, label={"zh": "另外两种模式"}),
        Case("gradient per token", "edge", gradient, label={"zh": "每个 token 的梯度"},
             note={"en": "each trained token's gradient is 1/B, whatever the length of its sequence",
                   "zh": "无论序列多长，每个训练 token 的梯度都是 1/B"}),
    ]
