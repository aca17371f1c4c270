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
