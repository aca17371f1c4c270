"""Cases for the grpo-advantages exercise: the spec's four groups, list input, random groups, eps."""

from alignlings.content.checks import Case, fresh


def cases():
    import torch

    continuous = [0.83, 0.41, 0.95, 0.27, 0.62, 0.09, 0.51, 0.78]
    outlier = [0.10, 0.12, 0.85, 0.08, 0.15, 0.11, 0.09, 0.13]

    def tensor_group(values):
        return lambda m: m.compute_grpo_advantages(torch.tensor(values))

    def sparse(m):
        rewards = torch.zeros(128)
        rewards[[7, 53, 91]] = 1.0
        return m.compute_grpo_advantages(rewards)

    def from_list(m):
        return m.compute_grpo_advantages(list(continuous))

    def random_group(seed, size, binary):
        def run(m):
            g = torch.Generator().manual_seed(fresh(seed))
            rewards = torch.rand(size, generator=g)
            if binary:
                rewards = (rewards < 0.3).float()
            return m.compute_grpo_advantages(rewards * 4 - 1)
        return run

    def pair(m):
        return m.compute_grpo_advantages(torch.tensor([0.0, 1.0]))

    def large_eps(m):
        return m.compute_grpo_advantages(torch.tensor([0.0, 1.0, 3.0, 0.5]), eps=0.5)

    def flat_zero_eps(m):
        # a non-flat group with eps=0 must still work
        return m.compute_grpo_advantages(torch.tensor([2.0, -1.0, 0.5]), eps=0.0)

    return [
        Case("continuous rewards, G=8", "visible", tensor_group(continuous), label={"zh": "连续奖励，G=8"}),
        Case("all rewards equal, G=8", "visible", tensor_group([0.5] * 8), label={"zh": "奖励全部相等，G=8"}, note={
            "en": "A group whose responses all score the same carries no learning signal: every advantage "
                  "must be 0, not NaN. The std is 0 here, so only eps keeps the division finite.",
            "zh": "组内所有回答得分相同，就没有任何学习信号：每个优势都必须是 0，而不是 NaN。"
                  "此时标准差为 0，只有 eps 能让除法保持有限。",
        }),
        Case("one outlier, G=8", "visible", tensor_group(outlier), label={"zh": "一个离群值，G=8"}),
        Case("sparse pass/fail, G=128 (successes at 7, 53, 91)", "visible", sparse, label={"zh": "稀疏的通过/失败，G=128（第 7、53、91 个成功）"}),
        Case("rewards given as a Python list", "hidden", from_list, label={"zh": "以 Python 列表给出的奖励"}),
        Case("random continuous group, G=16", "hidden", random_group(1, 16, False), label={"zh": "随机连续奖励的组，G=16"}),
        Case("random pass/fail group, G=64", "hidden", random_group(2, 64, True), label={"zh": "随机通过/失败的组，G=64"}),
        Case("group of 2", "hidden", pair, label={"zh": "2 个回答的组"}),
        Case("eps = 0.5 is respected", "edge", large_eps, label={"zh": "遵守 eps = 0.5"}, note={
            "en": "eps is added to the standard deviation itself, outside the square root: (r - mean) / (std + eps).",
            "zh": "eps 加在标准差本身上，在平方根之外：(r - mean) / (std + eps)。",
        }),
        Case("eps = 0 on a group with spread", "edge", flat_zero_eps, label={"zh": "有离散度的组上 eps = 0"}),
    ]
