from alignlings.content.checks import Case


def cases():
    import torch

    def symptom(m):
        # prompt 1: clearly better and worse answers; prompt 2: four nearly equal answers
        r = torch.tensor([0.0, 1.0, 0.0, 1.0, 0.50, 0.51, 0.50, 0.51])
        return m.grpo_advantages(r, 4, "batch")

    def batch_random(m):
        g = torch.Generator().manual_seed(3)
        r = torch.rand(6 * 8, generator=g) * torch.rand(6, 1, generator=g).repeat_interleave(8, 0).flatten()
        return m.grpo_advantages(r, 8, "batch")

    def group_unchanged(m):
        g = torch.Generator().manual_seed(4)
        return m.grpo_advantages(torch.randn(3 * 4, generator=g), 4, "group")

    def none_unchanged(m):
        g = torch.Generator().manual_seed(5)
        return m.grpo_advantages(torch.randn(2 * 4, generator=g), 4, "none")

    def constant_group(m):
        r = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0])
        return m.grpo_advantages(r, 4, "batch")

    return [
        Case("nearly equal answers, batch scaling", "visible", symptom, label={"zh": "几乎相同的回答，scale_rewards='batch'"},
             note={"en": "with one std for the batch, a prompt whose answers differ by 0.01 gets advantages near "
                         "0.02, not +-0.87",
                   "zh": "整个批次共用一个 std 时，回答只差 0.01 的 prompt 的优势应在 0.02 附近，而不是 ±0.87"}),
        Case("random batch of 6 prompts x 8", "hidden", batch_random, label={"zh": "随机批次：6 个 prompt × 8"}),
        Case("group scaling still per group", "hidden", group_unchanged, label={"zh": "group 缩放仍按组"}),
        Case("no scaling", "hidden", none_unchanged, label={"zh": "不缩放"}),
        Case("a group with equal rewards", "edge", constant_group, label={"zh": "奖励全相同的组"},
             note={"en": "a constant group has zero advantage whatever the scaling",
                   "zh": "奖励全相同的组，无论怎样缩放优势都是 0"}),
    ]
