"""Cases for the toy-dpo exercise.

Unit cases build their own seeded models (passed in, or installed as the module globals policy,
ref and opt that train reads), so they depend neither on what ran before them nor on the order in
which a learner's code draws random numbers. The training case returns the
trained policy's weights; P("a") is measured from them on the trusted side.
"""

from alignlings.content.checks import Case


def cases():
    import copy
    import functools

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    BOS, TARGET = 9, 0
    config = GPT2Config(vocab_size=10, n_positions=4, n_embd=16, n_layer=1, n_head=2,
                        bos_token_id=BOS, eos_token_id=BOS, use_cache=False)

    def one_thread(fn):
        @functools.wraps(fn)
        def run(m):
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                return fn(m)
            finally:
                torch.set_num_threads(threads)
        return run

    def model(seed):
        torch.manual_seed(seed)
        return GPT2LMHeadModel(config).eval()

    def install(m, seed):
        m.policy = model(seed)
        m.ref = copy.deepcopy(m.policy).requires_grad_(False)
        m.opt = torch.optim.Adam(m.policy.parameters(), lr=3e-2)

    def pairs(m):
        chosen, rejected = m.make_pairs()
        return chosen, rejected

    @one_thread
    def logps_on_pairs(m):
        chosen, rejected = m.make_pairs()
        net = model(3)
        with torch.no_grad():
            return m.sequence_logps(net, chosen), m.sequence_logps(net, rejected)

    @one_thread
    def logps_longer_prompt(m):
        g = torch.Generator().manual_seed(5)
        ids = torch.randint(0, 10, (6, 4), generator=g)
        net = model(4)
        with torch.no_grad():
            return m.sequence_logps(net, ids, prompt_length=2), m.sequence_logps(net, ids, prompt_length=3)

    @one_thread
    def logps_gradient(m):
        g = torch.Generator().manual_seed(6)
        ids = torch.randint(0, 10, (5, 4), generator=g)
        net = model(7)
        m.sequence_logps(net, ids, prompt_length=2).sum().backward()
        return torch.cat([p.grad.flatten() if p.grad is not None else torch.zeros(p.numel())
                          for p in net.parameters()])

    def loss_spec(m):
        pc, pr = torch.tensor([-1.0, -2.0, -0.5]), torch.tensor([-3.0, -1.5, -2.5])
        rc, rr = torch.tensor([-1.2, -2.2, -1.0]), torch.tensor([-2.8, -1.0, -2.0])
        return m.dpo_loss(pc, pr, rc, rr), m.dpo_loss(pc, pr, rc, rr, beta=0.5)

    def loss_random(m):
        g = torch.Generator().manual_seed(8)
        x = [-30 + 10 * torch.randn(16, generator=g) for _ in range(4)]
        return m.dpo_loss(*x, beta=0.2)

    def loss_gradient(m):
        g = torch.Generator().manual_seed(9)
        pc, pr = (-20 + 5 * torch.randn(8, generator=g)).requires_grad_(), (-20 + 5 * torch.randn(8, generator=g)).requires_grad_()
        rc, rr = -20 + 5 * torch.randn(8, generator=g), -20 + 5 * torch.randn(8, generator=g)
        loss = m.dpo_loss(pc, pr, rc, rr, beta=0.3)
        gc, gr = torch.autograd.grad(loss, (pc, pr))
        return loss.detach(), gc, gr

    def loss_saturated(m):
        # margins of -2000 and +2000 nats: beta * margin = -+200, where sigmoid underflows in float32
        pc, pr = torch.tensor([-2000.0, -1.0]), torch.tensor([-1.0, -2001.0])
        zero = torch.zeros(2)
        return m.dpo_loss(pc, pr, zero, zero)

    @one_thread
    def three_steps(m):
        install(m, 11)
        history = m.train(steps=3)
        return [float(p) for p in history]

    @one_thread
    def other_reference_and_beta(m):
        # a reference that is another network, not a copy of the policy: from the first step the log-ratios are
        # not 0, so both the reference's log-probs and beta change every update (a copy would make them agree at
        # step 0 and differ only by what the policy has learnt since)
        m.policy = model(11)
        m.ref = model(12).requires_grad_(False)
        m.opt = torch.optim.Adam(m.policy.parameters(), lr=3e-2)
        return [float(p) for p in m.train(steps=3, beta=0.5)]

    @one_thread
    def training(m):
        """The trained policy's weights, as data: P("a") is measured from them on the trusted side
        (``trained``), never taken from the learner's process."""
        install(m, 0)
        m.train()
        return {k: v.detach().clone() for k, v in m.policy.state_dict().items()}

    def trained(state):
        net = GPT2LMHeadModel(config).eval()
        if not isinstance(state, dict):
            return False, f"training returned a {type(state).__name__}, not the policy's weights"
        try:
            net.load_state_dict(state)
        except (RuntimeError, TypeError, KeyError) as exc:
            return False, f"the policy's weights do not fit the exercise's model: {str(exc)[:200]}"
        with torch.no_grad():
            p = net(torch.tensor([[BOS]])).logits[0, -1].softmax(-1)[TARGET].item()
        return p >= 0.9, f'P("a") = {p:.3f} after 40 steps; it should end above 0.90'

    return [
        Case("make_pairs: 'a' over every other token", "visible", pairs,
             label={"zh": "make_pairs：'a' 优于其他每个 token"}),
        Case("sequence_logps on the pairs", "visible", logps_on_pairs, label={"zh": "在数据对上的 sequence_logps"}),
        Case("sequence_logps with prompts of 2 and 3 tokens", "hidden", logps_longer_prompt,
             label={"zh": "prompt 长为 2 和 3 个 token 时的 sequence_logps"},
             note={"en": "Only completion tokens count: with prompt_length = 2 the first target (token 1) is part "
                         "of the prompt and must be masked out.",
                   "zh": "只有回答部分的 token 计入：prompt_length = 2 时，第一个预测目标（token 1）属于 prompt，必须被 mask 掉。"}),
        Case("sequence_logps: gradient w.r.t. the model", "hidden", logps_gradient,
             label={"zh": "sequence_logps 对模型参数的梯度"}),
        Case("dpo_loss on the statement's numbers", "visible", loss_spec, label={"zh": "题目数据上的 dpo_loss"}),
        Case("dpo_loss on random log-probs", "hidden", loss_random, label={"zh": "随机对数概率上的 dpo_loss"}),
        Case("dpo_loss: value and gradients", "hidden", loss_gradient, label={"zh": "dpo_loss 的值与梯度"}),
        Case("dpo_loss at margins of -+2000 nats", "edge", loss_saturated, label={"zh": "margin 为 ±2000 nats 时的 dpo_loss"},
             note={"en": "log(sigmoid(-200)) is log(0) = -inf in float32; F.logsigmoid gives -200 exactly.",
                   "zh": "float32 下 log(sigmoid(-200)) 是 log(0) = -inf；F.logsigmoid 精确给出 -200。"}),
        Case("train: P('a') over 3 steps from a fixed model", "visible", three_steps, rtol=1e-4, atol=1e-5,
             label={"zh": "train：固定模型上 3 步的 P('a')"}),
        Case("train(beta=0.5) against a reference that differs from the policy: P('a') over 3 steps", "hidden",
             other_reference_and_beta, rtol=1e-4, atol=1e-5, label={"zh": "train(beta=0.5)，参考模型与策略不同：3 步的 P('a')"},
             note={"en": "train must pass its own beta to the loss (not the default 0.1), and score ref_chosen and "
                         "ref_rejected with the frozen reference, not with the policy: here the reference is a "
                         "different network, so either mistake changes every step.",
                   "zh": "train 必须把自己的 beta 传给损失（而不是默认的 0.1），并用冻结的参考模型计算 ref_chosen 和 "
                         "ref_rejected，而不是用策略：这里参考模型是另一个网络，两种错误都会改变每一步。"}),
        Case("training: P('a') after 40 steps", "visible", training, expect=trained, scope="full",
             label={"zh": "训练：40 步后的 P('a')"}),
    ]
