from alignlings.content.checks import Case


def cases():
    import torch

    def symptom(m):
        # pass/fail rewards: one success among four attempts, and one failure among four
        return m.rloo_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 1.0]]))

    def binary_batch(m):
        g = torch.Generator().manual_seed(31)
        r = (torch.rand(6, 8, generator=g) < 0.3).float()
        r[0] = torch.tensor([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0])  # a lone success
        return m.rloo_advantages(r)

    def graded_rewards(m):
        g = torch.Generator().manual_seed(32)
        # partial credit in quarters: 0, 0.25, ..., 1
        r = torch.randint(0, 5, (4, 6), generator=g).float() / 4
        r[1] = torch.tensor([0.75, 0.75, 0.75, 0.75, 0.75, 0.25])
        return m.rloo_advantages(r)

    def equal_group(m):
        return m.rloo_advantages(torch.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]))

    def unnormalised(m):
        g = torch.Generator().manual_seed(33)
        return m.rloo_advantages((torch.rand(3, 5, generator=g) < 0.5).float(), normalize=False)

    def stats(m):
        return list(m.loo_baseline_and_std(torch.tensor([[1.0, 0.0, 0.0, 0.0]])))

    return [
        Case("one success and one failure among four attempts", "visible", symptom,
             label={"zh": "四次尝试中一次成功、一次失败"},
             note={"en": "the lone success's three neighbours all scored 0, so their std is 0: its advantage must stay "
                         "1 - 0 = 1, not 1 / 1e-6 = 1,000,000",
                   "zh": "唯一成功的那条，其余三条的奖励都是 0，std 为 0：它的优势应保持 1 - 0 = 1，而不是 1 / 1e-6 = 1000000"}),
        Case("6 prompts x 8, pass/fail rewards", "hidden", binary_batch, label={"zh": "6 个 prompt × 8，通过/失败奖励"}),
        Case("partial credit in quarters", "hidden", graded_rewards, label={"zh": "按 1/4 给部分分"}),
        Case("groups where every completion scored the same", "edge", equal_group, label={"zh": "所有回答得分相同的组"},
             note={"en": "reward - baseline is 0 there, normalised or not", "zh": "这时 reward - baseline 为 0，归不归一化都一样"}),
        Case("normalize=False", "edge", unnormalised, label={"zh": "normalize=False"}),
        Case("baseline and std of the others", "edge", stats, label={"zh": "其余回答的 baseline 与 std"},
             note={"en": "the statistics themselves are right: the baseline and std of the other three rewards",
                   "zh": "统计量本身是对的：就是其余三条奖励的 baseline 和 std"}),
    ]
