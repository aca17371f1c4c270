"""What a verdict says to the learner: case and blank messages in English and Chinese.

The grader decides pass/fail; this module only words the result (``describe_case``) and holds the
message table (``MESSAGES``, read with ``msg``). Keep wording changes here so grading and phrasing
stay apart. Chinese messages use full-width punctuation (：，（）) and keep ML terms (dtype, NaN)
in English.

Numbers are shown with as few significant digits as tell them apart (at least 5): a scalar reads
"expected 0.65898, got 0.65872"; a tensor element carries its index, "[0] expected -0.00425, got
0.03299".
"""

from __future__ import annotations

import math

MESSAGES = {
    "correct": {"en": "correct", "zh": "正确"},
    "empty": {"en": "still empty: replace _____ with your code", "zh": "还是空的：请把 _____ 换成你的代码"},
    "not_found": {"en": "could not find this blank in your file (the line around it was changed); "
                        "it is graded only as part of the whole file",
                  "zh": "在你的文件中找不到这个空（它所在的行被改动了）；只作为整个文件的一部分评分"},
    "load_error": {"en": "this fill does not run: {error}", "zh": "这个填空无法运行：{error}"},
    "case_error": {"en": "case '{case}' raised {error}", "zh": "用例「{case}」抛出了异常 {error}"},
    "shape": {"en": "case '{case}': expected shape {expected}, got {got}",
              "zh": "用例「{case}」：期望形状 {expected}，实际为 {got}"},
    "dtype": {"en": "case '{case}': expected dtype {expected}, got {got}",
              "zh": "用例「{case}」：期望 dtype {expected}，实际为 {got}"},
    "type": {"en": "case '{case}': expected {expected}, got {got}", "zh": "用例「{case}」：期望 {expected}，实际为 {got}"},
    "scalar": {"en": "case '{case}': expected {expected}, got {got}", "zh": "用例「{case}」：期望 {expected}，实际为 {got}"},
    "value": {"en": "case '{case}': values differ (max |diff| {max}, mean |diff| {mean}); {first}",
              "zh": "用例「{case}」：数值不同（最大 |差| {max}，平均 |差| {mean}）；{first}"},
    "nonfinite": {"en": "case '{case}': produced inf/NaN where the reference is finite; {first}",
                  "zh": "用例「{case}」：在参考结果有限的位置得到了 inf/NaN；{first}"},
    "element": {"en": "[{index}] expected {expected}, got {got}", "zh": "[{index}] 期望 {expected}，实际为 {got}"},
    "expected_got": {"en": "expected {expected}, got {got}", "zh": "期望 {expected}，实际为 {got}"},
    "list_sep": {"en": "; ", "zh": "；"},
    "other": {"en": "case '{case}': {detail}", "zh": "用例「{case}」：{detail}"},
    "passed_case": {"en": "passed", "zh": "通过"},
    "bad_report": {"en": "the run's report did not have the exercise's form; nothing was graded",
                   "zh": "运行结果不符合本练习的格式，未评分"},
    "not_checked": {"en": "not checked: the run stopped early ({reason})", "zh": "未检查：运行提前终止（{reason}）"},
    # the web app shows the template with a box per blank: no file, no _____, its own line numbers
    "empty_todo": {"en": "TODO {n} is still empty: type your code in its box",
                   "zh": "TODO {n} 还是空的：请在它的输入框里写代码"},
    "todo_does_not_parse": {"en": "TODO {n} does not parse: {error}", "zh": "TODO {n} 无法解析：{error}"},
    "todo_does_not_run": {"en": "TODO {n} does not run: {error}", "zh": "TODO {n} 无法运行：{error}"},
    "not_run_empty": {"en": "not run yet: fill {todos} first", "zh": "尚未运行：请先填写 {todos}"},
    "syntax_at_line": {"en": "{error} (line {line}{todo})", "zh": "{error}（第 {line} 行{todo}）"},
    "syntax_todo": {"en": ", TODO {n}", "zh": "，TODO {n}"},
}


def msg(key: str, lang: str, **kw) -> str:
    """The message ``key`` in ``lang`` (English when the language has none), formatted with ``kw``."""
    if key not in MESSAGES:
        raise ValueError(f"key: expected one of {sorted(MESSAGES)}, got {key!r}")
    table = MESSAGES[key]
    return table.get(lang, table["en"]).format(**kw)


def number(value, other=None) -> str:
    """``value`` with 5 significant digits, or more when ``other`` would print the same."""
    if not isinstance(value, float) or not math.isfinite(value):
        return str(value)
    digits = 5
    if isinstance(other, float) and math.isfinite(other) and other != value:
        while digits < 12 and f"{value:.{digits}g}" == f"{other:.{digits}g}":
            digits += 1
    return f"{value:.{digits}g}"


def _pair(expected, got) -> tuple[str, str]:
    return number(expected, got), number(got, expected)


def _first(diff: dict, lang: str) -> str:
    """The first differing elements: "[i,j] expected a, got b", up to three (no index for a scalar)."""
    items = diff.get("first") or []
    if not items:
        e, g = _pair(diff.get("expected"), diff.get("got"))
        return msg("expected_got", lang, expected=e, got=g)
    parts = []
    for item in items[:3]:
        e, g = _pair(item.get("expected"), item.get("got"))
        index = ",".join(map(str, item.get("index") or []))
        parts.append(msg("element", lang, index=index, expected=e, got=g) if index
                     else msg("expected_got", lang, expected=e, got=g))
    return msg("list_sep", lang).join(parts)


def _is_scalar(diff: dict) -> bool:
    items = diff.get("first") or []
    if items:
        return len(items) == 1 and not items[0].get("index") and not diff.get("shape")
    return "expected" in diff and "got" in diff


def case_name(result: dict, lang: str) -> str:
    """The case's name in ``lang``: its ``label`` (a dict per language, or a string), else ``name``."""
    label = result.get("label")
    if isinstance(label, dict):
        return label.get(lang) or result["name"]
    return label or result["name"]


def describe_case(result: dict, lang: str) -> str:
    """One line for a case result: passed, the error it raised, or its diff."""
    case = case_name(result, lang)
    if result["passed"]:
        return msg("passed_case", lang)
    if result.get("error"):
        text = msg("case_error", lang, case=case, error=result["error"].splitlines()[0])
    elif result.get("detail"):
        text = msg("other", lang, case=case, detail=result["detail"])
    else:
        d = result.get("diff") or {}
        reason = d.get("reason", "value")
        if reason == "shape":
            text = msg("shape", lang, case=case, expected=tuple(d["expected_shape"]), got=tuple(d["got_shape"]))
        elif reason == "dtype":
            text = msg("dtype", lang, case=case, expected=d["expected_dtype"], got=d["got_dtype"])
        elif reason in ("type", "length", "keys"):
            text = msg("type", lang, case=case, expected=d.get("expected"), got=d.get("got"))
        elif reason == "nonfinite":
            text = msg("nonfinite", lang, case=case, first=_first(d, lang))
        elif _is_scalar(d):
            items = d.get("first") or [d]
            e, g = _pair(items[0].get("expected"), items[0].get("got"))
            text = msg("scalar", lang, case=case, expected=e, got=g)
        else:
            fmt = lambda v: f"{v:.3g}" if isinstance(v, float) else str(v)  # noqa: E731
            text = msg("value", lang, case=case, max=fmt(d.get("max_abs_diff", "?")),
                       mean=fmt(d.get("mean_abs_diff", d.get("max_abs_diff", "?"))), first=_first(d, lang))
    note = (result.get("note") or {}).get(lang) or (result.get("note") or {}).get("en")
    finite_mismatch = (result.get("diff") or {}).get("reason") not in (None, "nonfinite")
    if result.get("kind") == "edge" and finite_mismatch:
        note = None  # an edge case's note explains the instability it probes, not a plainly wrong value
    stop = "。" if lang == "zh" else ". "
    if note and lang == "zh" and text.endswith(("。", "）")):
        stop = ""
    return f"{text}{stop}{note}" if note else text
