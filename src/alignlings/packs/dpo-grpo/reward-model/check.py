"""Cases for the reward-model exercise: the spec's setup, parameter counts, gradients, other sizes."""

from alignlings.content.checks import Case


def cases():
    import torch
    import torch.nn as nn

    def build(m, seed=42, vocab=100, hidden=64):
        # the spec's stand-in backbone: token ids [B, T] -> hidden states [B, T, H]
        torch.manual_seed(seed)
        backbone = nn.Sequential(nn.Embedding(vocab, hidden), nn.Linear(hidden, hidden), nn.GELU())
        return m.RewardModel(backbone, hidden)

    def spec_setup(m):
        model = build(m)
        chosen_ids = torch.randint(0, 100, (4, 10))
        rejected_ids = torch.randint(0, 100, (4, 10))
        return model, model(chosen_ids), model(rejected_ids)

    def spec_rewards(m):
        _, reward_chosen, reward_rejected = spec_setup(m)
        return reward_chosen, reward_rejected

    def spec_loss(m):
        model, reward_chosen, reward_rejected = spec_setup(m)
        return model.compute_preference_loss(reward_chosen, reward_rejected)

    def counts(m):
        model = build(m)
        return {"trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
                "total": sum(p.numel() for p in model.parameters())}

    def gradients(m):
        model, reward_chosen, reward_rejected = spec_setup(m)
        model.compute_preference_loss(reward_chosen, reward_rejected).backward()
        backbone_grads = sum(p.grad is not None for p in model.backbone.parameters())
        return {"backbone parameters with a gradient": backbone_grads,
                "value_head.weight.grad": model.value_head.weight.grad,
                "value_head.bias.grad": model.value_head.bias.grad}

    def other_size(seed, vocab, hidden, B, T):
        def run(m):
            model = build(m, seed, vocab, hidden)
            return model(torch.randint(0, vocab, (B, T)))
        return run

    def loss_on_rewards(m):
        g = torch.Generator().manual_seed(3)
        reward_chosen = (torch.randn(6, generator=g) * 2).requires_grad_(True)
        reward_rejected = (torch.randn(6, generator=g) * 2).requires_grad_(True)
        loss = build(m).compute_preference_loss(reward_chosen, reward_rejected)
        loss.backward()
        return loss, reward_chosen.grad, reward_rejected.grad

    def confident(m):
        # the model is very sure, and wrong, on the first pair: r_chosen - r_rejected = -300
        return build(m).compute_preference_loss(torch.tensor([-150.0, 0.0, 3.0]), torch.tensor([150.0, 1.0, 2.0]))

    return [
        Case("spec setup: rewards of chosen and rejected", "visible", spec_rewards, label={"zh": "题目设置：chosen 与 rejected 的奖励"}),
        Case("spec setup: preference loss", "visible", spec_loss, label={"zh": "题目设置：偏好损失"}),
        Case("trainable vs total parameters", "visible", counts, label={"zh": "可训练参数与总参数"}, note={
            "en": "Only the value head (hidden_dim weights + 1 bias) should be trainable; every backbone "
                  "parameter needs requires_grad = False.",
            "zh": "只有价值头（hidden_dim 个权重加 1 个偏置）应该可训练；主干的每个参数都需要 requires_grad = False。",
        }),
        Case("the loss's gradient reaches only the value head", "hidden", gradients, label={"zh": "损失的梯度只到达价值头"}),
        Case("batch of 1, hidden 32, length 7", "hidden", other_size(7, 50, 32, 1, 7), label={"zh": "批大小 1，隐藏维 32，长度 7"}, note={
            "en": "If only this case fails, look at the batch of one: its rewards must still have shape [1], "
                  "so squeeze only the last axis.",
            "zh": "如果只有这个用例失败，请看批大小为 1 的情况：奖励的形状仍应是 [1]，所以只压缩最后一维。",
        }),
        Case("batch of 6, hidden 16, length 3", "hidden", other_size(8, 20, 16, 6, 3), label={"zh": "批大小 6，隐藏维 16，长度 3"}),
        Case("loss and its gradient on given rewards", "hidden", loss_on_rewards, label={"zh": "给定奖励上的损失及其梯度"}),
        Case("a confident, wrong preference (margin -300)", "edge", confident, label={"zh": "自信却错误的偏好（margin -300）"}, note={
            "en": "sigmoid(-300) underflows to 0 in float32 and log(0) = -inf; F.logsigmoid stays finite.",
            "zh": "float32 中 sigmoid(-300) 下溢为 0，log(0) = -inf；F.logsigmoid 保持有限。",
        }),
    ]
