from alignlings.content.checks import Case


def cases():
    import torch
    from torch import nn

    def models(seed, p=0.3):
        # a tiny LM with dropout, and a reference with the same weights (step 0 of DPO)
        torch.manual_seed(seed)
        make = lambda: nn.Sequential(nn.Embedding(11, 16), nn.Dropout(p), nn.Linear(16, 11))
        policy, ref_model = make(), make()
        ref_model.load_state_dict(policy.state_dict())
        return policy, ref_model

    def batch(seed, b=4, t=6):
        g = torch.Generator().manual_seed(seed)
        return torch.randint(0, 11, (b, t), generator=g), torch.randint(0, 11, (b, t), generator=g)

    def step0(m):
        policy, ref_model = models(51)
        m.prepare_models(policy, ref_model)
        chosen, rejected = batch(52)
        loss, cr, rr = m.dpo_step(policy, ref_model, chosen, rejected)
        return [loss.detach(), cr, rr]

    def scored_twice(m):
        policy, ref_model = models(53)
        m.prepare_models(policy, ref_model)
        chosen, rejected = batch(54)
        first = m.dpo_step(policy, ref_model, chosen, rejected)[1]
        second = m.dpo_step(policy, ref_model, chosen, rejected)[1]
        return [first, second]

    def after_one_update(m):
        policy, ref_model = models(55)
        m.prepare_models(policy, ref_model)
        chosen, rejected = batch(56, b=8)
        opt = torch.optim.SGD(policy.parameters(), lr=0.5)
        loss = m.dpo_step(policy, ref_model, chosen, rejected)[0]
        loss.backward()
        opt.step()
        loss, cr, rr = m.dpo_step(policy, ref_model, chosen, rejected)
        return [loss.detach(), cr, rr]

    def modes(m):
        policy, ref_model = models(57)
        m.prepare_models(policy, ref_model)
        return [policy.training, ref_model.training, any(p.requires_grad for p in ref_model.parameters())]

    def gradient(m):
        policy, ref_model = models(58)
        m.prepare_models(policy, ref_model)
        chosen, rejected = batch(59)
        loss = m.dpo_step(policy, ref_model, chosen, rejected)[0]
        (grad,) = torch.autograd.grad(loss, policy[2].weight)
        return grad

    return [
        Case("step 0: the policy is a copy of the reference", "visible", step0,
             label={"zh": "第 0 步：策略是 reference 的副本"},
             note={"en": "with identical models every reward must be 0 and the loss log 2 = 0.6931",
                   "zh": "两个模型完全相同时，每个奖励都应为 0，损失应为 log 2 = 0.6931"}),
        Case("the same batch scored twice", "hidden", scored_twice, label={"zh": "同一个批次打分两次"},
             note={"en": "a model's log-prob of a fixed sequence must not change between two calls",
                   "zh": "同一个模型对固定序列的 log-prob 不应在两次调用之间变化"}),
        Case("after one SGD update", "hidden", after_one_update, label={"zh": "一次 SGD 更新之后"}),
        Case("train/eval modes and frozen reference", "edge", modes, label={"zh": "train/eval 模式与冻结的 reference"},
             note={"en": "the policy is being trained: it stays in train mode; the reference is in eval mode and frozen",
                   "zh": "策略正在训练：它应保持 train 模式；reference 处于 eval 模式并被冻结"}),
        Case("gradient of the loss at step 0", "edge", gradient, label={"zh": "第 0 步损失的梯度"}),
    ]
