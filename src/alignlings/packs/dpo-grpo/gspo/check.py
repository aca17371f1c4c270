"""Cases for the gspo exercise: the statement's two completions, the geometric mean against the product and
the arithmetic mean of token ratios, random padded batches (the paper's and wider clip ranges), the gradient
(one value per completion), a 1000-token completion, and GSPO-token's stop-gradients."""

from alignlings.content.checks import Case


def cases():
    import torch

    def spec_batch():
        token_ratios = torch.tensor([[1.2, 0.9, 1.0, 1.0, 1.0], [1.0005, 1.0, 0.9999, 1.0002, 1.0001]])
        mask = torch.tensor([[1.0, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
        old = torch.full((2, 5), -1.5)
        logps = old + torch.log(token_ratios) + torch.tensor([[0.0, 0, 0, 7, 7], [0, 0, 0, 0, 0]])  # padding: garbage
        return logps, old, torch.tensor([1.0, -1.0]), mask

    def spec(m):
        logps, old, adv, mask = spec_batch()
        logps.requires_grad_()
        loss = m.gspo_loss(logps, old, adv, mask)
        return m.sequence_log_ratio(logps, old, mask), loss, torch.autograd.grad(loss, logps)[0]

    def geometric_mean(m):
        # token ratios 1.01 (200 tokens): product 7.39; ratios 2 and 0.5: arithmetic mean 1.25, geometric mean 1
        long = m.sequence_log_ratio(torch.full((1, 200), 0.01), torch.zeros(1, 200), torch.ones(1, 200))
        pair = m.sequence_log_ratio(torch.log(torch.tensor([[2.0, 0.5, 3.0]])), torch.zeros(1, 3),
                                    torch.tensor([[1.0, 1.0, 0.0]]))
        return long, pair

    def random_batch(seed, B, T, spread, eps=None):
        def run(m):
            g = torch.Generator().manual_seed(seed)
            lengths = torch.randint(1, T + 1, (B,), generator=g)
            mask = (torch.arange(T) < lengths[:, None]).float()
            old = -torch.rand(B, T, generator=g) * 3 - 0.1
            logps = (old + torch.randn(B, T, generator=g) * spread + 5 * (1 - mask)).requires_grad_()
            adv = torch.randn(B, generator=g)
            kw = {} if eps is None else {"epsilon": eps[0], "epsilon_high": eps[1]}
            loss = m.gspo_loss(logps, old, adv, mask, **kw)
            return loss, torch.autograd.grad(loss, logps)[0]
        return run

    def equal_policies(m):
        g = torch.Generator().manual_seed(21)
        old = -torch.rand(4, 6, generator=g) * 2
        logps = old.clone().requires_grad_()
        mask = (torch.arange(6) < torch.tensor([6, 2, 4, 1])[:, None]).float()
        adv = torch.tensor([0.5, -1.0, 2.0, -1.5])
        loss = m.gspo_loss(logps, old, adv, mask)
        return loss, torch.autograd.grad(loss, logps)[0]

    def long_completion(m):
        # 1000 tokens, each 10% more likely than under pi_old: the product of the ratios overflows float32
        old = torch.full((2, 1000), -2.0)
        logps = (old + 0.1).requires_grad_()
        mask = torch.ones(2, 1000)
        mask[1, 10:] = 0
        loss = m.gspo_loss(logps, old, torch.tensor([-1.0, 1.0]), mask, epsilon=0.2, epsilon_high=0.28)
        return loss, torch.autograd.grad(loss, logps)[0]

    def token_variant(seed, per_token):
        def run(m):
            g = torch.Generator().manual_seed(seed)
            B, T = 5, 7
            mask = (torch.arange(T) < torch.randint(1, T + 1, (B,), generator=g)[:, None]).float()
            old = -torch.rand(B, T, generator=g) * 3
            logps = (old + torch.randn(B, T, generator=g) * 0.05).requires_grad_()
            adv = torch.randn(B, T, generator=g) if per_token else torch.randn(B, 1, generator=g).expand(B, T)
            ratio = m.gspo_token_ratio(logps, old, mask)
            loss = m.gspo_token_loss(logps, old, adv, mask, epsilon=0.02, epsilon_high=0.03)
            return ratio, loss, torch.autograd.grad(loss, logps)[0]
        return run

    return [
        Case("the statement's two completions: log s_i, loss, gradient", "visible", spec,
             label={"zh": "题目中的两个回答：log s_i、损失与梯度"},
             note={"en": "s_1 = 1.026 with A > 0 is above 1 + 4e-4: that completion is clipped as a whole and none "
                         "of its tokens gets a gradient; every token of completion 2 gets the same gradient.",
                   "zh": "s_1 = 1.026 且 A > 0，超过了 1 + 4e-4：这个回答整体被裁剪，它的 token 都没有梯度；"
                         "回答 2 的每个 token 得到相同的梯度。"}),
        Case("geometric mean: 200 token ratios of 1.01; ratios 2 and 0.5", "visible", geometric_mean,
             label={"zh": "几何平均：200 个 1.01 的 token 比率；比率 2 和 0.5"},
             note={"en": "log s_i is the mean log-ratio: 0.01 for the first (the product's log would be 2), and 0 for "
                         "ratios 2 and 0.5 (an arithmetic mean would give 1.25). The third position is padding.",
                   "zh": "log s_i 是对数比率的平均：第一个为 0.01（乘积的对数是 2），比率 2 和 0.5 时为 0"
                         "（算术平均会得到 1.25）。第三个位置是 padding。"}),
        Case("random padded batch, the paper's clip ranges (3e-4, 4e-4): loss and gradient", "hidden",
             random_batch(22, 8, 10, 0.01), label={"zh": "随机带 padding 的批次，论文的裁剪范围（3e-4、4e-4）：损失与梯度"}),
        Case("random padded batch, clip ranges 0.2 and 0.28: loss and gradient", "hidden",
             random_batch(23, 6, 9, 0.4, (0.2, 0.28)), label={"zh": "随机带 padding 的批次，裁剪范围 0.2 和 0.28：损失与梯度"}),
        Case("as many completions as tokens (B = T = 6)", "hidden", random_batch(24, 6, 6, 0.002),
             label={"zh": "回答数与 token 数相同（B = T = 6）"},
             note={"en": "s must be [B, 1] to meet advantages [B, 1]; a [B] ratio broadcasts to [B, B] without an error.",
                   "zh": "s 必须是 [B, 1] 才能与 [B, 1] 的优势对齐；[B] 的比率会不报错地广播成 [B, B]。"}),
        Case("GSPO-token with one advantage per completion: ratio, loss, gradient", "hidden",
             token_variant(25, per_token=False), label={"zh": "每个回答一个优势的 GSPO-token：比率、损失与梯度"},
             note={"en": "With A_{i,t} = A_i, GSPO-token has GSPO's value and gradient (§4.3).",
                   "zh": "A_{i,t} = A_i 时，GSPO-token 的值和梯度都与 GSPO 相同（§4.3）。"}),
        Case("GSPO-token with per-token advantages", "hidden", token_variant(26, per_token=True),
             label={"zh": "逐 token 优势的 GSPO-token"}),
        Case("all policies equal: loss -mean(A), gradient -A_i / (B |y_i|)", "edge", equal_policies,
             label={"zh": "策略完全相同：损失为 -mean(A)，梯度为 -A_i / (B |y_i|)"}),
        Case("a 1000-token completion, each token 10% more likely", "edge", long_completion,
             label={"zh": "1000 个 token 的回答，每个 token 的概率都高了 10%"},
             note={"en": "The sequence's likelihood ratio is e^100, beyond float32; its length-normalised form is e^0.1.",
                   "zh": "整个序列的似然比是 e^100，超出 float32 的范围；按长度归一化后是 e^0.1。"}),
    ]
