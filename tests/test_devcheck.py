"""CI proof of the built-in pack through the real sandbox: every template fails as shipped, every
reference passes, every misconception is rejected on its own blank with its own feedback, and every
exercise has all its texts in English and Chinese (the same checks as `alignlings dev check`)."""

from __future__ import annotations

import pytest

from alignlings.grading.devcheck import check_exercise
from alignlings.grading.grader import Grader
from alignlings.content.pack import load_pack

PACK = load_pack()
pytestmark = pytest.mark.slow  # grades every exercise's template, reference and misconceptions


@pytest.fixture(scope="module")
def grader():
    with Grader(PACK, warm=True) as g:
        yield g


@pytest.mark.parametrize("exercise_id", list(PACK.exercises))
def test_pack_exercise_proves_itself(exercise_id, grader):
    report = check_exercise(PACK.get(exercise_id), grader)
    assert report.ok, "\n".join(report.problems)


def test_dev_check_command_reports_a_broken_pack(tmp_path):
    import shutil

    from typer.testing import CliRunner

    from alignlings.cli.app import app

    broken = tmp_path / "pack"
    shutil.copytree(PACK.path, broken, ignore=shutil.ignore_patterns("__pycache__"))
    # the pack's texts/ stay: they name the concept tags dpo-loss uses
    for folder in list(broken.iterdir()):
        if folder.is_dir() and folder.name not in ("dpo-loss", "texts"):
            shutil.rmtree(folder)
    (broken / "pack.toml").write_text('[pack]\nid = "broken"\norder = ["dpo-loss"]\n')
    # a misconception that is in fact correct must be reported
    with (broken / "dpo-loss" / "misconceptions.toml").open("a") as f:
        f.write('\n[[misconception]]\nid = "actually-right"\nblank = 1\n'
                'fill = "torch.sub(policy_chosen_logp, ref_chosen_logp)"\nfeedback.en = "x"\nfeedback.zh = "x"\n')
    result = CliRunner().invoke(app, ["dev", "check", "--pack", str(broken)])
    assert result.exit_code == 1
    assert "misconception actually-right (blank 1) is accepted" in result.output
    assert result.output.count("    - ") == 1, result.output  # only that problem: the copied pack grades
