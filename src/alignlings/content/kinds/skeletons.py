"""The skeletons ``alignlings dev new ID --kind KIND`` writes for the built-in kinds: each a small
complete exercise that ``alignlings dev check`` can already grade, every text a teacher must write
marked ``TODO(author)`` (``PLACEHOLDER``), which ``dev check`` reports until it is replaced. Each kind
asks for its own (``Kind.skeleton``); a new kind writes its skeleton in its own module.

- ``fill`` (``kind = "code"``): ``f(x, beta) = mean(beta * x)`` with two blanks, per-blank hints,
  three misconceptions, and visible, hidden (``fresh()`` seeds) and edge cases;
- ``quiz``: one question with four explained options;
- ``bug``: a masked mean that divides by every position (buggy.py), its fix (solution.py), the
  ``region`` of the bug, two ``[[wrong_fix]]`` and the ``story`` of the real bug;
- ``bug-or-not``: ``bugornot.toml`` with code, an observation, the answer and three reasons;
- ``predict``: ``predict.toml`` with one question (three options, a result text and a chart) and a
  ``variant.py`` whose ``run_*`` really runs gradient descent at two learning rates and whose
  ``supports_*`` reads the option off the measured numbers; texts with a statement only.

Plain text only: this module imports nothing of the pack loader, so a kind can call it.
"""

from __future__ import annotations

from alignlings.content.packdata import PLACEHOLDER


def function_name(exercise_id: str) -> str:
    return exercise_id.replace("-", "_")


def fill(exercise_id: str) -> dict[str, str]:
    fn = function_name(exercise_id)
    t = PLACEHOLDER
    return {
        "exercise.toml": f'''id = "{exercise_id}"          # must equal the folder's name
kind = "code"
level = 1                 # 1..5
title = {{ en = "{t}: English title", zh = "{t}: 中文标题" }}
timeout = 10              # wall seconds for one grading run, 1..120
cloze = false
entry = ["{fn}"]          # every name the cases call on the learner's module
preload = []
''',
        "solution.py": f'''"""{t}: what this exercise implements, and the paper or library it follows."""

import torch


def {fn}(x: torch.Tensor, beta: float = 0.1) -> torch.Tensor:
    """{t}: the docstring a learner reads; here the mean of beta * x."""
    scaled = beta * x  # BLANK
    return scaled.mean()  # BLANK


if __name__ == "__main__":
    print({fn}(torch.tensor([1.0, 2.0, 3.0])))  # tensor(0.2000)
''',
        "check.py": f'''"""Cases for {exercise_id}: the statement's data, random batches, an edge case."""

from alignlings.content.checks import Case, fresh


def cases():
    import torch

    def spec(m):
        return m.{fn}(torch.tensor([1.0, 2.0, 3.0]), beta=0.1)

    def random_batch(seed, n, beta):
        def run(m):
            # seeded: the reference and the learner see the same draws; fresh() redraws them for a review
            g = torch.Generator().manual_seed(fresh(seed))
            return m.{fn}(torch.randn(n, generator=g), beta=beta)

        return run

    return [
        Case("statement data", "visible", spec),
        Case("random batch", "hidden", random_batch(0, 16, 0.5)),
        Case("another batch", "hidden", random_batch(1, 5, 2.0)),
        Case("large values", "edge", lambda m: m.{fn}(torch.full((4,), 1e30), beta=0.1),
             note={{"en": "{t}: why this case matters", "zh": "{t}: 这个用例为什么重要"}}),
    ]
''',
        "misconceptions.toml": f'''[[misconception]]
id = "beta-missing"
blank = 1
fill = "x"
feedback.en = "{t}: what this mistake shows and how to fix it."
feedback.zh = "{t}: 这个错误说明了什么，怎么改。"

[[misconception]]
id = "divides-by-beta"
blank = 1
fill = "x / beta"
feedback.en = "{t}: feedback for dividing by beta."
feedback.zh = "{t}: 除以 beta 的反馈。"

[[misconception]]
id = "sum-not-mean"
blank = 2
fill = "scaled.sum()"
feedback.en = "{t}: feedback for summing instead of averaging."
feedback.zh = "{t}: 求和而不是求平均的反馈。"
''',
        "texts/en.toml": f'''statement = """{t}: the statement in Markdown; formulas in $...$ or $$...$$."""
blanks = ["{t}: what goes in blank 1", "{t}: what goes in blank 2"]
hints = ["{t}: a nudge", "{t}: a stronger hint", "{t}: the formula"]
# per blank, from a nudge to the answer (at least two each): `alignlings hint ID --blank N`
blank_hints = [
    ["{t}: blank 1, a nudge", "{t}: blank 1, the answer"],
    ["{t}: blank 2, a nudge", "{t}: blank 2, the answer"],
]
explanation = """{t}: why the reference is right (shown with the solution)."""
''',
        "texts/zh.toml": f'''statement = """{t}: 题目说明（Markdown）；公式写在 $...$ 或 $$...$$ 中。"""
blanks = ["{t}: 第 1 空填什么", "{t}: 第 2 空填什么"]
hints = ["{t}: 轻微提示", "{t}: 更强的提示", "{t}: 公式"]
blank_hints = [
    ["{t}: 第 1 空，轻微提示", "{t}: 第 1 空，答案"],
    ["{t}: 第 2 空，轻微提示", "{t}: 第 2 空，答案"],
]
explanation = """{t}: 参考答案为什么正确（与答案一起显示）。"""

[comments]
''',
    }


def texts(t: str, en_extra: str = "", zh_extra: str = "") -> dict[str, str]:
    return {
        "texts/en.toml": f'''statement = """{t}: the statement in Markdown; formulas in $...$ or $$...$$."""
hints = ["{t}: a nudge", "{t}: a stronger hint", "{t}: nearly the answer"]
explanation = """{t}: why the answer is right (shown once answered)."""
{en_extra}''',
        "texts/zh.toml": f'''statement = """{t}: 题目说明（Markdown）；公式写在 $...$ 或 $$...$$ 中。"""
hints = ["{t}: 轻微提示", "{t}: 更强的提示", "{t}: 几乎就是答案"]
explanation = """{t}: 答案为什么正确（作答后显示）。"""
{zh_extra}''',
    }


def quiz(exercise_id: str) -> dict[str, str]:
    t = PLACEHOLDER
    options = "".join(f'''
[[question.option]]
text.en = "{t}: option {i + 1}"
text.zh = "{t}: 选项 {i + 1}"
why.en = "{t}: why option {i + 1} is {'right' if i == 2 else 'wrong'}"
why.zh = "{t}: 选项 {i + 1} 为什么{'对' if i == 2 else '错'}"
''' for i in range(4))
    return {
        "exercise.toml": f'''id = "{exercise_id}"          # must equal the folder's name
kind = "quiz"
level = 1                 # 1..5
title = {{ en = "{t}: English title", zh = "{t}: 中文标题" }}
''',
        "quiz.toml": f'''[[question]]
id = "{exercise_id}-q1"
answer = 2                # index of the right option, 0-based
question.en = "{t}: the question"
question.zh = "{t}: 问题"
{options}''',
        **texts(t),
    }


def bug(exercise_id: str) -> dict[str, str]:
    t = PLACEHOLDER
    buggy = '''"""A masked mean: the average of ``values`` over the positions where ``mask`` is 1."""

import torch


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` is 1 (padding has mask 0)."""
    total = (values * mask).sum()
    return total / mask.numel()  # the bug: padding positions count in the denominator
'''
    solution = buggy.replace("    return total / mask.numel()  # the bug: padding positions count in the denominator\n",
                             "    return total / mask.sum()  # only the real positions count\n")
    region_line = buggy.splitlines().index("    return total / mask.numel()  # the bug: padding positions count in the "
                                           "denominator") + 1
    return {
        "exercise.toml": f'''id = "{exercise_id}"          # must equal the folder's name
kind = "bug"
level = 1                 # 1..5
title = {{ en = "{t}: English title", zh = "{t}: 中文标题" }}
timeout = 10              # wall seconds for one grading run, 1..120
entry = ["masked_mean"]   # every name the cases call on the learner's module
region = [{region_line}, {region_line}]       # lines of buggy.py where the bug is (the hint says "look near ...")
''',
        "buggy.py": buggy,
        "solution.py": solution,
        "check.py": '''"""Cases that show the symptom: batches with padding (mask 0)."""

from alignlings.content.checks import Case, fresh


def cases():
    import torch

    def spec(m):
        return m.masked_mean(torch.tensor([1.0, 2.0, 3.0, 0.0]), torch.tensor([1.0, 1.0, 1.0, 0.0]))

    def random_batch(seed, n):
        def run(m):
            g = torch.Generator().manual_seed(fresh(seed))  # seeded; fresh() redraws for a review
            values = torch.randn(n, generator=g)
            mask = (torch.rand(n, generator=g) > 0.3).float()
            mask[0] = 1.0  # at least one real position
            return m.masked_mean(values, mask)

        return run

    return [
        Case("statement data", "visible", spec),
        Case("random batch", "hidden", random_batch(0, 12)),
        Case("another batch", "hidden", random_batch(1, 7)),
    ]
''',
        "misconceptions.toml": f'''# known wrong fixes: `find` (exactly once in buggy.py) replaced by `replace`
[[wrong_fix]]
id = "ignores-mask"
find = "    total = (values * mask).sum()\\n    return total / mask.numel()"
replace = "    return values.mean()"
feedback.en = "{t}: why averaging every position, padding included, is still wrong."
feedback.zh = "{t}: 为什么对所有位置（包括 padding）取平均仍然不对。"

[[wrong_fix]]
id = "sum-not-mean"
find = "    return total / mask.numel()"
replace = "    return total"
feedback.en = "{t}: why the sum is not the mean."
feedback.zh = "{t}: 为什么求和不等于求平均。"
''',
        **texts(t, f'story = """{t}: the real bug: repository, issue or PR, the symptom, the fix."""\n',
                 f'story = """{t}: 真实的 bug：仓库、issue 或 PR、症状、修复。"""\n'),
    }


def bug_or_not(exercise_id: str) -> dict[str, str]:
    t = PLACEHOLDER
    reasons = "".join(f'''
[[reason]]
text.en = "{t}: reason {i + 1}"
text.zh = "{t}: 理由 {i + 1}"
why.en = "{t}: why reason {i + 1} is {'right' if i == 0 else 'wrong'}"
why.zh = "{t}: 理由 {i + 1} 为什么{'对' if i == 0 else '错'}"
{'correct = true' if i == 0 else ''}
''' for i in range(3))
    return {
        "exercise.toml": f'''id = "{exercise_id}"          # must equal the folder's name
kind = "bug-or-not"
level = 1                 # 1..5
title = {{ en = "{t}: English title", zh = "{t}: 中文标题" }}
''',
        "bugornot.toml": f'''code = \'\'\'
# {t}: the code (and the numbers it logs) the learner reads
loss = -F.logsigmoid(chosen_rewards - rejected_rewards).mean()
\'\'\'
answer = "expected"       # "bug" or "expected"
observation.en = "{t}: what looks wrong"
observation.zh = "{t}: 看起来不对的现象"
why.en = "{t}: why it is (or is not) a bug"
why.zh = "{t}: 为什么是（或不是）bug"
{reasons}''',
        **texts(t),
    }


def predict(exercise_id: str) -> dict[str, str]:
    """A predict item: gradient descent on f(x) = x² with a small and a large learning rate; the
    learner predicts what the large one does. ``variant.py`` really runs both (torch, no randomness)
    and ``supports_*`` decides the option from the measured numbers, so ``dev check`` passes once
    the texts are written."""
    fn = function_name(exercise_id)
    t = PLACEHOLDER
    why = ["both shrink x", "the large step lands closer to 0", "the large step overshoots further every time"]
    options = "".join(f'''
[[question.option]]
text.en = "{t}: option {i + 1}"
text.zh = "{t}: 选项 {i + 1}"
why.en = "{t}: why a learner might expect this, and what the run shows ({why[i]})"
why.zh = "{t}: 为什么有人会这样预测，实际运行又说明了什么"
''' for i in range(3))
    return {
        "exercise.toml": f'''id = "{exercise_id}"          # must equal the folder's name
kind = "predict"
level = 1                 # 1..5
title = {{ en = "{t}: Predict: English title", zh = "{t}: 预测：中文标题" }}
''',
        "predict.toml": f'''# One [[question]] per prediction (usually one). Asked BEFORE the run: the learner commits to an
# option, then variant.py's `run` function runs and the result, the chart, every option's `why` and
# the explanation are shown. `dev check` runs it and requires supports(run()) == answer.
[[question]]
id = "{exercise_id}"       # unique in the pack across quiz, bug-or-not and predict ids
concepts = []             # tags from [concepts] of the pack's texts/<lang>.toml, e.g. ["kl-penalty"]
answer = 2                # 0-based index of the option the measured run supports
run = "run_{fn}"
supports = "supports_{fn}"
question.en = "{t}: gradient descent on f(x) = x² from x = 1, 20 steps with lr 0.1 and with lr 1.1. What does x do with lr 1.1?"
question.zh = "{t}: 在 f(x) = x² 上从 x = 1 开始做梯度下降，学习率 0.1 和 1.1 各走 20 步。学习率 1.1 时 x 会怎样？"
result.en = "{t}: after 20 steps |x| is {{small:.2g}} with lr 0.1 and {{large:.2g}} with lr 1.1."
result.zh = "{t}: 20 步之后，学习率 0.1 时 |x| 为 {{small:.2g}}，学习率 1.1 时为 {{large:.2g}}。"
explanation.en = "{t}: why (shown after the result): each step multiplies x by 1 - 2·lr, that is 0.8 and -1.2."
explanation.zh = "{t}: 为什么（在结果之后显示）：每一步把 x 乘以 1 - 2·lr，即 0.8 和 -1.2。"
{options}
[question.chart]          # optional: a line chart of result["series"]
x.en = "{t}: step"
x.zh = "{t}: 步数"
y.en = "|x|"
y.zh = "|x|"
[question.chart.series.small]
en = "lr 0.1"
zh = "学习率 0.1"
[question.chart.series.large]
en = "lr 1.1"
zh = "学习率 1.1"
''',
        "variant.py": f'''"""{t}: what this run shows, and which exercise it previews.

Each `run_*` function is run in its own process (CPU, one thread, a time limit) and returns
{{"values": {{name: float}}, "series": {{name: [float, ...]}}}}; `supports_*` reads those numbers and
returns the index of the option they support, decided with margins, never a constant.
"""

from __future__ import annotations

import torch


def _descend(lr: float, steps: int = 20) -> list[float]:
    """|x| after each gradient step on f(x) = x², from x = 1."""
    x = torch.tensor(1.0, requires_grad=True)
    out = []
    for _ in range(steps):
        (grad,) = torch.autograd.grad(x * x, x)
        with torch.no_grad():
            x -= lr * grad
        out.append(abs(x.item()))
    return out


def run_{fn}() -> dict:
    """No randomness here; seed a torch.Generator where there is."""
    small, large = _descend(0.1), _descend(1.1)
    return {{"values": {{"small": small[-1], "large": large[-1]}}, "series": {{"small": small, "large": large}}}}


def supports_{fn}(result: dict) -> int:
    """0: both end near 0; 1: lr 1.1 ends closer to 0 than lr 0.1; 2: lr 1.1 ends further from 0 than it started."""
    v = result["values"]
    if v["large"] > 2.0:  # started at 1: well beyond it
        return 2
    if v["large"] < 0.5 * v["small"]:
        return 1
    return 0
''',
        "texts/en.toml": f'''# A predict item has a statement only: no hints (they would answer the question before the learner
# commits) and no explanation here (each question's explanation in predict.toml follows its run).
statement = """{t}: one to three sentences: what is varied and what is measured, nothing that answers it."""
''',
        "texts/zh.toml": f'''statement = """{t}: 一到三句话：改变了什么、测量什么，不透露答案。"""
''',
    }
