"""Cases for the grpo-aggregation exercise: each aggregation on unequal lengths, the token weights it
implies (its gradient), an empty completion (value and gradient), and gradient accumulation over micro-batches."""

from alignlings.content.checks import Case


def cases():
    import torch

    # the statement's batch: completions of 2, 5 and 8 tokens, padded to T = 8
    SPEC_MASK = torch.tensor([[1.0, 1, 0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1]])
    SPEC_LOSS = torch.tensor([[0.5, -1.0, 9, 9, 9, 9, 9, 9], [0.2, 0.4, 0.6, 0.8, 1.0, 9, 9, 9],
                              [-0.3, 0.1, 0.2, 0.3, -0.1, 0.5, 0.7, 0.2]])  # 9 = padding, must not count

    def random_batch(seed, B=6, T=10):
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(1, T + 1, (B,), generator=g)
        mask = (torch.arange(T) < lengths[:, None]).float()  # [B, T]
        loss = torch.randn(B, T, generator=g) + 100 * (1 - mask)  # padding holds garbage
        return loss, mask

    def all_four(loss, mask, max_len, n_items):
        def run(m):
            return (m.grpo_aggregate(loss, mask), m.bnpo_aggregate(loss, mask),
                    m.dr_grpo_aggregate(loss, mask, max_len), m.dapo_aggregate(loss, mask, n_items))
        return run

    def hidden(m):
        loss, mask = random_batch(1)
        # max_completion_length above the longest completion; num_items_in_batch spans other micro-batches
        return all_four(loss, mask, 16, int(mask.sum()) + 17)(m)

    def empty_completion(m):
        loss, mask = random_batch(2, B=4, T=6)
        mask[1] = 0  # a completion with no tokens (e.g. truncated prompt): must count 0, not NaN
        return all_four(loss, mask, 6, int(mask.sum()))(m)

    def empty_completion_gradient(m):
        # a value of 0 is not enough: 0/0 patched after the division (nan_to_num) still back-propagates NaN
        loss, mask = random_batch(2, B=4, T=6)
        mask[1] = 0
        out = []
        for call in (lambda x: m.grpo_aggregate(x, mask), lambda x: m.bnpo_aggregate(x, mask),
                     lambda x: m.dr_grpo_aggregate(x, mask, 6), lambda x: m.dapo_aggregate(x, mask, int(mask.sum()))):
            x = loss.clone().requires_grad_()
            out.append(torch.autograd.grad(call(x), x)[0])
        return tuple(out)

    def gradients(m):
        loss, mask = random_batch(3, B=5, T=7)
        out = []
        for _name, call in (("grpo", lambda x: m.grpo_aggregate(x, mask)), ("bnpo", lambda x: m.bnpo_aggregate(x, mask)),
                           ("dr_grpo", lambda x: m.dr_grpo_aggregate(x, mask, 12)),
                           ("dapo", lambda x: m.dapo_aggregate(x, mask, 40))):
            x = loss.clone().requires_grad_()
            out.append(torch.autograd.grad(call(x), x)[0])
        return tuple(out)

    def weights(m):
        return {
            "grpo": m.token_weights(SPEC_MASK, "grpo"),
            "bnpo": m.token_weights(SPEC_MASK, "bnpo"),
            "dr_grpo": m.token_weights(SPEC_MASK, "dr_grpo", max_completion_length=8),
            "dapo": m.token_weights(SPEC_MASK, "dapo", num_items_in_batch=15),
        }

    def length_bias(m):
        # the weight of one token of a 2-token completion over that of a 16-token one
        mask = (torch.arange(16) < torch.tensor([2, 16])[:, None]).float()
        kw = {"grpo": {}, "bnpo": {}, "dr_grpo": {"max_completion_length": 16}, "dapo": {"num_items_in_batch": 18}}
        out = {}
        for name, extra in kw.items():
            w = m.token_weights(mask, name, **extra)
            out[name] = float(w[0, 0] / w[1, 0])
        return out

    def accumulation(m):
        loss, mask = random_batch(4, B=8, T=9)
        return {name: (m.accumulate(loss, mask, 1, name, 9), m.accumulate(loss, mask, 2, name, 9),
                       m.accumulate(loss, mask, 4, name, 9))
                for name in ("grpo", "bnpo", "dr_grpo", "dapo")}

    def accumulation_gradient(m):
        loss, mask = random_batch(5, B=6, T=8)
        out = []
        for name in ("bnpo", "dapo"):
            x = loss.clone().requires_grad_()
            out.append(torch.autograd.grad(m.accumulate(x, mask, 3, name, 8), x)[0])
        return tuple(out)

    return [
        Case("the four aggregations on the statement's batch", "visible", all_four(SPEC_LOSS, SPEC_MASK, 8, 15),
             label={"zh": "题目批次上的四种聚合"}),
        Case("token weights on the statement's batch", "visible", weights, label={"zh": "题目批次上每个 token 的权重"}),
        Case("length bias: short token weight / long token weight", "visible", length_bias,
             label={"zh": "长度偏差：短回答与长回答单个 token 权重之比"},
             note={"en": "grpo weighs a token of a 2-token completion 8 times more than one of a 16-token completion; "
                         "the other three weigh every token alike.",
                   "zh": "grpo 中 2 个 token 的回答里每个 token 的权重是 16 个 token 的回答里的 8 倍；另外三种对每个 token 一视同仁。"}),
        Case("the four aggregations on a random padded batch", "hidden", hidden, label={"zh": "随机带 padding 批次上的四种聚合"}),
        Case("gradients of the four aggregations", "hidden", gradients, label={"zh": "四种聚合的梯度"}),
        Case("gradient accumulation over 1, 2 and 4 micro-batches", "hidden", accumulation,
             label={"zh": "1、2、4 个 micro-batch 的梯度累积"},
             note={"en": "grpo, dr_grpo and dapo give the same loss however the batch is split into equal parts; bnpo "
                         "does not: its mean depends on each micro-batch's own token count.",
                   "zh": "把批次等分成几份时，grpo、dr_grpo 和 dapo 的损失都不变；bnpo 会变：它的均值取决于每个 micro-batch 自己的 token 数。"}),
        Case("gradient of the accumulated loss (bnpo, dapo)", "hidden", accumulation_gradient,
             label={"zh": "累积损失的梯度（bnpo、dapo）"}),
        Case("an empty completion", "edge", empty_completion, label={"zh": "一个空回答"},
             note={"en": "A completion with no tokens must add 0, not 0/0 = NaN: clamp the token count to at least 1.",
                   "zh": "没有 token 的回答必须贡献 0，而不是 0/0 = NaN：把 token 数 clamp 到至少 1。"}),
        Case("an empty completion: gradients", "edge", empty_completion_gradient, label={"zh": "一个空回答：梯度"},
             note={"en": "The empty completion's tokens must get gradient 0, not NaN. Replacing a NaN after the "
                         "division (torch.nan_to_num) fixes the value but not the backward pass: the gradient of "
                         "x / 0 is still 0 * inf = NaN, and one NaN gradient poisons every weight at the optimizer "
                         "step. Clamp the divisor before dividing.",
                   "zh": "空回答的 token 的梯度必须是 0，而不是 NaN。在除法之后再替换 NaN（torch.nan_to_num）只修好了"
                         "数值，没修好反向传播：x / 0 的梯度仍是 0 × inf = NaN，一个 NaN 梯度会在优化器更新时污染所有权重。"
                         "应在除法之前 clamp 除数。"}),
    ]
