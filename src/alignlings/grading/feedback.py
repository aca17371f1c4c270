"""What a verdict says to the learner: case and blank messages in English and Chinese.

The grader decides pass/fail; this module only words the result (``describe_case``) and holds the
message table (``MESSAGES``, read with ``msg``). Keep wording changes here so grading and phrasing
stay apart. Chinese messages use full-width punctuation (：，（）) and keep ML terms (dtype, NaN)
in English.

Numbers are shown with as few significant digits as tell them apart (at least 5): a scalar reads
"expected 0.65898, got 0.65872"; a tensor element carries its index, "[0] expected -0.00425, got
0.03299". Only visible cases show numbers: a hidden or edge case's difference is told in words
(``values.redact``: NaN/inf, shape, dtype; never how far the value is from the expected one).
"""

from __future__ import annotations

import math

from alignlings import i18n

MESSAGES = i18n.table("practice.feedback")  # strings: locales/{en,zh}.toml [practice.feedback]


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


def _hidden(case: str, d: dict, lang: str) -> str:
    """A hidden or edge case's value difference, in words only: NaN or inf where the expected value
    is finite, else only that the value differs (no sign, scale, band or count: see ``values.redact``)."""
    if d.get("reason") == "nonfinite":
        what = msg("hidden_nan" if d.get("got_nan") else "hidden_inf", lang)
    else:
        what = msg("hidden_other", lang)
    return msg("hidden", lang, case=case, what=what)


def describe_case(result: dict, lang: str) -> str:
    """One line for a case result: passed, the error it raised, or its diff."""
    case = case_name(result, lang)
    if result["passed"]:
        return msg("passed_case", lang)
    if result.get("timed_out"):
        return msg("case_timed_out", lang, case=case, seconds=result.get("seconds", "?"))
    if result.get("not_run"):
        return msg("case_not_run", lang, case=case)
    if result.get("error"):
        text = msg("case_error", lang, case=case, error=result["error"].splitlines()[0])
    elif (result.get("diff") or {}).get("redacted") and (result.get("diff") or {}).get("reason") in (
            "value", "nonfinite"):
        # "values of hidden and edge cases are not shown" is said of hidden and edge cases only
        text = _hidden(case, result["diff"], lang) if result.get("kind") != "visible" else msg(
            "other", lang, case=case, detail=msg("hidden_other", lang))
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
