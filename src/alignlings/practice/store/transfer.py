"""Moving progress between machines: an export's format and version, and the validation of an
import (everything is checked, naming the field, before anything is written)."""

from __future__ import annotations

import json
import math
import uuid as uuidlib
from collections.abc import Collection
from typing import Any

from alignlings.practice.store.schema import _TABLES, DEFAULT_PACK, EVENT_KINDS, _pack, _utc_iso, attempt_level

EXPORT_FORMAT = "alignlings-progress"
EXPORT_VERSION = 3  # 2: rows carry "pack"; 3: "review_log" (spaced review); older files import as before


# -- validating an export ------------------------------------------------------------------------

MAX_IMPORT_DEPTH = 32  # nesting of an imported verdict or setting value
MAX_CHOICE = 1 << 16  # a quiz choice is an option index


def _field(row: dict, name: str, types: type | tuple[type, ...], where: str):
    if name not in row:
        raise ValueError(f"{where}.{name}: missing")
    value = row[name]
    if not isinstance(value, types) or (types is int and isinstance(value, bool)):
        expected = types.__name__ if isinstance(types, type) else " or ".join(t.__name__ for t in types)
        raise ValueError(f"{where}.{name}: expected {expected}, got {type(value).__name__}")
    if isinstance(value, str):
        _unicode(value, f"{where}.{name}")
    return value


def _unicode(value: str, where: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate ("\ud800" in the JSON): SQLite cannot store it
        raise ValueError(f"{where}: not valid Unicode text (a lone surrogate)") from None


def _known(value: str, known: Collection[str] | None, what: str, where: str) -> str:
    if known is not None and value not in known:
        raise ValueError(f"{where}: {value[:80]!r} is not {what} of the loaded packs")
    return value


def _plain_json(value: Any, where: str) -> None:
    """A verdict or setting value: JSON nested at most MAX_IMPORT_DEPTH deep, finite numbers, valid text.

    Checked iteratively (a deep value cannot overflow the stack here) so that storing it and
    serving it back (``json.dumps``, Starlette's ``allow_nan=False``) cannot fail later.
    """
    stack = [(value, 1, where)]
    while stack:
        item, depth, path = stack.pop()
        if depth > MAX_IMPORT_DEPTH:
            raise ValueError(f"{where}: nested deeper than {MAX_IMPORT_DEPTH} levels")
        if isinstance(item, dict):
            for key, sub in item.items():
                _unicode(key, f"{path} key")
                stack.append((sub, depth + 1, f"{path}.{key[:40]}"))
        elif isinstance(item, list):
            stack.extend((sub, depth + 1, f"{path}[{i}]") for i, sub in enumerate(item))
        elif isinstance(item, str):
            _unicode(item, path)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{path}: expected a finite number, got {item!r}")
        elif item is not None and not isinstance(item, (bool, int, float)):
            raise ValueError(f"{path}: expected JSON data, got {type(item).__name__}")


def _uuid(row: dict, where: str) -> str:
    value = _field(row, "uuid", str, where)
    try:
        return str(uuidlib.UUID(value))
    except ValueError:
        raise ValueError(f"{where}.uuid: not a uuid: {value!r}") from None


def _rows(data: dict, name: str) -> list[dict]:
    items = data.get(name, [])
    if not isinstance(items, list):
        raise ValueError(f"{name}: expected a list, got {type(items).__name__}")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValueError(f"{name}[{i}]: expected an object, got {type(item).__name__}")
    return items


def _validate_export(data: Any, *, exercises: Collection[str] | None = None,
                     questions: Collection[str] | None = None,
                     packs: Collection[str] | None = None) -> dict[str, Any]:
    """Check an export and turn it into rows for the tables (timestamps normalised to UTC).

    ``exercises`` / ``questions`` / ``packs``: when given, the ids an export may name (``import_``).
    """
    if not isinstance(data, dict):
        raise ValueError(f"progress data: expected a JSON object, got {type(data).__name__}")
    if data.get("format") != EXPORT_FORMAT:
        raise ValueError(f"format: expected {EXPORT_FORMAT!r}, got {data.get('format')!r}")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= EXPORT_VERSION:
        raise ValueError(f"version: expected an integer from 1 to {EXPORT_VERSION}, got {version!r}")
    out: dict[str, Any] = {t: [] for t in _TABLES}

    def pack_of(r: dict, w: str) -> str:  # version 1 rows predate packs: the built-in pack's
        pack = _pack(_field(r, "pack", str, w)) if "pack" in r else DEFAULT_PACK
        return _known(pack, packs, "one", w + ".pack")

    for i, r in enumerate(_rows(data, "attempts")):
        w = f"attempts[{i}]"
        verdict = _field(r, "verdict", dict, w)
        _plain_json(verdict, w + ".verdict")
        out["attempts"].append({
            "uuid": _uuid(r, w), "pack": pack_of(r, w), "exercise": _known(_field(r, "exercise", str, w), exercises, "an exercise",
                                                    w + ".exercise"),
            "passed": int(_field(r, "passed", bool, w)), "created_at": _utc_iso(r.get("created_at"), w + ".created_at"),
            "code": _field(r, "code", str, w), "verdict": json.dumps(verdict, ensure_ascii=False),
            "source": _field(r, "source", str, w) if "source" in r else "cli",
            "level": attempt_level(verdict),
        })
    for i, r in enumerate(_rows(data, "events")):
        w = f"events[{i}]"
        kind = _field(r, "kind", str, w)
        if kind not in EVENT_KINDS:
            raise ValueError(f"{w}.kind: expected one of {', '.join(EVENT_KINDS)}, got {kind!r}")
        exercise = _known(_field(r, "exercise", str, w), exercises, "an exercise", w + ".exercise")
        out["events"].append({"uuid": _uuid(r, w), "pack": pack_of(r, w), "exercise": exercise, "kind": kind,
                              "created_at": _utc_iso(r.get("created_at"), w + ".created_at")})
    for i, r in enumerate(_rows(data, "quiz_answers")):
        w = f"quiz_answers[{i}]"
        choice = _field(r, "choice", int, w)
        if not 0 <= choice < MAX_CHOICE:
            raise ValueError(f"{w}.choice: expected an option index from 0 to {MAX_CHOICE - 1}, got {choice}")
        question = _known(_field(r, "question_id", str, w), questions, "a quiz question", w + ".question_id")
        exercise = _field(r, "exercise", str, w) if "exercise" in r else ""  # exports before schema 9 lack it
        if exercise:
            _known(exercise, exercises, "an exercise", w + ".exercise")
        out["quiz_answers"].append({"uuid": _uuid(r, w), "pack": pack_of(r, w), "exercise": exercise,
                                    "question_id": question, "choice": choice,
                                    "correct": int(_field(r, "correct", bool, w)),
                                    "created_at": _utc_iso(r.get("created_at"), w + ".created_at")})
    for i, r in enumerate(_rows(data, "cloze")):
        w = f"cloze[{i}]"
        snippet = _known(_field(r, "snippet", str, w), exercises, "an exercise", w + ".snippet")
        out["cloze_results"].append({"uuid": _uuid(r, w), "pack": pack_of(r, w), "snippet": snippet,
                                     "key": _field(r, "key", str, w), "token": _field(r, "token", str, w),
                                     "correct": int(_field(r, "correct", bool, w)),
                                     "created_at": _utc_iso(r.get("created_at"), w + ".created_at")})
    from alignlings.content.kinds import REVIEW_ITEM_KINDS as item_kinds  # the one list (imported on use)

    for i, r in enumerate(_rows(data, "review_log")):
        w = f"review_log[{i}]"
        item = _field(r, "item", str, w)
        kind, sep, rest = item.partition("/")
        if not sep or kind not in item_kinds or not rest or len(item) > 400:
            raise ValueError(f"{w}.item: expected KIND/..., KIND one of {', '.join(item_kinds)}, got {item[:80]!r}")
        if item_kinds[kind].names == "question":
            _known(rest, questions, "a quiz question", w + ".item")
        else:
            _known(rest.split("/")[0], exercises, "an exercise", w + ".item")
        rating = _field(r, "rating", int, w)
        if not 1 <= rating <= 4:
            raise ValueError(f"{w}.rating: expected 1 (again) to 4 (easy), got {rating}")
        duration = r.get("duration_ms")
        if duration is not None and (isinstance(duration, bool) or not isinstance(duration, int)
                                     or not 0 <= duration < 1 << 40):
            raise ValueError(f"{w}.duration_ms: expected a non-negative int or null, got {duration!r}")
        out["review_log"].append({"uuid": _uuid(r, w), "pack": pack_of(r, w), "item": item, "rating": rating,
                                  "reviewed_at": _utc_iso(r.get("reviewed_at"), w + ".reviewed_at"),
                                  "source": _field(r, "source", str, w) if "source" in r else "review",
                                  "duration_ms": duration,
                                  "answer": _field(r, "answer", str, w) if "answer" in r else ""})
    settings = data.get("settings", {})
    if not isinstance(settings, dict):
        raise ValueError(f"settings: expected an object, got {type(settings).__name__}")
    out["settings"] = {}
    for key, s in settings.items():
        w = f"settings[{key[:40]!r}]"
        _unicode(key, w)
        if not isinstance(s, dict) or "value" not in s:
            raise ValueError(f"{w}: expected an object with 'value' and 'updated_at'")
        _plain_json(s["value"], w + ".value")
        out["settings"][key] = {"value": json.dumps(s["value"], ensure_ascii=False),
                                "updated_at": _utc_iso(s.get("updated_at"), w + ".updated_at")}
    return out
