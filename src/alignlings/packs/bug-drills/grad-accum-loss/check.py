from alignlings.content.checks import Case


def cases():
    import torch

    def batches(seed, sizes, T=6, V=7, min_len=1):
        g = torch.Generator().manual_seed(seed)
        out = []
        for b in sizes:
            logits = torch.randn(b, T, V, generator=g, requires_grad=True)
            labels = torch.randint(0, V, (b, T), generator=g)
            lengths = torch.randint(min_len, T + 1, (b,), generator=g)
            labels[torch.arange(T).expand(b, T) >= lengths[:, None]] = -100  # right padding
            out.append((logits, labels))
        return out

    def symptom(m):
        # bsz 1 x 2 micro-batches: one short answer (1 trained token) and one long answer (5)
        g = torch.Generator().manual_seed(0)
        short = (torch.randn(1, 6, 7, generator=g), torch.tensor([[1, 2, -100, -100, -100, -100]]))
        long = (torch.randn(1, 6, 7, generator=g), torch.tensor([[1, 2, 3, 4, 5, 6]]))
        return m.accumulated_loss([short, long])

    def loss_and_grads(m, mbs):
        loss = m.accumulated_loss(mbs)
        grads = torch.autograd.grad(loss, [lg for lg, _ in mbs])
        return {"loss": loss.detach(), "grads": [g.detach() for g in grads]}

    def random_accumulation(m):
        return loss_and_grads(m, batches(1, [2, 1, 3, 2]))

    def unequal_sizes(m):
        return loss_and_grads(m, batches(2, [1, 4]))

    def one_micro_batch(m):
        return loss_and_grads(m, batches(3, [4]))

    def prompt_masked(m):
        mbs = batches(4, [2, 2], min_len=3)
        for _, labels in mbs:
            labels[:, :2] = -100  # the prompt is not trained on
        return loss_and_grads(m, mbs)

    return [
        Case("bsz 1 x 2 micro-batches, 1 and 5 tokens", "visible", symptom,
             label={"zh": "bsz 1 × 2 个 micro-batch，1 个和 5 个 token"},
             note={"en": "accumulation must give the mean over all 6 trained tokens, as one batch of 2 does",
                   "zh": "梯度累积应得到全部 6 个训练 token 的平均，与一次算 2 条样本的批次相同"}),
        Case("4 micro-batches, random lengths: loss and gradients", "hidden", random_accumulation,
             label={"zh": "4 个 micro-batch，随机长度：损失与梯度"}),
        Case("micro-batches of 1 and 4 sequences", "hidden", unequal_sizes, label={"zh": "分别含 1 条和 4 条序列的 micro-batch"},
             note={"en": "The first micro-batch has no trained token: its one sequence has a single label, which the "
                         "shift by one leaves with nothing to predict. Its mean loss is 0/0 = NaN (cross_entropy's "
                         "mean over zero tokens); it must add 0 to the step's loss, and its gradient must be 0.",
                   "zh": "第一个 micro-batch 没有一个训练 token：它唯一的序列只有一个有效标签，错开一位之后就没有可预测的"
                         "目标了。它的平均损失是 0/0 = NaN（cross_entropy 对零个 token 取平均）；它对这一步的损失必须"
                         "贡献 0，梯度也必须是 0。"}),
        Case("completion-only labels", "hidden", prompt_masked, label={"zh": "只训练回答部分的 labels"}),
        Case("a single micro-batch", "edge", one_micro_batch, label={"zh": "只有一个 micro-batch"},
             note={"en": "without accumulation the step loss is the plain token mean",
                   "zh": "不做梯度累积时，这一步的损失就是普通的 token 平均"}),
    ]
