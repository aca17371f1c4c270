from alignlings.content.checks import Case


def cases():
    import torch

    def symptom(m):
        # 2 prompts x 4 rounds: prompt 1 always right, prompt 2 always wrong
        r = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0])
        return m.grpo_advantages(r, 4)

    def random_rewards(m):
        g = torch.Generator().manual_seed(11)
        # 3 prompts x 4 rounds, each prompt with its own reward level
        level = torch.tensor([0.1, 0.5, 0.9])
        r = (level.repeat(4) + 0.1 * torch.randn(12, generator=g))
        return m.grpo_advantages(r, 4)

    def binary_wide(m):
        g = torch.Generator().manual_seed(12)
        r = (torch.rand(5 * 8, generator=g) < 0.4).float()
        return m.grpo_advantages(r, 8)

    def one_prompt(m):
        r = torch.tensor([0.0, 1.0, 0.5, 0.25])
        return m.grpo_advantages(r, 4)

    def rounds_equal_prompts(m):
        g = torch.Generator().manual_seed(13)
        return m.grpo_advantages(torch.randn(4 * 4, generator=g), 4)

    return [
        Case("2 prompts x 4 rounds, one always right, one always wrong", "visible", symptom,
             label={"zh": "2 个 prompt × 4 轮：一个总是答对，一个总是答错"},
             note={"en": "each prompt's four answers got the same reward, so every advantage must be 0; "
                         "+-0.87 means the groups mixed the two prompts",
                   "zh": "每个 prompt 的四个回答奖励都相同，所以优势全应为 0；出现 ±0.87 说明分组把两个 prompt 混在了一起"}),
        Case("3 prompts x 4 rounds, random rewards", "hidden", random_rewards, label={"zh": "3 个 prompt × 4 轮，随机奖励"}),
        Case("5 prompts x 8 rounds, 0/1 rewards", "hidden", binary_wide, label={"zh": "5 个 prompt × 8 轮，0/1 奖励"}),
        Case("one prompt", "edge", one_prompt, label={"zh": "只有一个 prompt"},
             note={"en": "with a single prompt the order does not matter: this case passed before the fix too",
                   "zh": "只有一个 prompt 时顺序无关紧要：修复前这个用例也能通过"}),
        Case("as many prompts as rounds", "edge", rounds_equal_prompts, label={"zh": "prompt 数与轮数相同"},
             note={"en": "P = G = 4: a [G, P] view and a [P, G] view have the same shape, so only the axis tells them apart",
                   "zh": "P = G = 4 时 [G, P] 和 [P, G] 两种 view 形状相同，只能靠维度区分"}),
    ]
