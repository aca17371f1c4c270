"""Cases for ppo-clip: the spec's five tokens, random padded batches with gradients, ratios far from 1,
log-probs near -200, zero advantages and garbage on padding."""

from alignlings.content.checks import Case


def cases():
    import torch

    def spec_inputs():
        logp = torch.tensor([[-0.5, -1.5, -2.0, -0.7, -3.0]], requires_grad=True)
        old_logp = torch.tensor([[-1.0, -1.0, -2.0, -0.2, -1.0]])
        advantages = torch.tensor([[1.0, 1.0, 0.5, -1.0, 2.0]])
        mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]])
        return logp, old_logp, advantages, mask

    def run(m, logp, old_logp, advantages, mask, clip_range=0.2):
        logp = logp.detach().clone().requires_grad_(True)
        loss, clipfrac = m.ppo_clip_loss(logp, old_logp, advantages, mask, clip_range)
        (grad,) = torch.autograd.grad(loss, logp)
        return loss.detach(), torch.as_tensor(clipfrac, dtype=loss.dtype).detach(), grad

    def spec(m):
        return run(m, *spec_inputs())

    def random_batch(seed, B, T, spread, *, zero_adv=False, left_pad=False, clip_range=0.2):
        def case(m):
            g = torch.Generator().manual_seed(seed)
            base = -(torch.rand(B, T, generator=g) * 4 + 0.1)
            logp = base + torch.randn(B, T, generator=g) * spread
            old = base + torch.randn(B, T, generator=g) * spread
            adv = torch.randn(B, T, generator=g)
            if zero_adv:
                adv[:, ::2] = 0.0
            lengths = torch.randint(1, T + 1, (B,), generator=g)
            pos = torch.arange(T).expand(B, T)
            mask = ((pos >= T - lengths[:, None]) if left_pad else (pos < lengths[:, None])).float()
            return run(m, logp, old, adv, mask, clip_range)
        return case

    def deep(m):
        logp, old, adv, mask = spec_inputs()
        return run(m, logp - 200, old - 200, adv, mask)

    def garbage_on_padding(m):
        # padding positions hold whatever the model produced there: a huge ratio and advantage
        logp, old, adv, mask = spec_inputs()
        logp, adv = logp.detach().clone(), adv.clone()
        logp[0, 4], adv[0, 4] = 5.0, 50.0
        return run(m, logp, old, adv, mask)

    return [
        Case("spec data: 4 tokens + 1 pad, both signs of A", "visible", spec,
             label={"zh": "题目数据：4 个 token 加 1 个 padding，优势有正有负"}),
        Case("B=4, T=10, right padding: loss, clipfrac, gradient", "hidden", random_batch(1, 4, 10, 0.3),
             label={"zh": "B=4, T=10，右侧 padding：损失、clipfrac 与梯度"}),
        Case("B=3, T=6, left padding", "hidden", random_batch(2, 3, 6, 0.3, left_pad=True),
             label={"zh": "B=3, T=6，左侧 padding"}),
        Case("ratios far outside [0.8, 1.2]", "hidden", random_batch(3, 5, 8, 1.5),
             label={"zh": "比率远在 [0.8, 1.2] 之外"}),
        Case("clip_range 0.1", "hidden", random_batch(4, 3, 7, 0.4, clip_range=0.1),
             label={"zh": "clip_range 取 0.1"}),
        Case("half of the advantages are exactly 0", "edge", random_batch(5, 4, 6, 0.5, zero_adv=True),
             label={"zh": "一半的优势恰好为 0"}, note={
            "en": "With A = 0 both losses are 0: nothing is clipped, and such a token must not count as clipped.",
            "zh": "A = 0 时两个损失都是 0：没有发生裁剪，这样的 token 不能算作被裁剪。"}),
        Case("log-probs near -200", "edge", deep, label={"zh": "对数概率接近 -200"}, note={
            "en": "exp(-200) is 0 in float32: exponentiate the difference of log-probs, not each log-prob.",
            "zh": "float32 中 exp(-200) 为 0：应对对数概率之差取指数，而不是分别取指数。"}),
        Case("large values on the padding position", "edge", garbage_on_padding,
             label={"zh": "padding 位置上有很大的值"}, note={
            "en": "Padding positions still hold numbers; only the mask keeps them out of the loss and the metric.",
            "zh": "padding 位置上仍然有数值；只有 mask 能把它们排除在损失和指标之外。"}),
    ]
