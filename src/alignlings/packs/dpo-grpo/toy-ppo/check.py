"""Cases for the toy-ppo exercise: each piece on the statement's numbers and on random right-padded
batches (values and gradients), the padding that must not be bootstrapped, a gradient inside the
trust region, three iterations of the whole loop, and the training run's outcome."""

from alignlings.content.checks import Case, fresh


def cases():
    import functools

    import torch

    def one_thread(fn):
        # a 16-wide model is much faster on one thread; restore the caller's setting afterwards
        @functools.wraps(fn)
        def run(m):
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                return fn(m)
            finally:
                torch.set_num_threads(threads)
        return run

    # the statement's batch: two responses of 3 real tokens and 1 (an EOS at once), T = 4, right-padded
    SPEC_MASK = torch.tensor([[1.0, 1, 1, 0], [1, 0, 0, 0]])
    SPEC_LOGPS = torch.tensor([[-1.0, -0.5, -2.0, -7.0], [-0.3, -9.0, -9.0, -9.0]])
    SPEC_REF = torch.tensor([[-1.2, -0.5, -1.5, -3.0], [-0.1, -1.0, -1.0, -1.0]])
    SPEC_SCORES = torch.tensor([0.5, 0.0])
    SPEC_VALUES = torch.tensor([[0.2, 0.4, 0.5, 9.0], [0.1, 9.0, 9.0, 9.0]])  # 9 on padding: never a state

    def batch(seed, B=6, T=5):
        g = torch.Generator().manual_seed(fresh(seed))
        lengths = torch.randint(1, T + 1, (B,), generator=g)
        mask = (torch.arange(T) < lengths[:, None]).float()
        garbage = 50 * (1 - mask)  # what a model computes on padding
        logps = -torch.rand(B, T, generator=g) * 3 - garbage
        ref_logps = -torch.rand(B, T, generator=g) * 3
        old_logps = logps + torch.randn(B, T, generator=g) * 0.3  # ratios on both sides of the clip
        values = torch.randn(B, T, generator=g) + garbage
        old_values = values + torch.randn(B, T, generator=g) * 0.5
        returns = torch.randn(B, T, generator=g)
        advantages = torch.randn(B, T, generator=g) * mask
        scores = torch.rand(B, generator=g)
        return dict(mask=mask, logps=logps, ref_logps=ref_logps, old_logps=old_logps, values=values,
                    old_values=old_values, returns=returns, advantages=advantages, scores=scores)

    def spec_logprobs(m):
        g = torch.Generator().manual_seed(0)
        logits = torch.randn(2, 5, 10, generator=g)
        ids = torch.tensor([[9, 0, 0, 3, 9], [9, 9, 2, 2, 2]])
        return m.token_logprobs(logits, ids)

    def random_logprobs(m):
        g = torch.Generator().manual_seed(fresh(1))
        logits = torch.randn(4, 7, 10, generator=g) * 3
        logits.requires_grad_()
        ids = torch.randint(0, 10, (4, 7), generator=g)
        out = m.token_logprobs(logits, ids)
        return out, torch.autograd.grad(out.sum(), logits)[0]

    def spec_rewards(m):
        return m.kl_shaped_rewards(SPEC_SCORES.clone(), SPEC_LOGPS, SPEC_REF, SPEC_MASK, 0.05)

    def random_rewards(m):
        b = batch(2)
        return m.kl_shaped_rewards(b["scores"], b["logps"], b["ref_logps"], b["mask"], 0.1)

    def spec_gae(m):
        rewards = m.kl_shaped_rewards(SPEC_SCORES.clone(), SPEC_LOGPS, SPEC_REF, SPEC_MASK, 0.05)
        return m.gae(rewards, SPEC_VALUES, SPEC_MASK, 1.0, 0.95)

    def random_gae(m):
        b = batch(3)
        rewards = torch.randn(b["mask"].shape, generator=torch.Generator().manual_seed(fresh(4))) * b["mask"]
        return m.gae(rewards, b["values"], b["mask"], 0.9, 0.8)

    def gae_lambda_one(m):
        # gamma = lam = 1: the advantages are the rewards-to-go minus the values
        b = batch(5)
        rewards = torch.rand(b["mask"].shape, generator=torch.Generator().manual_seed(fresh(6))) * b["mask"]
        return m.gae(rewards, b["values"], b["mask"], 1.0, 1.0)

    def policy_loss(seed):
        def run(m):
            b = batch(seed)
            logps = b["logps"].clone().requires_grad_()
            loss = m.clipped_policy_loss(logps, b["old_logps"], b["advantages"], b["mask"], 0.2)
            return loss, torch.autograd.grad(loss, logps)[0]
        return run

    def inside_trust_region(m):
        # every ratio in [0.8, 1.2]: the clip does nothing, so the gradient is the plain policy gradient
        b = batch(8)
        logps = (b["old_logps"] + 0.1 * torch.tanh(b["logps"] - b["old_logps"])).requires_grad_()
        loss = m.clipped_policy_loss(logps, b["old_logps"], b["advantages"], b["mask"], 0.2)
        return loss, torch.autograd.grad(loss, logps)[0]

    def value_loss(seed, c):
        def run(m):
            b = batch(seed)
            values = b["values"].clone().requires_grad_()
            loss = m.clipped_value_loss(values, b["old_values"], b["returns"], b["mask"], c)
            return loss, torch.autograd.grad(loss, values)[0]
        return run

    @one_thread
    def three_iterations(m):
        history = m.train(iterations=3, batch_size=16, seed=3)
        return [float(p) for p in history["p_aaaa"]], [float(s) for s in history["score"]]

    @one_thread
    def training(m):
        """The trained policy's and critic's weights, as data: P("aaaa"), the score and the critic are
        measured from them on the trusted side (``trained``), never taken from the learner's process.
        train keeps its models local: the policy is the one it hands sample_responses, the critic the
        instance of the module's Critic it builds."""
        seen = {}
        sample_responses, critic_class = m.sample_responses, m.Critic

        def recorded_sampling(policy, *args, **kwargs):
            seen["policy"] = policy
            return sample_responses(policy, *args, **kwargs)

        class RecordedCritic(critic_class):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                seen["critic"] = self

        m.sample_responses, m.Critic = recorded_sampling, RecordedCritic
        try:
            m.train()
        finally:
            m.sample_responses, m.Critic = sample_responses, critic_class
        if "policy" not in seen or "critic" not in seen:
            raise RuntimeError("train did not sample with sample_responses or build a Critic")
        return {name: {k: v.detach().clone() for k, v in seen[name].state_dict().items()}
                for name in ("policy", "critic")}

    def measure(state, batches=5, batch_size=64):
        """P("aaaa") of the trained policy; on fresh batches of its responses, their mean score and the
        critic's mean prediction against the lambda-return it should predict (the pack's own token
        log-probs, KL-shaped rewards and GAE, with the reference train starts from: seed 0)."""
        from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model

        V, BOS, TARGET, L = 10, 9, 0, 4
        config = GPT2Config(vocab_size=V, n_positions=1 + L, n_embd=16, n_layer=1, n_head=2, bos_token_id=BOS,
                            eos_token_id=BOS)

        class Critic(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.body = GPT2Model(config)
                self.head = torch.nn.Linear(config.n_embd, 1)

            def forward(self, input_ids):
                return self.head(self.body(input_ids=input_ids).last_hidden_state).squeeze(-1)

        def logprobs(logits, ids):
            return torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)

        torch.manual_seed(0)
        ref = GPT2LMHeadModel(config).eval()
        policy, critic = GPT2LMHeadModel(config).eval(), Critic().eval()
        policy.load_state_dict(state["policy"])
        critic.load_state_dict(state["critic"])
        g = torch.Generator().manual_seed(12345)
        scores_all, value_sum, return_sum, tokens = [], 0.0, 0.0, 0.0
        with torch.no_grad():
            aaaa = torch.tensor([[BOS] + [TARGET] * L])
            p = logprobs(policy(input_ids=aaaa).logits, aaaa).sum().exp().item()
            for _ in range(batches):
                ids = torch.full((batch_size, 1), BOS)
                for _ in range(L):
                    probs = policy(input_ids=ids).logits[:, -1].softmax(-1)
                    ids = torch.cat([ids, torch.multinomial(probs, 1, generator=g)], dim=1)
                is_eos = (ids[:, 1:] == BOS).long()
                mask = ((is_eos.cumsum(-1) - is_eos) == 0).float()
                logps = logprobs(policy(input_ids=ids).logits, ids)
                ref_logps = logprobs(ref(input_ids=ids).logits, ids)
                values = critic(ids)[:, :-1] * mask
                scores = ((ids[:, 1:] == TARGET).float() * mask).sum(-1) / L
                rewards = -0.05 * (logps - ref_logps) * mask
                last = torch.where(mask > 0, torch.arange(L).expand_as(mask), -1).max(dim=1).values
                rewards[torch.arange(batch_size), last] += scores
                next_value, last_gae, advantages = torch.zeros(batch_size), torch.zeros(batch_size), []
                for t in reversed(range(L)):
                    delta = rewards[:, t] + next_value - values[:, t]
                    last_gae = (delta + 0.95 * last_gae) * mask[:, t]
                    next_value = values[:, t]
                    advantages.append(last_gae)
                advantages = torch.stack(advantages[::-1], dim=1)
                scores_all.append(scores.mean().item())
                value_sum += values.sum().item()
                return_sum += ((advantages + values) * mask).sum().item()
                tokens += mask.sum().item()
        return p, sum(scores_all) / len(scores_all), value_sum / tokens, return_sum / tokens

    def trained(state):
        if not isinstance(state, dict) or set(state) != {"policy", "critic"} or not all(
                isinstance(state[k], dict) for k in state):
            return False, "training returned something other than the policy's and the critic's weights"
        try:
            p, score, value, target = measure(state)
        except (RuntimeError, TypeError, KeyError) as exc:
            return False, f"the weights do not fit the exercise's models: {str(exc)[:200]}"
        # the critic must have learned the lambda-returns too: the task is solved even with a critic trained on
        # the advantages (its predictions settle near half the lambda-returns), so p and the score prove nothing there
        critic_ok = abs(value - target) <= 0.15 * abs(target) + 0.02
        return p >= 0.75 and score >= 0.9 and critic_ok, (
            f'P("aaaa") = {p:.3f} and a mean score of {score:.3f} on 5 fresh batches after 40 iterations '
            f"(they should end above 0.75 and 0.90); the critic predicts {value:.3f} on average where the "
            f"lambda-return averages {target:.3f} (they should agree within 15%)")

    return [
        Case("token log-probs of two sequences", "visible", spec_logprobs, label={"zh": "两条序列的 token 对数概率"}),
        Case("KL-shaped rewards on the statement's batch", "visible", spec_rewards,
             label={"zh": "题目批次上的 KL 塑形奖励"},
             note={"en": "Padding gets no reward, and the score goes on the last real token: position 2 of the "
                         "first row, position 0 of the second (a response that is only an EOS).",
                   "zh": "padding 上没有奖励，得分放在最后一个真实 token 上：第一行的位置 2，第二行的位置 0"
                         "（只有一个 EOS 的回答）。"}),
        Case("GAE on the statement's batch (gamma 1, lambda 0.95)", "visible", spec_gae,
             label={"zh": "题目批次上的 GAE（gamma 1，lambda 0.95）"},
             note={"en": "The values on padding are 9: a last real token that bootstraps from them continues the "
                         "episode into padding. After the last real token the next value is 0.",
                   "zh": "padding 上的价值是 9：如果最后一个真实 token 从它们自举，回合就延续到了 padding 里。"
                         "最后一个真实 token 之后的下一个价值是 0。"}),
        Case("token log-probs and their gradient, random logits", "hidden", random_logprobs,
             label={"zh": "随机 logits 上的 token 对数概率及其梯度"}),
        Case("KL-shaped rewards on a random padded batch, kl_coef 0.1", "hidden", random_rewards,
             label={"zh": "随机带 padding 批次上的 KL 塑形奖励，kl_coef 0.1"}),
        Case("GAE on a random padded batch (gamma 0.9, lambda 0.8)", "hidden", random_gae,
             label={"zh": "随机带 padding 批次上的 GAE（gamma 0.9，lambda 0.8）"}),
        Case("GAE with gamma = lambda = 1: rewards-to-go minus values", "hidden", gae_lambda_one,
             label={"zh": "gamma = lambda = 1 时的 GAE：剩余奖励之和减去价值"}),
        Case("clipped policy loss and its gradient", "hidden", policy_loss(7),
             label={"zh": "裁剪的策略损失及其梯度"}),
        Case("clipped value loss and its gradient (c 0.2)", "hidden", value_loss(9, 0.2),
             label={"zh": "裁剪的价值损失及其梯度（c 0.2）"}),
        Case("clipped value loss and its gradient (c 0.5)", "hidden", value_loss(10, 0.5),
             label={"zh": "裁剪的价值损失及其梯度（c 0.5）"}),
        Case("policy gradient inside the trust region", "edge", inside_trust_region,
             label={"zh": "信赖域内的策略梯度"},
             note={"en": "With every ratio inside [0.8, 1.2] the clip changes nothing: the gradient must be the "
                         "whole policy gradient, not half of it (a detached clipped branch loses half at the ties "
                         "of max).",
                   "zh": "所有比率都在 [0.8, 1.2] 内时裁剪不起作用：梯度必须是完整的策略梯度，而不是一半"
                         "（把裁剪分支 detach 掉，会在 max 两个输入相等时丢掉一半）。"}),
        Case("three iterations of the loop: P('aaaa') and the batch scores", "visible", three_iterations,
             rtol=1e-4, atol=1e-5, label={"zh": "循环的 3 次迭代：P('aaaa') 与每批得分"}),
        Case("training: P('aaaa'), the score and the critic after 40 iterations", "visible", training,
             expect=trained, scope="full", label={"zh": "训练：40 次迭代后的 P('aaaa')、得分与评论家"}),
    ]
