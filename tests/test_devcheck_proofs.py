"""`dev check` proves every blank is graded and every case reproducible (issue 19 §4), on a small
pack made from `alignlings dev new`'s skeleton: a blank in a helper no case calls is reported as
``FILE:LINE: blank N is never graded``, an unseeded case by name as unreproducible, and the skeleton
as written reports neither (so the test can fail)."""

from __future__ import annotations

import pytest

from alignlings.content import skeleton
from alignlings.grading.devcheck import check_blanks_graded, check_exercise
from alignlings.grading.grader import Grader
from alignlings.content.pack import load_pack

HELPER = '''

def unused_helper(x: torch.Tensor) -> torch.Tensor:
    """Scaled the other way; no case calls it."""
    shifted = x - 1.0  # BLANK
    return shifted
'''

UNSEEDED = '''        Case("unseeded batch", "hidden", lambda m: m.tiny_ex(torch.randn(8), beta=0.5)),
'''


def _pack(tmp_path, *, helper=False, unseeded=False):
    skeleton.write(tmp_path / "pack", "tiny-ex")
    folder = tmp_path / "pack" / "tiny-ex"
    if helper:
        solution = folder / "solution.py"
        text = solution.read_text()
        cut = text.index('\n\nif __name__ == "__main__":')
        solution.write_text(text[:cut] + HELPER + text[cut:])
        for lang in ("en", "zh"):
            t = folder / "texts" / f"{lang}.toml"
            t.write_text(t.read_text().replace('blanks = ["', 'blanks = ["helper blank", "', 1))
    if unseeded:
        check = folder / "check.py"
        text = check.read_text()
        check.write_text(text.replace('        Case("large values"', UNSEEDED + '        Case("large values"'))
    return load_pack(tmp_path / "pack")


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))


def test_the_skeleton_has_every_blank_graded_and_reproducible_cases(tmp_path, home):
    pack = _pack(tmp_path)
    ex = pack.get("tiny-ex")
    with Grader(pack) as grader:
        assert grader.reference_reproducible(ex) == []
        assert check_blanks_graded(ex, grader, grader.blanks(ex)) == []


def test_a_blank_no_case_reaches_is_reported_with_file_and_line(tmp_path, home):
    pack = _pack(tmp_path, helper=True)
    ex = pack.get("tiny-ex")
    with Grader(pack) as grader:
        blanks = grader.blanks(ex)
        helper = next(b for b in blanks if b.answer == "x - 1.0")
        problems = check_blanks_graded(ex, grader, blanks)
        assert problems == [f"{ex.path / 'solution.py'}:{helper.line}: blank {helper.index} is never graded "
                            "(with a wrong value in it, every case still passes)"]
        # and a learner who leaves it empty does not pass (a found blank must be right)
        fills = [bl.answer if bl.index != helper.index else "_____" for bl in blanks]
        verdict = grader.check("tiny-ex", fills=fills, run_main=False)
        assert all(c["passed"] for c in verdict["cases"]) and verdict["passed"] is False


def test_an_unseeded_case_is_reported_by_name(tmp_path, home):
    pack = _pack(tmp_path, unseeded=True)
    ex = pack.get("tiny-ex")
    with Grader(pack, warm=True) as grader:
        assert grader.reference_reproducible(ex) == ["unseeded batch"]
        report = check_exercise(ex, grader)
    said = "\n".join(report.problems)
    assert "case 'unseeded batch' is unreproducible" in said
    assert "rejected without its feedback" not in said  # not ten misconceptions' worth of noise
