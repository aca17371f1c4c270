"""The app's own strings (not the packs' texts), in one place: ``locales/en.toml`` and ``zh.toml``.

One section per module that shows strings (``[cli.quiz]``, ``[web.ui]``, ``[practice.feedback]``...).
``t("cli.quiz.right", "zh")`` is one string, formatted with keyword arguments; ``table(section)``
gives ``{key: {lang: text}}`` and ``lang_table(section)`` ``{lang: {key: text}}`` for modules that
look strings up many times. A key missing in a language falls back to English.

``reword(section, text, lang)`` translates text that a lower layer made in English from fixed
phrases (the sandbox's isolation description, ``dev check``'s lines, a pack's load errors): each
English string of the section, its ``{placeholders}`` standing for a value, is replaced wherever it
occurs by the same key's string in ``lang``; what matches no phrase (an OS error) stays as it is.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from functools import cache
from pathlib import Path

LANGS = ("en", "zh")
"""Every language of the app and of the packs' texts."""

_DIR = Path(__file__).parent / "locales"


@cache
def _catalog(lang: str) -> dict:
    with (_DIR / f"{lang}.toml").open("rb") as f:
        return tomllib.load(f)


def _section(lang: str, section: str) -> dict[str, str]:
    node = _catalog(lang)
    for part in section.split("."):
        node = node.get(part, {})
    return {k: v for k, v in node.items() if isinstance(v, str)}


def t(key: str, lang: str, **kw) -> str:
    """One string: ``key`` is "section.name" (e.g. "cli.quiz.right")."""
    if lang not in LANGS:
        raise ValueError(f"lang: expected one of {LANGS}, got {lang!r}")
    section, _, name = key.rpartition(".")
    text = _section(lang, section).get(name)
    if text is None:
        text = _section("en", section).get(name)
    if text is None:
        raise KeyError(f"no string {key!r} in locales/en.toml")
    return text.format(**kw) if kw else text


def table(section: str) -> dict[str, dict[str, str]]:
    """``{key: {lang: text}}`` for a whole section (English fills keys another language lacks)."""
    en = _section("en", section)
    if not en:
        raise KeyError(f"no section {section!r} in locales/en.toml")
    out: dict[str, dict[str, str]] = {k: {"en": v} for k, v in en.items()}
    for lang in LANGS[1:]:
        for k, v in _section(lang, section).items():
            out.setdefault(k, {})[lang] = v
    return out


def lang_table(section: str) -> dict[str, dict[str, str]]:
    """``{lang: {key: text}}`` for a whole section, every language complete (English fills gaps)."""
    en = _section("en", section)
    return {lang: {**en, **_section(lang, section)} for lang in LANGS}


def texts(key: str) -> dict[str, str]:
    """``{lang: text}`` for one key."""
    return {lang: t(key, lang) for lang in LANGS}


_PLACEHOLDER = re.compile(r"\{(\w+)[^{}]*\}")


@cache
def _phrases(section: str, lang: str) -> tuple[tuple[re.Pattern, str], ...]:
    """(the English phrase as a pattern, the ``lang`` string) per key of ``section``, longest first so
    that a phrase is replaced before a shorter one it contains."""
    out = []
    for texts in sorted(table(section).values(), key=lambda t: -len(t["en"])):
        parts, pattern, seen = _PLACEHOLDER.split(texts["en"]), "", set()
        for i, part in enumerate(parts):
            if i % 2 == 0:
                pattern += re.escape(part)
            elif part in seen:
                pattern += f"(?P={part})"
            else:  # a value: a path, an id, a number, a quoted name (at the end: ASCII, no spaces)
                pattern += f"(?P<{part}>.+?)" if i + 1 < len(parts) and parts[i + 1] else f"(?P<{part}>[A-Za-z0-9_.'\"/+-]+)"
                seen.add(part)
        out.append((re.compile(pattern), texts.get(lang, texts["en"])))
    return tuple(out)


def reword(section: str, text: str, lang: str) -> str:
    """``text``, made in English from the phrases of ``section``, in ``lang`` (see the module's docstring)."""
    if lang == "en" or not text:
        return text
    def put(target: str) -> Callable[[re.Match], str]:
        return lambda m: target.format(**m.groupdict())

    for pattern, target in _phrases(section, lang):
        text = pattern.sub(put(target), text)
    return text
