"""Authoring without guesswork (issue 24 §3): `dev new --kind` writes a skeleton of every kind that
passes `dev check` once filled; every `dev check` problem names FILE:LINE of the file at fault; an
unknown id suggests the closest one; `solution` and `dev preview` keep whole lines when piped."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from alignlings.cli.app import app
from alignlings.content import packlint
from alignlings.content.pack import PackError, load_pack

runner = CliRunner()
KINDS = ("fill", "quiz", "bug", "bug-or-not", "predict")


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ALIGNLINGS_LANG", "en")
    monkeypatch.setenv("COLUMNS", "400")  # one problem per output line, however long its path
    monkeypatch.delenv("ALIGNLINGS_PACK", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args):
    return runner.invoke(app, list(args), catch_exceptions=False)


def fill(folder: Path) -> None:
    """What a teacher does with the skeleton: write the texts (here: drop the markers)."""
    for path in folder.rglob("*"):
        if path.is_file() and path.suffix in (".py", ".toml"):
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace("TODO(author): ", "").replace("TODO(author)", ""), encoding="utf-8")


def problems(output: str) -> list[str]:
    return [line.strip()[2:] for line in output.splitlines() if line.strip().startswith("- ")]


def line_no(path: Path, pattern: str, nth: int = 1) -> int:
    hits = [i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1) if re.search(pattern, line)]
    return hits[nth - 1]


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """One pack with a skeleton of every kind, filled."""
    root = tmp_path_factory.mktemp("authoring")
    pack = root / "course"
    for kind in KINDS:
        out = runner.invoke(app, ["dev", "new", f"my-{kind}", "--kind", kind, "--pack", str(pack)])
        assert out.exit_code == 0, out.output
    return pack


def test_every_kind_has_a_skeleton_with_the_files_of_its_kind(course):
    assert load_pack(course).order == tuple(f"my-{k}" for k in KINDS)
    assert {p.name for p in (course / "my-bug").iterdir()} >= {"buggy.py", "solution.py", "check.py",
                                                              "misconceptions.toml", "exercise.toml", "texts"}
    assert (course / "my-bug-or-not" / "bugornot.toml").is_file() and (course / "my-quiz" / "quiz.toml").is_file()
    fill_texts = (course / "my-fill" / "texts" / "en.toml").read_text()
    assert "blank_hints" in fill_texts and "blank_hints" in (course / "my-fill" / "texts" / "zh.toml").read_text()
    for kind in ("fill", "bug"):
        assert "manual_seed(fresh(seed))" in (course / f"my-{kind}" / "check.py").read_text()
    assert "[[wrong_fix]]" in (course / "my-bug" / "misconceptions.toml").read_text()
    assert "story" in (course / "my-bug" / "texts" / "zh.toml").read_text()
    assert {p.name for p in (course / "my-predict").iterdir()} == {"exercise.toml", "predict.toml", "variant.py", "texts"}
    variant = (course / "my-predict" / "variant.py").read_text()
    assert "def run_my_predict() -> dict:" in variant and "def supports_my_predict(result: dict) -> int:" in variant
    assert invoke("dev", "new", "x-y", "--kind", "essay", "--pack", str(course)).exit_code == 2


def test_unfilled_skeletons_fail_with_file_and_line_then_pass_once_filled(course, tmp_path):
    import shutil

    pack = tmp_path / "course"
    shutil.copytree(course, pack)
    lines = [str(p) for p in packlint.lint_pack(load_pack(pack))]
    assert f"{pack / 'pack.toml'}:3: TODO(author) placeholder from `dev new`: write the real text" in lines
    for kind in KINDS:
        assert any(re.match(rf"{re.escape(str(pack / f'my-{kind}' / 'texts' / 'zh.toml'))}:\d+: TODO", x) for x in lines)
    for name in ("predict.toml", "variant.py"):  # the predict skeleton's question, options and docstring too
        path = pack / "my-predict" / name
        assert f"{path}:{line_no(path, 'TODO')}: TODO(author) placeholder from `dev new`: write the real text" in lines
    fill(pack)
    out = invoke("dev", "check", "--pack", str(pack))
    assert out.exit_code == 0, out.output
    assert "2 wrong fixes rejected with their feedback" in out.output and "3 misconceptions rejected" in out.output
    assert "answer, reasons and code" in out.output and "dev check passed" in out.output
    assert "supports(run()) == answer" in out.output


def test_the_predict_skeleton_runs_and_its_numbers_decide_the_answer(course):
    """variant.py's run really runs (a measured dict), and supports() reads the option off it."""
    import runpy

    from alignlings.content import predictions as pr

    ns = runpy.run_path(str(course / "my-predict" / "variant.py"))
    result = ns["run_my_predict"]()
    small, large = result["values"]["small"], result["values"]["large"]
    assert abs(small - 0.8 ** 20) < 1e-6 and abs(large - 1.2 ** 20) < 1e-3  # x <- (1 - 2 lr) x, 20 times
    assert len(result["series"]["small"]) == len(result["series"]["large"]) == 20
    assert ns["supports_my_predict"](result) == 2
    assert ns["supports_my_predict"]({"values": {"small": 0.01, "large": 0.001}}) == 1  # from the numbers
    assert ns["supports_my_predict"]({"values": {"small": 0.01, "large": 0.01}}) == 0
    ex = load_pack(course).get("my-predict")
    (q,) = ex.predict
    assert q.answer == 2 and q.result_fields() == {"small", "large"} and set(q.chart.series) == {"small", "large"}
    assert not pr.run_variant(ex, q, use_cache=False).supports_error


def test_a_predict_item_carries_no_hints_and_its_answer_must_be_what_the_run_supports(filled):
    import shutil

    for other in ("my-fill", "my-quiz", "my-bug", "my-bug-or-not"):
        shutil.rmtree(filled / other)
    (filled / "pack.toml").write_text('[pack]\nid = "course"\ntitle = { en = "C", zh = "课" }\norder = ["my-predict"]\n')
    zh = filled / "my-predict" / "texts" / "zh.toml"
    zh.write_text(zh.read_text(encoding="utf-8") + 'hints = ["看看 1 - 2·lr"]\nexplanation = "因为……"\n', encoding="utf-8")
    toml = filled / "my-predict" / "predict.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace("answer = 2 ", "answer = 1 "), encoding="utf-8")
    out = invoke("dev", "check", "--pack", str(filled))
    assert out.exit_code == 1
    found = problems(out.output)
    assert f"{zh}:{line_no(zh, '^hints')}: hints: a predict item shows no hints: they would answer the question " \
           "before the learner commits; remove it" in found, found
    assert any(p.startswith(f"{zh}:{line_no(zh, '^explanation')}: explanation: never shown") for p in found), found
    assert any(p.startswith(f"{toml}:{line_no(toml, '^answer')}: answer = 1, but supports_my_predict(run_my_predict()) "
                            "= option 2") for p in found), found


@pytest.fixture()
def filled(course, tmp_path):
    import shutil

    pack = tmp_path / "course"
    shutil.copytree(course, pack)
    fill(pack)
    return pack


def test_grading_problems_name_the_misconception_line(filled):
    misc = filled / "my-fill" / "misconceptions.toml"
    with misc.open("a", encoding="utf-8") as f:  # a "misconception" that is in fact right
        f.write('\n[[misconception]]\nid = "actually-right"\nblank = 1\nfill = "x * beta"\n'
                'feedback.en = "x"\nfeedback.zh = "x"\n')
    for other in ("my-quiz", "my-bug", "my-bug-or-not", "my-predict"):  # grade only the fill exercise
        import shutil

        shutil.rmtree(filled / other)
    (filled / "pack.toml").write_text('[pack]\nid = "course"\ntitle = { en = "C", zh = "课" }\norder = ["my-fill"]\n')
    out = invoke("dev", "check", "--pack", str(filled))
    assert out.exit_code == 1
    want = f"{misc}:{line_no(misc, 'actually-right')}: misconception actually-right (blank 1) is accepted"
    assert problems(out.output) == [want], out.output


def test_a_bug_drill_problem_names_its_wrong_fix_and_a_story_its_language(filled):
    misc = filled / "my-bug" / "misconceptions.toml"
    text = misc.read_text(encoding="utf-8")
    misc.write_text(text.replace('replace = "    return total"', 'replace = "    return total / mask.sum()"'),
                    encoding="utf-8")  # this wrong fix is the right one
    zh = filled / "my-bug" / "texts" / "zh.toml"
    zh.write_text(re.sub(r'story = """.*?"""', 'story = ""', zh.read_text(encoding="utf-8"), flags=re.S),
                  encoding="utf-8")
    for other in ("my-fill", "my-quiz", "my-bug-or-not", "my-predict"):
        import shutil

        shutil.rmtree(filled / other)
    (filled / "pack.toml").write_text('[pack]\nid = "course"\ntitle = { en = "C", zh = "课" }\norder = ["my-bug"]\n')
    out = invoke("dev", "check", "--pack", str(filled))
    assert out.exit_code == 1
    found = problems(out.output)
    assert f"{zh}:{line_no(zh, '^story')}: empty story (the real bug: repository, issue/PR, symptom, fix)" in found
    assert f"{misc}:{line_no(misc, 'sum-not-mean')}: wrong_fix sum-not-mean is accepted" in found, found


def test_structural_problems_name_their_file_and_line(filled):
    pack = load_pack(filled)
    fill_ex = filled / "my-fill"
    misc = fill_ex / "misconceptions.toml"
    text = misc.read_text(encoding="utf-8")
    misc.write_text(text.replace('id = "divides-by-beta"', 'id = "beta-missing"'), encoding="utf-8")
    meta = fill_ex / "exercise.toml"
    meta.write_text(meta.read_text(encoding="utf-8") + '\n[concepts]\n1 = ["no-such-concept"]\n', encoding="utf-8")
    zh = fill_ex / "texts" / "zh.toml"
    zh.write_text(zh.read_text(encoding="utf-8").replace("hints = [", "hints = [[", 1), encoding="utf-8")
    (filled / "pack.toml").write_text((filled / "pack.toml").read_text() + "# TODO(author): a course note\n")
    lines = [str(p) for p in packlint.lint_pack(load_pack(filled), course=pack)]
    assert f"{misc}:{line_no(misc, 'beta-missing', 2)}: misconception id 'beta-missing' is used twice: every " \
           "misconception needs its own id" in lines
    assert f"{meta}:{line_no(meta, 'no-such-concept')}: unknown concept tag 'no-such-concept': name it in " \
           "[concepts] of the pack's texts/en.toml (e.g. no-such-concept = \"...\")" in lines
    assert any(x.startswith(f"{zh}:") and "TOML" in x for x in lines), lines  # zh.toml's problem is zh.toml's
    assert not any(x.startswith(f"{fill_ex / 'texts' / 'en.toml'}:") for x in lines), lines
    pt = filled / "pack.toml"
    assert f"{pt}:{line_no(pt, 'TODO')}: TODO(author) placeholder from `dev new`: write the real text" in lines
    # a tag named in every language is known
    for lang, name in (("en", "A concept"), ("zh", "一个概念")):
        texts = filled / "texts" / f"{lang}.toml"
        texts.parent.mkdir(exist_ok=True)
        texts.write_text(f'[concepts]\nno-such-concept = "{name}"\n', encoding="utf-8")
    assert not any("unknown concept tag" in str(p) for p in packlint.lint_pack(load_pack(filled)))


def test_every_problem_of_dev_check_reads_file_colon_line(filled):
    """Whatever breaks, every problem line starts with an existing file of the pack and a line number."""
    (filled / "my-quiz" / "texts" / "zh.toml").write_text('statement = "题"\nhints = ["一"]\nexplanation = ""\n',
                                                         encoding="utf-8")
    bon = filled / "my-bug-or-not" / "bugornot.toml"
    bon.write_text(bon.read_text(encoding="utf-8").replace('text.zh = "理由 2"\n', ""), encoding="utf-8")
    out = invoke("dev", "check", "--pack", str(filled))
    assert out.exit_code == 1
    found = problems(out.output)
    assert found
    for p in found:
        m = re.match(r"(/\S+?):(\d+): ", p)
        assert m and Path(m.group(1)).is_file(), p
    quiz_zh = filled / "my-quiz" / "texts" / "zh.toml"
    assert f"{quiz_zh}:2: 1 hints, expected at least 3" in found and f"{quiz_zh}:3: empty explanation" in found
    second_reason = line_no(bon, r"^\[\[reason\]\]", 2)
    assert any(p.startswith(f"{bon}:{second_reason}: reason 2 has no zh text") for p in found), found


def test_an_unknown_id_suggests_the_closest_one():
    with pytest.raises(PackError, match=r"unknown id 'dpo-los'; did you mean 'dpo-loss'\?"):
        load_pack().get("dpo-los")
    with pytest.raises(PackError) as exc:
        load_pack().get("zzzzzz")
    assert "did you mean" not in str(exc.value)
    out = invoke("show", "reinforce-rlo")
    assert out.exit_code == 2 and "did you mean 'reinforce-rloo'?" in out.output


def test_solution_and_preview_keep_whole_lines_when_piped():
    from alignlings.grading.grader import solution_for, template_for

    ex = load_pack().get("dpo-loss")
    code = solution_for(ex, "en")
    assert max(map(len, code.splitlines())) > 80  # the case the issue saw cut
    out = invoke("solution", "dpo-loss")
    assert out.exit_code == 0
    for line in code.splitlines():
        assert line in out.output.splitlines(), line
    template = template_for(ex, "en")
    out = invoke("dev", "preview", "dpo-loss")
    assert out.exit_code == 0
    for line in template.splitlines():
        assert line in out.output.splitlines(), line
