"""The fill-in exercise (``kind = "code"``): a template with blanks, graded as a file by the grader;
``dev check`` runs its solution and each misconception (``practice.devcheck``).

In spaced review it brings ``exercise/ID`` (its hardest blank for this learner), ``level/ID`` (its
level-4 file, offered once the exercise is filled reliably), one
``misconception/ID/M`` per known misconception (the blank where it was made) and, with a cloze
snippet, one ``cloze/ID/LINE`` per line worth recalling (``practice.review``)."""

from __future__ import annotations

from alignlings.i18n import LANGS
from alignlings.content import blanks as bl
from alignlings.content.kinds import Kind, ReviewItemKind, register, skeletons

MIN_MISCONCEPTIONS = 3  # named wrong answers with feedback, so a wrong blank is explained
MIN_BLANK_HINTS = 2  # per blank, when an exercise gives per-blank hints at all
LEVEL_WEIGHT = 2.0  # a level item's weight in a concept's mastery (grading.levels.WEIGHT[4]), others 1


def given_blank_hints(ex, lang: str) -> tuple:
    """texts/LANG.toml's ``blank_hints`` (() when the file is broken: check_texts reports it)."""
    try:
        return ex.texts(lang).blank_hints
    except Exception:  # noqa: BLE001 - check_texts reports the broken file
        return ()


class Fill(Kind):
    review_item_kinds = (
        ReviewItemKind("exercise", "exercise", answer="fills"),  # the hardest blank's fill
        ReviewItemKind("misconception", "exercise", answer="fills", fresh_inputs=True),  # not passed by memory
        ReviewItemKind("cloze", "exercise", answer="fills"),  # {position: text}
        # the level-4 file (write the body): weighs as the level does, offered once the exercise is
        # filled reliably (``Review.level_offers``), before the learner ever met it
        ReviewItemKind("level", "exercise", answer="file", mastery_weight=LEVEL_WEIGHT, offered_before_met=True),
    )
    name = "code"
    author_name = "fill"
    label = {"en": "fill-in", "zh": "填空"}
    graded_as_file = True
    has_blanks = True

    def review_items(self, rv, ex):
        from alignlings.content.blanks import find_blanks

        blanks = find_blanks(ex.solution_source)
        by_blank = rv.blank_concepts(ex)
        items = [rv.Item(f"exercise/{ex.id}", "exercise", ex.pack, ex.key,
                      tuple(dict.fromkeys(t for b in blanks for t in by_blank.get(b.index, ()))))]
        miscs = rv.misconception_concepts(ex)
        items += [rv.Item(f"misconception/{ex.id}/{m.id}", "misconception", ex.pack, ex.key, miscs[m.id],
                       blank=m.blank, misconception=m.id) for m in ex.misconceptions]
        items.append(rv.Item(f"level/{ex.id}", "level", ex.pack, ex.key, items[0].concepts))  # write the body
        if ex.cloze:
            blank_at = {b.line: b.index for b in blanks}
            items += [rv.Item(f"cloze/{ex.id}/{line}", "cloze", ex.pack, ex.key,
                              by_blank.get(blank_at.get(line, 0), ()), line=line) for line in rv.cloze_lines(ex)]
        return items

    def review_prompt(self, rv, review, item, base, lang):
        if item.kind == "cloze":  # the item kinds this exercise kind brings (not exercise kinds)
            return rv.cloze_prompt(review, item, base, lang)
        if item.kind == "level":
            return rv.level_prompt(review, item, base, lang)
        return rv.blank_prompt(review, item, base, lang)

    def review_check(self, rv, review, item, answer, grader, lang):
        if grader is None:
            raise ValueError("grader: a code item is graded in the sandbox; pass a Grader")
        if item.kind == "cloze":
            return rv.check_cloze(review, item, answer, grader, lang)
        if item.kind == "level":
            return rv.check_level(review, item, answer, grader, lang)
        return rv.check_blank(review, item, answer, grader, lang)

    def review_withholds(self, item):
        return item.kind != "cloze"  # a blank's reference fill would solve the exercise

    def blanks(self, ex):
        return bl.find_blanks(ex.solution_source)

    def learner_file(self, ex, lang):
        """Generated from solution.py, never stored: the blanks replaced by their TODOs."""
        texts = ex.texts(lang)
        source = ex.solution_source
        return bl.template(source, bl.find_blanks(source), list(texts.blanks), texts.comments if lang != "en" else None)

    def solution_file(self, ex, lang):
        texts = ex.texts(lang)
        source = ex.solution_source
        return bl.reference(source, bl.find_blanks(source), texts.comments if lang != "en" else None)

    def questions(self, ex):
        return ()

    def text_problems(self, ex):
        problems = []
        n = len(self.blanks(ex))
        for lang in LANGS:
            try:
                texts = ex.texts(lang)
            except Exception:  # noqa: BLE001 - check_texts reports the broken file
                continue
            if len(texts.blanks) != n:
                problems.append(f"texts/{lang}.toml: {len(texts.blanks)} blank descriptions for {n} blanks")
            for i, hints in enumerate(texts.blank_hints, start=1):
                if len(hints) < MIN_BLANK_HINTS:
                    problems.append(f"texts/{lang}.toml: blank_hints for blank {i}: {len(hints)}, "
                                    f"expected at least {MIN_BLANK_HINTS}")
        given = {lang for lang in LANGS if given_blank_hints(ex, lang)}
        if given and given != set(LANGS):
            problems.append(f"blank_hints given in {', '.join(sorted(given))} only, expected every language")
        for m in ex.misconceptions:
            for lang in LANGS:
                if not m.feedback.get(lang, "").strip():
                    problems.append(f"misconception {m.id}: no {lang} feedback")
        if len(ex.misconceptions) < MIN_MISCONCEPTIONS:
            problems.append(f"misconceptions.toml: {len(ex.misconceptions)}, expected at least {MIN_MISCONCEPTIONS}")
        return problems

    def skeleton(self, exercise_id):
        return skeletons.fill(exercise_id)


FILL = register(Fill())
