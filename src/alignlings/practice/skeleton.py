"""``alignlings dev new ID --pack DIR``: a working skeleton of every file of a coding exercise.

The skeleton is a small complete exercise (``f(x, beta) = mean(beta * x)`` with two blanks, three
misconceptions and visible, hidden and edge cases), so that the teacher starts from something
``alignlings dev check`` can already grade; every text a teacher must write is marked
``TODO(author)``, which ``dev check`` reports until it is replaced.
"""

from __future__ import annotations

import re
from pathlib import Path

from alignlings.practice.packlint import PLACEHOLDER

ID_PATTERN = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


def function_name(exercise_id: str) -> str:
    return exercise_id.replace("-", "_")


def files(exercise_id: str) -> dict[str, str]:
    """Relative path -> content of the new exercise folder's files."""
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

from alignlings.practice.checks import Case


def cases():
    import torch

    def spec(m):
        return m.{fn}(torch.tensor([1.0, 2.0, 3.0]), beta=0.1)

    def random_batch(seed, n, beta):
        def run(m):
            g = torch.Generator().manual_seed(seed)  # seeded: the reference and the learner see the same draws
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
explanation = """{t}: why the reference is right (shown with the solution)."""
''',
        "texts/zh.toml": f'''statement = """{t}: 题目说明（Markdown）；公式写在 $...$ 或 $$...$$ 中。"""
blanks = ["{t}: 第 1 空填什么", "{t}: 第 2 空填什么"]
hints = ["{t}: 轻微提示", "{t}: 更强的提示", "{t}: 公式"]
explanation = """{t}: 参考答案为什么正确（与答案一起显示）。"""

[comments]
''',
    }


def write(pack_dir: Path, exercise_id: str) -> list[Path]:
    """Create ``pack_dir/exercise_id`` (and pack.toml when the pack is new); add the id to ``order``.

    Raises ValueError naming the argument when the id is malformed or the folder exists.
    """
    if not ID_PATTERN.fullmatch(exercise_id):
        raise ValueError(f"ID: expected lower-case words joined by '-', e.g. ipo-loss, got {exercise_id!r}")
    pack_dir = Path(pack_dir).expanduser().resolve()
    folder = pack_dir / exercise_id
    if folder.exists():
        raise ValueError(f"ID: {folder} already exists")
    written = []
    toml = pack_dir / "pack.toml"
    if not toml.exists():
        pack_dir.mkdir(parents=True, exist_ok=True)
        toml.write_text(f'[pack]\nid = "{pack_dir.name}"\n'
                        f'title = {{ en = "{PLACEHOLDER}: pack title", zh = "{PLACEHOLDER}: 课程标题" }}\n'
                        f'include = []              # other packs first, e.g. ["dpo-grpo"] (the built-in one)\n'
                        f'order = ["{exercise_id}"]\n', encoding="utf-8")
        written.append(toml)
    else:
        text = toml.read_text(encoding="utf-8")
        toml.write_text(add_to_order(text, exercise_id), encoding="utf-8")
        written.append(toml)
    for rel, content in files(exercise_id).items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        written.append(path)
    return written


def add_to_order(text: str, exercise_id: str) -> str:
    """pack.toml's text with ``exercise_id`` appended to ``order`` (a one- or multi-line array)."""
    match = re.search(r"^(\s*order\s*=\s*\[)(.*?)(\])", text, flags=re.M | re.S)
    if match is None:
        header = re.search(r"^\s*\[pack\]\s*$", text, flags=re.M)
        if header is None:
            return f'[pack]\norder = ["{exercise_id}"]\n' + text
        return text[:header.end()] + f'\norder = ["{exercise_id}"]' + text[header.end():]
    body = match.group(2).rstrip()
    sep = "" if not body.strip() else ("," if not body.endswith(",") else "") + " "
    return text[:match.start(2)] + body + f'{sep}"{exercise_id}"' + text[match.end(2):]
