"""The verdict is a public contract (issue 30 §3): ``alignlings check --json`` prints it, the web API
answers it, notebooks and the store keep it. docs/verdict.schema.json (JSON Schema 2020-12, version
1) says what it is; tests/verdicts/ holds golden verdicts, one per exercise kind and one per failure
class, made by the real grader (tests/verdicts/README.md says how) except where noted; and every
verdict ``Grader.check`` builds anywhere in the test suite is validated against the schema
(tests/conftest.py wraps it)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema")

from alignlings.content import kinds  # noqa: E402
from alignlings.grading.grader import Grader  # noqa: E402 - loaded at collection: conftest wraps its check
from alignlings.grading.sandbox import ERROR_KINDS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "docs" / "verdict.schema.json").read_text(encoding="utf-8"))
GOLDEN = Path(__file__).resolve().parent / "verdicts"
KIND_FIXTURES = {"code": ["code-passed", "code-misconception"], "bug": ["bug-not-fixed", "bug-fixed"],
                 "quiz": ["quiz-round"], "bug-or-not": ["bug-or-not-round"], "predict": ["predict-round"]}


def validator():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    return jsonschema.Draft202012Validator(SCHEMA)


def golden(name: str) -> dict:
    return json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))


def test_the_schema_is_versioned_and_every_golden_verdict_validates():
    assert SCHEMA["$id"].endswith(":1") and "Version 1" in SCHEMA["description"]
    v = validator()
    files = sorted(GOLDEN.glob("*.json"))
    assert files
    for path in files:
        errors = [e.message for e in v.iter_errors(json.loads(path.read_text(encoding="utf-8")))]
        assert errors == [], (path.name, errors)


def test_there_is_a_golden_verdict_for_every_kind_and_every_failure_class():
    assert set(KIND_FIXTURES) == set(kinds.REGISTRY)
    for names in KIND_FIXTURES.values():
        for name in names:
            assert golden(name)["exercise"]
    assert golden("bug-not-fixed")["bug"]["changes"] is not None and golden("code-misconception")["blanks"]
    assert set(SCHEMA["$defs"]["error"]["properties"]["kind"]["enum"]) == set(ERROR_KINDS)
    for kind in ERROR_KINDS:
        assert golden(f"error-{kind}")["error"]["kind"] == kind


def test_the_schema_refuses_what_breaks_the_contract():
    v = validator()
    good = golden("code-misconception")
    broken = []
    for change in (lambda d: d.pop("passed"), lambda d: d.update(passed="yes"),
                   lambda d: d.update(error={"kind": "sleepy", "message": ""}),
                   lambda d: d["blanks"][0].pop("misconception"), lambda d: d["cases"][0].update(kind="secret"),
                   lambda d: d.update(score=1)):
        d = copy.deepcopy(good)
        change(d)
        broken.append(not v.is_valid(d))
    assert all(broken), broken
    assert v.is_valid({**good, "a_field_added_later": 1})  # consumers ignore fields they do not know



def test_every_verdict_the_grader_builds_in_the_suite_is_validated():
    """conftest's wrapper refuses a verdict outside the schema (it wraps Grader.check for every test)."""
    import conftest

    conftest._check_verdict(golden("bug-not-fixed"))
    with pytest.raises(AssertionError, match="outside docs/verdict.schema.json"):
        conftest._check_verdict({**golden("code-passed"), "passed": None})
    assert getattr(Grader.check, "_checks_the_contract", False)
