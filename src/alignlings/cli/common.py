"""Shared CLI plumbing: the pack, the language, the workspace, the progress store, the console.

Nothing here imports torch: commands that grade or train import it in their own bodies.
"""

from __future__ import annotations

import locale
import os
from pathlib import Path
from typing import Annotated

import typer

LangOption = Annotated[
    str | None, typer.Option("--lang", help="Language of texts: en or zh (default: from the locale).",
                             show_default=False)
]
PackOption = Annotated[
    Path | None, typer.Option("--pack", help="Load exercises from this pack folder instead of the built-in one.",
                              show_default=False)
]


def resolve_lang(lang: str | None) -> str:
    if lang is not None:
        if lang not in ("en", "zh"):
            raise typer.BadParameter(f"expected 'en' or 'zh', got {lang!r}", param_hint="--lang")
        return lang
    for var in ("ALIGNLINGS_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(var)
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    try:
        loc = locale.getlocale()[0] or ""
    except ValueError:
        loc = ""
    return "zh" if loc.lower().startswith("zh") else "en"


def load(pack: Path | None):
    from alignlings.practice.pack import PackError, load_pack

    try:
        return load_pack(pack)
    except PackError as exc:
        raise typer.BadParameter(str(exc), param_hint="--pack") from None


def get_exercise(pack, exercise_id: str, *, code_only: bool = False):
    from alignlings.practice.pack import PackError

    try:
        ex = pack.get(exercise_id)
    except PackError as exc:
        raise typer.BadParameter(str(exc).removeprefix("exercise: "), param_hint="ID") from None
    if code_only and not ex.is_code:
        raise typer.BadParameter(f"{exercise_id!r} is the quiz: run `alignlings quiz`", param_hint="ID")
    return ex


def workspace() -> Path:
    return Path(os.environ.get("ALIGNLINGS_WORKSPACE") or "alignlings-workspace")


def exercise_file(exercise_id: str) -> Path:
    return workspace() / f"{exercise_id.replace('-', '_')}.py"


def store():
    from alignlings.practice.progress import ProgressStore

    return ProgressStore()


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


T = {
    "welcome": {"en": "Welcome to alignlings! Practise DPO, GRPO and reward models by filling blanks; "
                      "every check runs your code against a verified reference.",
                "zh": "欢迎来到 alignlings！通过填空练习 DPO、GRPO 和奖励模型；每次检查都会把你的代码与经过验证的参考实现对比运行。"},
    "next": {"en": "Next: {id} ({title}). Start it with `alignlings start {id}`.",
             "zh": "下一个：{id}（{title}）。用 `alignlings start {id}` 开始。"},
    "all_done": {"en": "Every exercise is solved. Try the cloze drill: `alignlings cloze dpo-loss`.",
                 "zh": "所有练习都已完成。试试填空挑战：`alignlings cloze dpo-loss`。"},
    "solved": {"en": "solved", "zh": "已完成"},
    "todo": {"en": "to do", "zh": "未完成"},
    "exercise": {"en": "exercise", "zh": "练习"},
    "title": {"en": "title", "zh": "标题"},
    "level": {"en": "level", "zh": "难度"},
    "status": {"en": "status", "zh": "状态"},
    "attempts": {"en": "attempts", "zh": "尝试次数"},
    "hints": {"en": "hints", "zh": "提示"},
    "revealed": {"en": "solution seen", "zh": "看过答案"},
}


def t(key: str, lang: str, **kw) -> str:
    return T[key][lang].format(**kw)


def next_exercise(pack, summary: dict):
    for ex in pack:
        if not summary.get(ex.id, {}).get("solved"):
            return ex
    return None
