"""alignlings.check(...) from a notebook: grades function objects by their source, like `alignlings check`."""

from __future__ import annotations

import importlib.util
import textwrap

import pytest

import alignlings


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))


def load_functions(tmp_path, name, source):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CORRECT = """
import torch
import torch.nn.functional as F

def dpo_loss(policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp, beta=0.1):
    # TODO 1: the chosen answer's implicit reward
    chosen_implicit_r = torch.sub(policy_chosen_logp, ref_chosen_logp)
    rejected_implicit_r = policy_rejected_logp - ref_rejected_logp
    margin = beta * (chosen_implicit_r - rejected_implicit_r)
    loss = F.softplus(-margin).mean()
    return loss
"""


def test_check_grades_a_function_object(tmp_path):
    mod = load_functions(tmp_path, "nb_ok", CORRECT)
    verdict = alignlings.check("dpo-loss", mod.dpo_loss)
    assert verdict["passed"], verdict
    assert [b["passed"] for b in verdict["blanks"]] == [True] * 4
    assert "PASSED" in verdict._repr_html_()
    from alignlings.practice.store import ProgressStore

    assert ProgressStore().summary()["dpo-loss"]["solved"]


def test_check_names_the_wrong_blank(tmp_path):
    mod = load_functions(tmp_path, "nb_bad", CORRECT.replace("margin = beta * (chosen_implicit_r - rejected_implicit_r)",
                                                             "margin = beta * (rejected_implicit_r - chosen_implicit_r)"))
    verdict = alignlings.check("dpo-loss", mod.dpo_loss, lang="zh")
    assert not verdict["passed"]
    assert [b["passed"] for b in verdict["blanks"]] == [True, True, False, True]
    assert verdict["blanks"][2]["misconception"] == "margin-reversed"
    assert "chosen" in verdict["blanks"][2]["message"] and "偏好" in verdict["blanks"][2]["message"]
    assert "空 3" in repr(verdict)  # the check was in Chinese: so is its summary


def test_check_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="objs"):
        alignlings.check("dpo-loss")
    mod = load_functions(tmp_path, "nb_other", "def something_else():\n    return 1\n")
    with pytest.raises(ValueError, match="something_else"):
        alignlings.check("dpo-loss", mod.something_else)


def test_every_exercise_exports_a_valid_notebook():
    import nbformat

    from alignlings.practice.notebook import exercise_notebook
    from alignlings.content.pack import load_pack

    for ex in load_pack():
        for lang in ("en", "zh"):
            nb = exercise_notebook(ex, lang)
            nbformat.validate(nb)
            if ex.kind_spec.graded_as_file:
                assert any("alignlings.check(" in c.source for c in nb.cells)


def test_check_in_a_course_records_under_the_exercises_pack(tmp_path, monkeypatch):
    import shutil

    from alignlings.content.pack import load_pack
    from alignlings.practice.store import ProgressStore

    pack = tmp_path / "ipo"
    pack.mkdir()
    shutil.copytree(load_pack().get("dpo-loss").path, pack / "dpo-loss")
    (pack / "pack.toml").write_text('[pack]\nid = "ipo"\ntitle = "IPO"\ninclude = ["dpo-grpo"]\n')
    mod = load_functions(tmp_path, "nb_course", CORRECT)
    with pytest.raises(ValueError, match="several packs"):
        alignlings.check("dpo-loss", mod.dpo_loss, pack=[str(pack)])
    verdict = alignlings.check("ipo/dpo-loss", mod.dpo_loss, pack=[str(pack)])
    assert verdict["passed"], verdict
    assert ProgressStore().summary("ipo")["dpo-loss"]["solved"] and "dpo-loss" not in ProgressStore().summary()
    monkeypatch.setenv("ALIGNLINGS_PACK", str(pack))  # the default course, as in the CLI
    assert alignlings.check("ipo/dpo-loss", mod.dpo_loss)["passed"]
