"""A kind says what it is; how the web app and the CLI show it is registered by web/ and cli/
(issue 30): every kind has both views, their templates and message keys exist, and the rendering
fields cannot come back onto ``Kind``."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

from alignlings import i18n
from alignlings.cli import kinds as cli_kinds
from alignlings.content import kinds
from alignlings.i18n import LANGS
from alignlings import web
from alignlings.web import kinds as web_kinds
from alignlings.web.helpers import PAGES

TEMPLATES = Path(web_kinds.__file__).parent / "templates"


def test_every_kind_has_a_web_view_whose_page_and_template_exist():
    for module in pkgutil.iter_modules(web.__path__):  # the page modules fill PAGES as they are imported
        importlib.import_module(f"alignlings.web.{module.name}")
    for name in kinds.names():
        view = web_kinds.view_of(name)
        assert (TEMPLATES / view.template).is_file(), f"{name}: no template {view.template}"
        assert view.page is None or view.page in PAGES, f"{name}: no page {view.page!r} in web.helpers.PAGES"
        assert web_kinds.view_of(kinds.get(name)) is view


def test_every_kind_has_a_cli_view_whose_messages_exist_in_every_language():
    for name in kinds.names():
        view = cli_kinds.view_of(name)
        for section, key in (("cli.start", view.wrote), ("cli.errors", view.not_file), ("cli.common", view.next)):
            for lang in LANGS:
                assert key in i18n.table(section) and lang in i18n.table(section)[key], f"{name}: no {lang} {section}.{key}"


def test_the_built_in_views_say_what_the_kinds_said():
    assert [(web_kinds.view_of(n).page, web_kinds.view_of(n).template, web_kinds.view_of(n).whole_file)
            for n in ("code", "quiz", "bug", "bug-or-not", "predict")] == [
        (None, "exercise.html", False), ("quiz", "quiz.html", False), ("bug", "bug.html", True),
        ("bug-or-not", "quiz.html", False), ("predict", "predict.html", False)]
    assert [(cli_kinds.view_of(n).wrote, cli_kinds.view_of(n).not_file, cli_kinds.view_of(n).next)
            for n in ("code", "quiz", "bug", "bug-or-not", "predict")] == [
        ("wrote", "quiz_not_code", "next"), ("wrote", "quiz_not_code", "next_quiz"),
        ("wrote_bug", "quiz_not_code", "next"), ("wrote", "bug_or_not_not_code", "next_quiz"),
        ("wrote", "predict_not_code", "next_predict")]


@pytest.mark.parametrize("registry", [web_kinds, cli_kinds], ids=["web", "cli"])
def test_an_unregistered_kind_is_a_clear_error_and_a_second_view_is_refused(registry, monkeypatch):
    with pytest.raises(KeyError, match="no view registered for exercise kind 'flashcard'"):
        registry.view_of("flashcard")
    with pytest.raises(ValueError, match="'quiz' already has"):
        registry.register("quiz", registry.KindView(not_file="other") if registry is cli_kinds
                          else registry.KindView(page="other", template="quiz.html"))
    monkeypatch.setattr(registry, "VIEWS", dict(registry.VIEWS))
    view = registry.register("flashcard", registry.KindView())
    assert registry.view_of("flashcard") is view
    assert registry.register("flashcard", registry.KindView()) == view  # the same view again is fine


def test_kind_holds_no_rendering_fields():
    """What the web and the CLI show lives in web/kinds.py and cli/kinds.py, not on the kind."""
    for cls in {type(k) for k in kinds.REGISTRY.values()} | {kinds.Kind}:
        for attr in ("web_page", "template", "web_whole_file", "cli_wrote", "cli_not_file", "cli_next"):
            assert not hasattr(cls, attr), f"{cls.__name__}.{attr}: register it in web/kinds.py or cli/kinds.py"
