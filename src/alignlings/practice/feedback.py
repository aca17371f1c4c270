"""What a verdict says to the learner: case and blank messages in English and Chinese.

The grader decides pass/fail; this module only words the result (``describe_case``) and holds the
message table (``msg``). Keep wording changes here so grading and phrasing stay apart.
"""

from __future__ import annotations

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
    "value": {"en": "case '{case}': values differ (max |diff| {max}, mean |diff| {mean}); first: {first}",
              "zh": "用例「{case}」：数值不同（最大 |差| {max}，平均 |差| {mean}）；前几个：{first}"},
    "nonfinite": {"en": "case '{case}': produced inf/NaN where the reference is finite; first: {first}",
                  "zh": "用例「{case}」：在参考结果有限的位置得到了 inf/NaN；前几个：{first}"},
    "other": {"en": "case '{case}': {detail}", "zh": "用例「{case}」：{detail}"},
    "passed_case": {"en": "passed", "zh": "通过"},
    "not_checked": {"en": "not checked: the run stopped early ({reason})", "zh": "未检查：运行提前终止（{reason}）"},
}


def msg(key: str, lang: str, **kw) -> str:
    table = MESSAGES[key]
    return table.get(lang, table["en"]).format(**kw)


def _first(diff: dict) -> str:
    items = diff.get("first") or []
    if not items:
        return f"expected {diff.get('expected')}, got {diff.get('got')}"
    return ", ".join(f"[{','.join(map(str, i['index']))}] expected {i['expected']:.6g} got {i['got']:.6g}"
                     if isinstance(i["expected"], float) and isinstance(i["got"], float)
                     else f"[{','.join(map(str, i['index']))}] expected {i['expected']} got {i['got']}"
                     for i in items[:3])


def describe_case(result: dict, lang: str) -> str:
    """One line for a case result: passed, the error it raised, or its diff."""
    case = (result.get("label") or {}).get(lang) or result["name"]
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
            text = msg("nonfinite", lang, case=case, first=_first(d))
        else:
            fmt = lambda v: f"{v:.3g}" if isinstance(v, float) else str(v)  # noqa: E731
            text = msg("value", lang, case=case, max=fmt(d.get("max_abs_diff", "?")),
                       mean=fmt(d.get("mean_abs_diff", d.get("max_abs_diff", "?"))), first=_first(d))
    note = (result.get("note") or {}).get(lang) or (result.get("note") or {}).get("en")
    finite_mismatch = (result.get("diff") or {}).get("reason") not in (None, "nonfinite")
    if result.get("kind") == "edge" and finite_mismatch:
        note = None  # an edge case's note explains the instability it probes, not a plainly wrong value
    return f"{text}. {note}" if note else text
