"""The terminal in the learner's terms (issue 10): `show` renders LaTeX readably, `cloze` wraps long
lines instead of cutting them, `watch` does not miss a save made during its first check."""

from __future__ import annotations

import _thread
import threading

import pytest
from typer.testing import CliRunner

from alignlings.cli.app import app
from alignlings.content.pack import load_pack

PACK = load_pack()
runner = CliRunner()


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "100")
    return tmp_path


# -- show: formulas ----------------------------------------------------------------------------
def test_latex_to_text_keeps_subscripts_and_greek():
    from alignlings.cli.show import latex_to_text

    text = latex_to_text(r"$\mathcal{L}_{\text{DPO}} = -\log \sigma(\beta \Delta)$ and $\pi_\theta$")
    assert "L_DPO" in text.replace("𝓛", "L") or "ℒ_DPO" in text
    assert "σ" in text and "β" in text and "π_θ" in text
    assert "\\" not in text and "$" not in text


def test_latex_to_text_leaves_code_spans_and_prose_alone():
    from alignlings.cli.show import latex_to_text

    src = "Run `a_b * c_d` and keep snake_case words; cost $5 is not math."
    assert latex_to_text(src) == src
    assert latex_to_text("$$x_i^2$$").strip() == "x_i^2"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_show_renders_formulas_without_eating_underscores(lang):
    result = runner.invoke(app, ["show", "dpo-loss", "--lang", lang])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "_DPO" in out  # \mathcal{L}_{\text{DPO}}: the subscript survives (rich's Markdown used to eat it)
    assert "\\mathcal" not in out and "\\text" not in out and "\\frac" not in out
    assert "π" in out and "β" in out
    if lang == "zh":
        assert "level" not in out and "难度" in out


# -- cloze: long lines ---------------------------------------------------------------------------
def test_cloze_wraps_long_lines_instead_of_cutting_them(monkeypatch):
    from alignlings.practice import cloze as cz

    monkeypatch.setenv("COLUMNS", "60")
    ex = next(e for e in PACK if e.cloze)
    source = cz.snippet_source(ex, "en")
    longest = max(source.splitlines(), key=len)
    assert len(longest) > 60  # the case this test is about
    result = runner.invoke(app, ["cloze", ex.id, "--ratio", "0.05", "--seed", "1"], input="\n" * 100)
    out = result.output
    # every word of the longest line is printed (wrapped over several rows, not cut at 60 columns)
    words = [w for w in longest.replace("(", " ").replace(")", " ").replace(",", " ").split() if len(w) > 3]
    missing = [w for w in words if w not in out and "[" not in w]
    assert not missing, (missing, out[:2000])
    assert all(len(line) <= 60 for line in out.splitlines())


# -- watch: a save during the first check --------------------------------------------------------
class SlowGrader:
    """The learner saves the file while the first check runs: the check signals that it has read the
    file (``checking``) and waits until the learner's thread has saved (``saved``); no sleeps, so the
    save lands inside the check on every run. The second check is the learner's Ctrl+C."""

    codes: list[str] = []
    checking = threading.Event()
    saved = threading.Event()

    def __init__(self, pack, warm=False):
        self.pack = pack

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def check(self, exercise_id, code=None, *, fills=None, lang="en", run_main=True, quick=False):
        SlowGrader.codes.append(code)
        if len(SlowGrader.codes) == 1:
            SlowGrader.checking.set()
            assert SlowGrader.saved.wait(60), "the learner's save never came"
        elif len(SlowGrader.codes) >= 2:
            raise KeyboardInterrupt  # the learner presses Ctrl+C during the re-check
        return {"exercise": exercise_id, "passed": False, "blanks": [], "cases": [], "error": None,
                "isolation": "fake", "stdout": ""}


@pytest.mark.parametrize("poll", [True, False], ids=["poll", "os-events"])
def test_watch_does_not_miss_a_save_during_the_first_check(tmp_path, monkeypatch, poll):
    import alignlings.grading.grader as grader_mod

    f = tmp_path / "dpo_loss.py"
    f.write_text("x = 1\n", encoding="utf-8")
    SlowGrader.codes = []
    SlowGrader.checking, SlowGrader.saved = threading.Event(), threading.Event()
    monkeypatch.setattr(grader_mod, "Grader", SlowGrader)

    def learner():
        if SlowGrader.checking.wait(60):
            f.write_text("x = 1\n# saved during the first check\n", encoding="utf-8")  # another size: another version
        SlowGrader.saved.set()

    saver = threading.Thread(target=learner, daemon=True)
    saver.start()
    guard = threading.Timer(120, _thread.interrupt_main)  # a safety net only: without the fix watch waits forever
    guard.start()
    try:
        result = runner.invoke(app, ["watch", "dpo-loss", str(f), *(["--poll"] if poll else [])])
    finally:
        guard.cancel()
        saver.join(60)
    assert len(SlowGrader.codes) >= 2, result.output
    assert "saved during the first check" in SlowGrader.codes[1]


# -- list and progress at 60, 80 and 120 columns (issue 33) ---------------------------------------
def _squeezed(text: str) -> str:
    return "".join(text.split())


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("columns", [60, 80, 120])
@pytest.mark.parametrize("command", ["list", "progress"])
def test_list_and_progress_read_at_any_width(monkeypatch, command, columns, lang):
    from rich.cells import cell_len

    from alignlings.cli.layout import NO_START

    monkeypatch.setenv("COLUMNS", str(columns))
    result = runner.invoke(app, [command, "--lang", lang])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "…" not in result.output  # nothing is cut: not an id, not a title, not a formula
    for line in lines:
        assert cell_len(line) <= columns, line
        assert line == line.rstrip(), repr(line)  # no trailing spaces
        assert not line.strip() or line.strip()[0] not in NO_START, line  # no "。" stranded at a line's start
    words = {w for line in lines for w in line.split()}
    for ex in PACK:
        assert ex.key in words, ex.key  # the id whole, on one line, copyable
        if command == "list":
            assert _squeezed(ex.title[lang]) in _squeezed(result.output), ex.title[lang]
    rows = [line for line in lines if [w for w in line.split() if w != "✓"][:1] in ([k] for k in PACK.exercises)]
    if command == "progress" or (columns == 120 and lang == "en"):
        assert len(rows) == len(PACK.exercises)  # one line per exercise
    elif columns >= 80:
        assert len(lines) < 3 * len(PACK.exercises)  # titles take a line or two, not four to six


def test_list_marks_solved_exercises_and_says_what_the_marks_mean(monkeypatch):
    from alignlings.practice.store import ProgressStore

    monkeypatch.setenv("COLUMNS", "80")
    ProgressStore().record_attempt("dpo-loss", {"passed": True}, code="x")
    for lang, legend in (("en", "solved"), ("zh", "已完成")):
        out = runner.invoke(app, ["list", "--lang", lang]).output
        assert any(line.split()[:2] == ["✓", "dpo-loss"] for line in out.splitlines() if line.split())
        assert not any(line.split()[:1] == ["✓"] and "grpo-loss" in line for line in out.splitlines())
        assert legend in out.splitlines()[-1]


def test_wrap_cells_breaks_chinese_by_width_and_keeps_formulas_whole():
    from rich.cells import cell_len

    from alignlings.cli.layout import wrap_cells

    text = "预测：学习率 ×10 时 clipfrac 如何变化。"
    for width in range(4, 40):
        lines = wrap_cells(text, width)
        assert all(cell_len(line) <= width for line in lines), (width, lines)
        assert "".join(lines).replace(" ", "") == text.replace(" ", "")  # nothing dropped, nothing added
        assert all(not line.startswith(("。", "：")) for line in lines), (width, lines)
        if width >= 9:
            assert any("×10" in line for line in lines) and any("clipfrac" in line for line in lines), lines
    assert wrap_cells("一二三四五六。", 12) == ["一二三四五", "六。"]  # the full stop goes with its character
    assert wrap_cells("abcdefgh", 3) == ["abc", "def", "gh"]  # wider than the column: folded, not cut
