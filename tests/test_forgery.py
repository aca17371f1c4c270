"""A hostile learner cannot forge a pass: each submission below tries to get ``passed: true`` for
dpo-loss without computing the loss, on the warm path (the web app's fork server), the per-check
fork server (the CLI) and the cold bubblewrap path. Every one must fail, and the reference and a
right answer written differently must still pass on the same grader (so the test can fail).
"""

from __future__ import annotations

import shutil
import textwrap

import pytest

from alignlings.grading.grader import Grader

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (scripts/test.sh installs it)")

HEADER = "import torch\nimport torch.nn.functional as F\n"


def _wrap(body: str) -> str:
    """A dpo_loss whose body is ``body`` (it may use the four arguments and beta)."""
    return HEADER + "\n\ndef dpo_loss(policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp, beta=0.1):\n" \
        + textwrap.indent(textwrap.dedent(body), "    ") + "\n"


RIGHT_DIFFERENTLY = _wrap("""
    logits = beta * ((policy_chosen_logp - policy_rejected_logp) - (ref_chosen_logp - ref_rejected_logp))
    return F.softplus(-logits).mean()
""")

WRONG = _wrap("return torch.tensor(0.5)")

FORGERIES = {
    # patch the comparison from inside the learner's module (the old grader bound it in-process)
    "patch compare and isclose": HEADER + textwrap.dedent("""
        import sys
        for name in list(sys.modules):
            mod = sys.modules[name]
            if name.startswith("alignlings"):
                for attr in ("compare", "_compare", "_judge", "_same_behaviour"):
                    if hasattr(mod, attr):
                        setattr(mod, attr, lambda *a, **k: None)
        torch.isclose = lambda a, b, **k: torch.ones_like(torch.as_tensor(a), dtype=torch.bool)
        torch.allclose = lambda *a, **k: True

        def dpo_loss(policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp, beta=0.1):
            return torch.tensor(0.0)
        """),
    # walk up the stack to the grader's expected values or the reference's source
    "walk frames to expected or reference": HEADER + textwrap.dedent("""
        import sys

        def _loot():
            f = sys._getframe()
            while f is not None:
                for key in ("expected", "payload", "reference", "trusted"):
                    v = f.f_locals.get(key)
                    if isinstance(v, dict) and "reference" in v:
                        ns = {}
                        exec(v["reference"], ns)
                        return ns["dpo_loss"]
                    if isinstance(v, dict) and v:
                        return v
                f = f.f_back
            return None

        def dpo_loss(policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp, beta=0.1):
            found = _loot()
            if callable(found):
                return found(policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp, beta)
            if isinstance(found, dict):
                for v in found.values():
                    return v
            raise RuntimeError("nothing to loot")
        """),
    # read the reference solution from the installed package
    "read solution.py": HEADER + textwrap.dedent("""
        import glob, os, sys

        def _solution():
            real = getattr(sys.modules.get("alignlings"), "_REAL_PACKAGE", None) or ""
            candidates = [os.path.join(real, "packs", "dpo-grpo", "dpo-loss", "solution.py")]
            for p in [*sys.path, "/work/main/src", os.path.dirname(real)]:
                candidates += glob.glob(os.path.join(p, "alignlings", "packs", "*", "dpo-loss", "solution.py"))
                candidates += glob.glob(os.path.join(p, "*", "alignlings", "packs", "*", "dpo-loss", "solution.py"))
            for path in candidates:
                try:
                    return open(path).read().replace("# BLANK", "")
                except OSError:
                    continue
            return None

        _src = _solution()

        def dpo_loss(policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp, beta=0.1):
            if _src is None:
                raise RuntimeError("no solution found")
            ns = {}
            exec(_src, ns)
            return ns["dpo_loss"](policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp, beta)
        """),
    # import the reference library's own loss
    "import the library's dpo_loss": HEADER + textwrap.dedent("""
        def dpo_loss(policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp, beta=0.1):
            from alignlings.losses.dpo import dpo_loss as ref
            return ref(policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp, beta=beta)
        """),
    # write a made-up "all passed" report to the result pipe and leave before the runner can speak
    "forge the result pipe": HEADER + textwrap.dedent("""
        import json, os

        def _forge():
            fake = {"status": "ok", "value": {
                "learner": {"load_error": None, "cases": [{"name": "spec batch (beta 0.1)", "passed": True}]},
                "load_error": None, "stdout": "", "cases": {"spec batch (beta 0.1)": {"value": 0.6589}},
                "blanks": {}, "passed": True}}
            data = json.dumps(fake).encode()
            for fd in range(3, 64):
                try:
                    if os.path.islink(f"/proc/self/fd/{fd}") and "pipe" in os.readlink(f"/proc/self/fd/{fd}"):
                        os.write(fd, data)
                except OSError:
                    pass
            os._exit(0)

        _forge()
        """),
    # read the expected-value cache of the grader's home
    "read the expected cache": HEADER + textwrap.dedent("""
        import glob, json, os

        def dpo_loss(policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp, beta=0.1):
            home = os.path.expanduser("~")
            for pattern in ("/tmp/*/cache/expected/dpo-loss-*.json", "/tmp/*/*/cache/expected/dpo-loss-*.json",
                            "/root/.cache/alignlings/expected/dpo-loss-*.json",
                            home + "/.cache/alignlings/expected/dpo-loss-*.json"):
                for path in glob.glob(pattern):
                    try:
                        return json.load(open(path))
                    except OSError:
                        continue
            raise RuntimeError("no cache visible")
        """),
    # search this process's memory for the reference's lines (left by an earlier job in the fork server)
    "scan memory for the reference": HEADER + textwrap.dedent("""
        import ctypes, re

        NEEDLE = b"logsig" + b"moid(margin).mean()"

        def _scan():
            hits = []
            with open("/proc/self/maps") as f:
                maps = f.read().splitlines()
            with open("/proc/self/mem", "rb", 0) as mem:
                for line in maps:
                    parts = line.split()
                    if "rw" not in parts[1] or (len(parts) > 5 and parts[5].startswith("/")):
                        continue
                    lo, hi = (int(x, 16) for x in parts[0].split("-"))
                    if hi - lo > 512 * 2**20:
                        continue
                    try:
                        mem.seek(lo)
                        chunk = mem.read(hi - lo)
                    except (OSError, ValueError, OverflowError):
                        continue
                    for m in re.finditer(re.escape(NEEDLE), chunk):
                        hits.append(chunk[max(0, m.start() - 400): m.end()])
            return hits

        def dpo_loss(policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp, beta=0.1):
            for hit in _scan():
                text = hit.decode("utf-8", "ignore")
                start = text.rfind("def dpo_loss")
                if start >= 0:
                    ns = {"torch": torch, "F": F}
                    try:
                        exec(text[start:].split("return loss")[0] + "return loss", ns)
                        return ns["dpo_loss"](policy_chosen_logp, policy_rejected_logp, ref_chosen_logp,
                                              ref_rejected_logp, beta)
                    except Exception:
                        continue
            raise RuntimeError("reference not in memory")
        """),
    # read another learner's passed attempt from the progress database: the server was started
    # with `python -m alignlings` in the folder that holds it (that folder is on sys.path)
    "read the progress database": HEADER + textwrap.dedent("""
        import glob, os, sys

        def _attempt():
            folders = [os.getcwd(), os.environ.get("ALIGNLINGS_HOME", ""), *sys.path]
            for folder in folders:
                for path in glob.glob(os.path.join(folder, "*.sqlite3")):
                    try:
                        text = open(path, encoding="utf-8", errors="replace").read()
                    except OSError:
                        continue
                    start = text.find("def dpo_loss")
                    if start >= 0:
                        return text[start:text.index("# end of attempt", start)]
            return None

        def dpo_loss(policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp, beta=0.1):
            src = _attempt()
            if src is None:
                raise RuntimeError("no database visible")
            ns = {"torch": torch, "F": F}
            exec(src, ns)
            return ns["dpo_loss"](policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp, beta)
        """),
    # a result the grader cannot decode: json.loads raised RecursionError (a 500 on the web)
    "nested brackets on the result pipe": HEADER + textwrap.dedent("""
        import os

        data = b"[" * 200000
        for fd in range(3, 64):
            try:
                if os.path.islink(f"/proc/self/fd/{fd}") and "pipe" in os.readlink(f"/proc/self/fd/{fd}"):
                    os.write(fd, data)
            except OSError:
                pass
        os._exit(0)
        """),
    # return an object that claims equality with anything
    "an object equal to everything": HEADER + textwrap.dedent("""
        class Always(torch.Tensor):
            def __eq__(self, other):
                return True
            def __ne__(self, other):
                return False

        def dpo_loss(policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp, beta=0.1):
            class Anything:
                def __eq__(self, other):
                    return True
                shape = ()
                dtype = torch.float32
            return Anything()
        """),
}

FILL_FORGERIES = {
    # fill-in mode: a fill that patches the comparison, then returns a wrong value
    "fill patches compare": ["policy_chosen_logp - ref_chosen_logp", "policy_rejected_logp - ref_rejected_logp",
                             "beta * (chosen_implicit_r - rejected_implicit_r)",
                             "(setattr(torch, 'isclose', lambda *a, **k: torch.tensor(True)), "
                             "[setattr(m, 'compare', lambda *a, **k: None) for n, m in list(__import__('sys').modules.items()) "
                             "if n.startswith('alignlings') and hasattr(m, 'compare')], torch.tensor(0.0))[2]"],
    # fill-in mode: a fill that forges the result pipe
    "fill forges the pipe": ["policy_chosen_logp - ref_chosen_logp", "policy_rejected_logp - ref_rejected_logp",
                             "beta * (chosen_implicit_r - rejected_implicit_r)",
                             "[__import__('os').write(fd, b'{\"status\": \"ok\", \"value\": {\"passed\": true}}') "
                             "for fd in range(3, 30) if __import__('os').path.exists(f'/proc/self/fd/{fd}')] "
                             "and __import__('os')._exit(0)"],
}


@pytest.fixture(scope="module", params=["warm", "per-check server", "bubblewrap"])
def grader(request, tmp_path_factory, monkeypatch_module):
    home = tmp_path_factory.mktemp("home")
    monkeypatch_module.setenv("ALIGNLINGS_HOME", str(home))
    # like `python -m alignlings serve` run in the folder of the progress database: it is the current
    # directory and on sys.path, and holds another learner's passed attempt
    (home / "progress.sqlite3").write_text("attempt 7, passed:\n" + RIGHT_DIFFERENTLY.split("\n\n", 1)[1]
                                           + "\n# end of attempt\n")
    monkeypatch_module.chdir(home)
    monkeypatch_module.syspath_prepend(str(home))
    kind = request.param
    g = Grader(warm=True) if kind == "warm" else Grader(isolation="namespaces", fork_server=kind != "bubblewrap")
    yield g
    g.close()


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_the_grader_still_passes_right_answers(grader):
    assert grader.check("dpo-loss", RIGHT_DIFFERENTLY)["passed"]
    assert not grader.check("dpo-loss", WRONG)["passed"]


WHY = {  # what each forgery must run into (so that it fails for the right reason, not by accident)
    "read solution.py": "no solution found",
    "import the library's dpo_loss": "No module named 'alignlings.losses'",
    "forge the result pipe": ("did not have the exercise's form", "result could not be read",
                              "before the job function returned"),
    "read the expected cache": "no cache visible",
    "read the progress database": "no database visible",
    # refused either while decoding (an unreadable result) or as an exit before the job returned
    "nested brackets on the result pipe": ("result could not be read", "before the job function returned"),
    "scan memory for the reference": "reference not in memory",
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_forgery_fails(grader, name):
    verdict = grader.check("dpo-loss", FORGERIES[name])
    assert verdict["passed"] is False, (name, verdict["cases"], verdict["error"])
    if name in WHY:
        said = (verdict["error"] or {}).get("message", "") + " ".join(c["message"] for c in verdict["cases"])
        reasons = WHY[name] if isinstance(WHY[name], tuple) else (WHY[name],)
        assert any(r in said for r in reasons), said
    # and the forged attempt never reaches a verdict of all-passed cases
    assert not (verdict["cases"] and all(c["passed"] for c in verdict["cases"]))


@pytest.mark.parametrize("name", sorted(FILL_FORGERIES))
def test_fill_forgery_fails(grader, name):
    verdict = grader.check("dpo-loss", fills=FILL_FORGERIES[name])
    assert verdict["passed"] is False
    assert verdict["blanks"][3]["passed"] is not True


def test_a_warm_job_does_not_see_an_earlier_reference_in_memory(grader):
    """The memory scan finds nothing even right after the trusted run and a correct learner file
    went through the same fork server (payloads reach jobs through pipes the server never reads)."""
    grader.check("dpo-loss", RIGHT_DIFFERENTLY)
    verdict = grader.check("dpo-loss", FORGERIES["scan memory for the reference"])
    assert not verdict["passed"]
    messages = " ".join(c["message"] for c in verdict["cases"])
    assert "reference not in memory" in messages or verdict["error"], messages


def test_another_alignlings_on_the_import_path_is_hidden_too(tmp_path_factory):
    """An older install or a checkout on PYTHONPATH holds the solutions too: the job sees an empty
    folder there (only the job tree's minimal alignlings is importable), on both paths."""
    import tempfile
    from pathlib import Path

    from alignlings.grading.sandbox import WarmSandbox, run_job

    top = Path(tempfile.mkdtemp(dir="/var/tmp"))  # not under /tmp: each job gets a fresh /tmp
    try:
        solution = top / "checkout" / "alignlings" / "packs" / "dpo-grpo" / "dpo-loss" / "solution.py"
        solution.parent.mkdir(parents=True)
        solution.write_text("ANSWER = 42\n")
        (top / "targets").mkdir()
        (top / "targets" / "peek.py").write_text(
            "import os\n\ndef peek(payload):\n    p = payload['path']\n"
            "    return {'exists': os.path.exists(p), 'listing': os.listdir(payload['package'])}\n")
        for p in (top, top / "checkout", top / "targets"):
            p.chmod(0o755)
        extra = [str(top / "targets"), str(top / "checkout")]
        payload = {"package": str(top / "checkout" / "alignlings")}
        cold = run_job("peek:peek", {**payload, "path": str(solution)}, extra_pythonpath=extra, isolation="namespaces")
        with WarmSandbox(preload=[], isolation="namespaces", extra_pythonpath=extra) as sandbox:
            warm = sandbox.run("peek:peek", {**payload, "path": str(solution)})
        for result in (cold, warm):
            assert result.ok, result
            assert result.value == {"exists": False, "listing": []}, result.value
    finally:
        import shutil

        shutil.rmtree(top, ignore_errors=True)
