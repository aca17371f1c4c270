"""The fill-in exercise (``kind = "code"``): a template with blanks, graded as a file by the grader;
``dev check`` runs its solution and each misconception (``practice.devcheck``).

In spaced review it brings ``exercise/ID`` (its hardest blank for this learner), one
``misconception/ID/M`` per known misconception (the blank where it was made) and, with a cloze
snippet, one ``cloze/ID/LINE`` per line worth recalling (``practice.review``)."""

from __future__ import annotations

from alignlings.practice.kinds import Kind, register


class Fill(Kind):
    name = "code"
    label = {"en": "fill-in", "zh": "填空"}
    graded_as_file = True
    has_blanks = True
    web_page = None  # web/exercises.py: the template with an input per blank
    template = "exercise.html"
    cli_next = "next"

    def review_items(self, rv, ex):
        from alignlings.practice.blanks import find_blanks

        blanks = find_blanks(ex.solution_source)
        by_blank = rv.blank_concepts(ex)
        items = [rv.Item(f"exercise/{ex.id}", "exercise", ex.pack, ex.key,
                      tuple(dict.fromkeys(t for b in blanks for t in by_blank.get(b.index, ()))))]
        miscs = rv.misconception_concepts(ex)
        items += [rv.Item(f"misconception/{ex.id}/{m.id}", "misconception", ex.pack, ex.key, miscs[m.id],
                       blank=m.blank, misconception=m.id) for m in ex.misconceptions]
        if ex.cloze:
            blank_at = {b.line: b.index for b in blanks}
            items += [rv.Item(f"cloze/{ex.id}/{line}", "cloze", ex.pack, ex.key,
                              by_blank.get(blank_at.get(line, 0), ()), line=line) for line in rv.cloze_lines(ex)]
        return items

    def review_prompt(self, rv, review, item, base, lang):
        if item.kind == "cloze":  # the item kinds this exercise kind brings (not exercise kinds)
            return rv.cloze_prompt(review, item, base, lang)
        return rv.blank_prompt(review, item, base, lang)

    def review_check(self, rv, review, item, answer, grader, lang):
        if grader is None:
            raise ValueError("grader: a code item is graded in the sandbox; pass a Grader")
        if item.kind == "cloze":
            return rv.check_cloze(review, item, answer, grader, lang)
        return rv.check_blank(review, item, answer, grader, lang)

    def review_withholds(self, item):
        return item.kind != "cloze"  # a blank's reference fill would solve the exercise


FILL = register(Fill())
