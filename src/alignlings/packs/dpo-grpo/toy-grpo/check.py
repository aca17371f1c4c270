"""Cases for the toy-grpo exercise.

Unit cases install their own seeded models into the learner's module (the functions read the
module globals policy, ref, old and opt), so they do not depend on what ran before them, nor on the
order in which a learner's code draws random numbers. The sampling, sync and training cases return
what the learner's code produced as data (the samples and log-probs, the models' weights); their
predicates measure it on the trusted side, so a file that replaces these functions from its own
module reports nothing that passes.
A whole file in the original page's form runs its 40-iteration loop at module level and defines no
train(): the sync and training cases then inspect the models that loop trained on import.
"""

from alignlings.content.checks import Case


def cases():
    import copy
    import functools
    import types

    import torch
    import torch.nn.functional as F
    from transformers import GPT2Config, GPT2LMHeadModel

    BOS, TARGET = 9, 0
    prompt = torch.tensor([[BOS]])
    config = GPT2Config(vocab_size=10, n_positions=4, n_embd=16, n_layer=1, n_head=2,
                        bos_token_id=BOS, eos_token_id=BOS, use_cache=False)

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

    def perturbed(model, scale, generator):
        model = copy.deepcopy(model)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=generator) * scale)
        return model

    def imported_models(m):
        """(policy, old, ref) as the module left them when it was imported, kept before any case installs its
        own. The original page's whole file runs its training loop at module level and defines no train():
        its trained models are these."""
        if not hasattr(m, "_models_at_import"):
            m._models_at_import = (getattr(m, "policy", None), getattr(m, "old", None), getattr(m, "ref", None))
        return m._models_at_import

    def trained_at_import(m):
        return not callable(getattr(m, "train", None))

    def install(m, seed, old_noise=0.0, policy_noise=0.0):
        """Fresh policy/ref/old/opt in module m; optionally move old and policy away from ref."""
        imported_models(m)
        torch.manual_seed(seed)
        base = GPT2LMHeadModel(config).eval()
        g = torch.Generator().manual_seed(seed + 1000)
        m.ref = copy.deepcopy(base).requires_grad_(False)
        m.old = perturbed(base, old_noise, g).requires_grad_(False)
        m.policy = perturbed(base, policy_noise, g).requires_grad_(True)
        m.opt = torch.optim.Adam(m.policy.parameters(), lr=3e-3)

    def logprobs(model):
        with torch.no_grad():
            return F.log_softmax(model(prompt).logits[0, -1], dim=-1)  # [V]

    def old_for_sampling():
        ns = types.SimpleNamespace()
        install(ns, 11, old_noise=0.6, policy_noise=0.0)
        return ns.old

    def plain(x):
        return x.detach() if torch.is_tensor(x) else x

    @one_thread
    def sampling(m):
        """What sample_group returned, as data: the summary (shapes, frequencies, log-probs) is
        measured from it on the trusted side (``sampling_ok``), never taken from the learner's process."""
        install(m, 11, old_noise=0.6, policy_noise=0.0)
        torch.manual_seed(1)
        samples, old_lp, rewards = m.sample_group(m.old, G=4000)
        default_samples = m.sample_group(m.old)[0]
        # whether a tensor carries a gradient is not part of the wire format: reported as a fact
        return {"samples": plain(samples), "old_lp": plain(old_lp), "rewards": plain(rewards),
                "default samples": plain(default_samples),
                "old_lp has no gradient": not getattr(old_lp, "requires_grad", False)}

    def summarise(data):
        samples, old_lp, rewards = data["samples"], data["old_lp"], data["rewards"]
        default_samples = data["default samples"]
        old_lp_all = logprobs(old_for_sampling())
        tensors = torch.is_tensor(samples) and torch.is_tensor(old_lp) and torch.is_tensor(default_samples)
        if not tensors:
            raise TypeError("sample_group must return tensors (samples, old_lp, rewards)")
        summary = {"shape": list(samples.shape), "default G": list(default_samples.shape),
                   "dtype": str(samples.dtype).replace("torch.", "")}
        ok_ids = samples.dtype == torch.int64 and samples.dim() == 1 and bool(((samples >= 0) & (samples < 10)).all())
        summary["ids in 0..9"] = ok_ids
        summary["old_lp is log pi_old at the samples"] = bool(
            ok_ids and old_lp.shape == samples.shape and torch.allclose(old_lp, old_lp_all[samples], atol=1e-5))
        freq = torch.bincount(samples.flatten().clamp(0, 9), minlength=10).float() / max(samples.numel(), 1)
        summary["frequencies follow pi_old"] = bool((freq - old_lp_all.exp()).abs().max() < 0.04)
        summary["old_lp has no gradient"] = data["old_lp has no gradient"] is True
        summary["rewards are 1 for 'a', 0 otherwise"] = bool(
            ok_ids and torch.is_tensor(rewards) and rewards.shape == samples.shape
            and torch.equal(rewards.float(), (samples == TARGET).float()))
        return summary

    def sampling_ok(data):
        if not isinstance(data, dict) or set(data) != {"samples", "old_lp", "rewards", "default samples",
                                                        "old_lp has no gradient"}:
            return False, "the sampling case returned something other than sample_group's outputs"
        summary = summarise(data)
        wrong = [k for k, v in summary.items() if v is False]
        if summary["shape"] != [4000]:
            wrong.append(f"shape {summary['shape']} for G=4000")
        if summary["default G"] != [32]:
            wrong.append(f"shape {summary['default G']} for the default G=32")
        return not wrong, "; ".join(f"{w}: no" if w in summary else w for w in wrong)

    def advantage_of(values):
        return lambda m: m.grpo_advantage(torch.tensor(values))

    # eps: the reference (as the original page) adds 1e-8 to the std, exercise 3 (as TRL) 1e-4. On a
    # group of 0/1 rewards the std is at least about 0.18 (G = 32), so the two differ by at most
    # about 1e-4 / 0.18 = 6e-4 relative: rtol 2e-3 accepts both, and still rejects the population
    # std, which is off by sqrt(G / (G - 1)) - 1 = 1.6% (G = 32) to 6.9% (G = 8).
    ADV_RTOL = 2e-3

    def random_rewards(m):
        g = torch.Generator().manual_seed(4)
        return m.grpo_advantage((torch.rand(32, generator=g) < 0.2).float())

    @one_thread
    def step(m):
        install(m, 21, old_noise=0.3, policy_noise=0.3)
        g = torch.Generator().manual_seed(22)
        samples = torch.randint(0, 10, (32,), generator=g)
        old_lp = logprobs(m.old)[samples]
        advantages = torch.randn(32, generator=g)
        m.policy.zero_grad(set_to_none=True)
        loss = m.grpo_step(samples, old_lp, advantages)
        loss.backward()
        grads = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten()
                           for p in m.policy.parameters()])
        return float(loss.detach()), grads

    @one_thread
    def clipped_gradient(m):
        # ratio = e (A = +1) and ratio = 1/e (A = -1): both outside [0.8, 1.2] on the side the min clips
        install(m, 31)
        samples = torch.tensor([0, 3, 3, 7, 1, 8])
        logp = logprobs(m.policy)[samples]
        largest = []
        for shift, advantage in ((-1.0, 1.0), (1.0, -1.0)):
            m.policy.zero_grad(set_to_none=True)
            m.grpo_step(samples, logp + shift, torch.full((6,), advantage), kl_coef=0.0).backward()
            largest.append(max(float(p.grad.abs().max()) if p.grad is not None else 0.0
                               for p in m.policy.parameters()))
        return tuple(largest)

    def weights(model):
        return {k: v.detach().clone() for k, v in model.state_dict().items()}

    @one_thread
    def sync(m):
        """The three models' weights after one iteration, as data: whether old was synced and ref kept
        is measured from them on the trusted side (``synced``), never taken from the learner's process.
        Whether old is a separate object is not in the weights: it is reported as a fact."""
        if trained_at_import(m):  # the loop ran at import: inspect the models it left
            policy, old, ref = imported_models(m)
        else:
            install(m, 41)
            m.train(iterations=1)
            policy, old, ref = m.policy, m.old, m.ref
        return {"trained at import": trained_at_import(m), "old is a separate model": old is not policy,
                "policy": weights(policy), "old": weights(old), "ref": weights(ref)}

    def same(a, b):
        return set(a) == set(b) and all(torch.is_tensor(a[k]) and torch.is_tensor(b[k]) and a[k].shape == b[k].shape
                                        and torch.equal(a[k], b[k]) for k in a)

    def synced(data):
        keys = {"trained at import", "old is a separate model", "policy", "old", "ref"}
        if not isinstance(data, dict) or set(data) != keys or not all(
                isinstance(data[k], dict) for k in ("policy", "old", "ref")):
            return False, "the sync case returned something other than the three models' weights"
        expected = set(weights(GPT2LMHeadModel(config)))
        if any(set(data[k]) != expected for k in ("policy", "old", "ref")):
            return False, "the models' weights do not fit the exercise's model"
        if data["trained at import"] is True:  # the page's own models: ref was never trained if it differs
            ref_kept = not same(data["policy"], data["ref"])
        else:
            ns = types.SimpleNamespace()
            install(ns, 41)
            ref_kept = same(data["ref"], weights(ns.ref))
        checks = {"old is a separate model": data["old is a separate model"] is True,
                  "old equals policy after an iteration": same(data["old"], data["policy"]),
                  "ref is still the initial model": ref_kept}
        wrong = [k for k, v in checks.items() if not v]
        return not wrong, "; ".join(f"{w}: no" for w in wrong)

    @one_thread
    def training(m):
        """The trained policy's weights, as data: P("a") is measured from them on the trusted side
        (``trained``), never taken from the learner's process."""
        if trained_at_import(m):  # the original page's file: its module-level loop trained m.policy on import
            policy = imported_models(m)[0].eval()
        else:
            install(m, 0)
            m.train()
            policy = m.policy
        return {k: v.detach().clone() for k, v in policy.state_dict().items()}

    def trained(state):
        model = GPT2LMHeadModel(config).eval()
        if not isinstance(state, dict):
            return False, f"training returned a {type(state).__name__}, not the policy's weights"
        try:
            model.load_state_dict(state)
        except (RuntimeError, TypeError, KeyError) as exc:
            return False, f"the policy's weights do not fit the exercise's model: {str(exc)[:200]}"
        with torch.no_grad():
            p = F.softmax(model(prompt).logits[0, -1], dim=-1)[TARGET].item()
        return p >= 0.7, f'P("a") = {p:.3f} after 40 iterations; it should end above 0.70'

    return [
        Case("sample_group draws G ids from old, with old's log-probs", "visible", sampling, label={"zh": "sample_group 从 old 中抽取 G 个 id，并给出 old 的对数概率"}, expect=sampling_ok,
             note={"en": "Sample with replacement from softmax(logits) of the model passed in, and keep the "
                         "log-softmax of the same logits at the sampled ids.",
                   "zh": "从传入模型的 softmax(logits) 中有放回地采样，并保留同一组 logits 的 log-softmax 在采样 id 处的值。"}),
        Case("grpo_advantage on 2 'a' among 8", "visible", advantage_of([1.0, 0, 0, 1, 0, 0, 0, 0]), label={"zh": "8 个回答中 2 个 'a' 时的 grpo_advantage"}, rtol=ADV_RTOL),
        Case("grpo_advantage on a random group of 32", "hidden", random_rewards, label={"zh": "32 个回答的随机组上的 grpo_advantage"}, rtol=ADV_RTOL),
        Case("grpo_advantage when no answer is 'a'", "edge", advantage_of([0.0] * 32), label={"zh": "没有回答是 'a' 时的 grpo_advantage"}, rtol=ADV_RTOL, note={
            "en": "All rewards equal: std = 0, so the advantages must be 0 (eps), not 0/0 = NaN.",
            "zh": "所有奖励相同：std = 0，所以优势必须是 0（靠 eps），而不是 0/0 = NaN。",
        }),
        # atol: the gradient's entries reach about 50, and an equivalent ratio written with another indexing
        # order moves the ones near 0 by float rounding (1e-6 absolute); a wrong blank moves them by far more
        Case("grpo_step: loss and gradients on a fixed state", "visible", step, atol=1e-4,
             label={"zh": "grpo_step：固定状态下的损失与梯度"}),
        Case("grpo_step: no gradient where the ratio is clipped", "edge", clipped_gradient, label={"zh": "grpo_step：比率被裁剪处没有梯度"}, note={
            "en": "With A > 0 and ratio = e > 1.2, or A < 0 and ratio = 1/e < 0.8, the min picks the clipped "
                  "term, which is constant: the gradient must be exactly 0 (kl_coef = 0 here).",
            "zh": "当 A > 0 且 ratio = e > 1.2，或 A < 0 且 ratio = 1/e < 0.8 时，min 选中裁剪项，而它是常数："
                  "梯度必须恰好为 0（这里 kl_coef = 0）。",
        }),
        Case("train: old is synced from policy after each iteration", "visible", sync, expect=synced, label={"zh": "train：每次迭代后 old 从 policy 同步"}),
        Case("training: P('a') after 40 iterations", "visible", training, label={"zh": "训练：40 次迭代后的 P('a')"}, expect=trained, scope="full"),
    ]
