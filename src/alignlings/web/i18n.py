"""Interface strings of the web app in English and Chinese, and how a request picks its language.

Exercise texts come from the pack (texts/<lang>.toml); this table only holds the app's own
labels. The language is ``?lang=en|zh`` (which also sets the ``alignlings_lang`` cookie), else
the cookie, else English.
"""

from __future__ import annotations

from fastapi import Request

from alignlings import i18n

from alignlings.i18n import LANGS  # noqa: E402,F401 - the one list of languages
LANG_COOKIE = "alignlings_lang"

UI = i18n.table("web.ui")  # strings: locales/{en,zh}.toml [web.ui]


def resolve_lang(request: Request) -> str:
    lang = request.query_params.get("lang")
    if lang in LANGS:
        return lang
    lang = request.cookies.get(LANG_COOKIE)
    return lang if lang in LANGS else "en"


# Keys are read as attributes in templates (``t.check``): never name one like a dict method.
assert not set(UI) & set(dir(dict)), "UI keys must not shadow dict methods"


def ui(lang: str) -> dict[str, str]:
    """The interface strings in one language (for templates and for the page's scripts)."""
    return {key: value.get(lang) or value["en"] for key, value in UI.items()}


LEARNER = i18n.lang_table("web.learner")  # strings: locales/{en,zh}.toml [web.learner]


def learner(lang: str) -> dict[str, str]:
    """The learner pages' newer strings (bug drills, review card, toy DPO, pictures) in one language."""
    return LEARNER.get(lang, LEARNER["en"])


def days(n: float, lang: str) -> str:
    """"1 day", "2 days", "0.5 days" / "1 天": English plural rules (only exactly 1 is singular)."""
    if isinstance(n, bool) or not isinstance(n, (int, float)):
        raise ValueError(f"n: expected a number of days, got {n!r}")
    shown = f"{n:g}"
    return learner(lang)["days_one" if shown == "1" else "days_other"].format(n=shown)
