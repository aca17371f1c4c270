"""Cases for reward-pooling: the spec's three padding layouts, random batches, the loss with margin and
centring and its gradients, a pad id that never occurs, pairs far apart."""

from alignlings.content.checks import Case


def cases():
    import torch

    def spec_pool(m):
        input_ids = torch.tensor([[5, 6, 7, 2, 2, 2], [2, 2, 4, 5, 6, 2], [3, 4, 5, 6, 7, 2]])
        attention_mask = torch.tensor([[1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
        rewards = torch.tensor([[0.1, 0.2, 0.3, 0.4, 9.0, 9.0], [9.0, 9.0, -0.1, -0.2, -0.3, -0.4],
                                [1.0, 1.1, 1.2, 1.3, 1.4, 1.5]])
        return m.pool_last_token(rewards, input_ids, attention_mask, 2)

    def random_pool(seed, B, T, left, pad_is_eos):
        def run(m):
            g = torch.Generator().manual_seed(seed)
            pad, eos = 0, (0 if pad_is_eos else 1)
            lengths = torch.randint(2, T + 1, (B,), generator=g)
            pos = torch.arange(T).expand(B, T)
            attention_mask = ((pos >= T - lengths[:, None]) if left else (pos < lengths[:, None])).long()
            input_ids = torch.randint(3, 20, (B, T), generator=g)
            last = (pos * attention_mask).argmax(-1)
            input_ids = torch.where(pos == last[:, None], eos, input_ids)
            input_ids = torch.where(attention_mask == 1, input_ids, pad)
            rewards = torch.randn(B, T, generator=g).requires_grad_(True)
            pooled = m.pool_last_token(rewards, input_ids, attention_mask, pad)
            return pooled.detach(), torch.autograd.grad(pooled.sum(), rewards)[0]
        return run

    def spec_loss(m):
        chosen = torch.tensor([1.2, 0.3, -0.5, 2.0], requires_grad=True)
        rejected = torch.tensor([0.2, 0.8, -1.5, 1.9], requires_grad=True)
        margin = torch.tensor([1.0, 0.0, 0.5, 0.0])
        out = []
        for args in ((), (margin,), (margin, 0.01)):
            loss = m.bradley_terry_loss(chosen, rejected, *args)
            out += [loss.detach(), *torch.autograd.grad(loss, (chosen, rejected))]
        return out

    def random_loss(seed, B, scale, coef):
        def run(m):
            g = torch.Generator().manual_seed(seed)
            chosen = (torch.randn(B, generator=g) * scale).requires_grad_(True)
            rejected = (torch.randn(B, generator=g) * scale).requires_grad_(True)
            margin = torch.rand(B, generator=g) * 2
            loss = m.bradley_terry_loss(chosen, rejected, margin, coef)
            return loss.detach(), *torch.autograd.grad(loss, (chosen, rejected))
        return run

    def far_apart(m):
        chosen = torch.tensor([-150.0, 150.0], requires_grad=True)
        rejected = torch.tensor([150.0, -150.0])
        loss = m.bradley_terry_loss(chosen, rejected)
        return loss.detach(), torch.autograd.grad(loss, chosen)[0]

    return [
        Case("spec pooling: right-padded, left-padded, full row; pad == eos == 2", "visible", spec_pool,
             label={"zh": "题目中的池化：右侧 padding、左侧 padding、满行；pad == eos == 2"}),
        Case("spec loss: plain, with margin, with margin and centring (values and gradients)", "visible", spec_loss,
             label={"zh": "题目中的损失：无附加项、加 margin、加 margin 与中心化（取值与梯度）"}),
        Case("B=6, T=9, right padding, pad == eos", "hidden", random_pool(1, 6, 9, False, True),
             label={"zh": "B=6, T=9，右侧 padding，pad == eos"}, note={
            "en": "The EOS is a real token and the reward is read there; 'rightmost token != pad_token_id' skips it.",
            "zh": "EOS 是真实 token，奖励就在那里读取；“最右侧不等于 pad_token_id 的 token”会跳过它。"}),
        Case("B=5, T=7, left padding, pad != eos", "hidden", random_pool(2, 5, 7, True, False),
             label={"zh": "B=5, T=7，左侧 padding，pad != eos"}),
        Case("B=8 pairs, margin and centring 0.05: loss and gradients", "hidden", random_loss(3, 8, 2.0, 0.05),
             label={"zh": "B=8 对，margin 与中心化 0.05：损失与梯度"}),
        Case("rewards 300 apart: -log sigmoid stays finite", "edge", far_apart,
             label={"zh": "奖励相差 300：-log sigmoid 保持有限"}, note={
            "en": "sigmoid(-300) is 0 in float32 and log(0) = -inf; F.logsigmoid computes it stably.",
            "zh": "float32 中 sigmoid(-300) 为 0，log(0) = -inf；F.logsigmoid 的计算是数值稳定的。"}),
    ]
