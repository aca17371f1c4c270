"""What runs inside a grading job: load a module from source, run an exercise's cases, return values.

Three job functions, each run in a sandboxed process of its own (``alignlings.grading.sandbox``):

- ``run_cases``: one module (the learner's file, or the reference with one learner fill spliced in)
  against the exercise's cases. It returns each case's *value* (``values.encode``) or its error,
  nothing else: the process holds no expected values, no comparison and, for a learner's file, no
  reference code. Whatever the code does in here, it can only change the values it reports.
- ``run_trusted``: the reference and the pack's known wrong variants (misconceptions) in one
  process, with each case's metadata. Only pack code runs here; the grader caches the result.
- ``judge_predicates``: a case's ``expect`` predicate (e.g. "P(a) >= 0.7 after training") applied
  to values a learner job reported, decoded from the plain wire format; no learner code runs here.

This module, ``values`` and ``checks`` are all of alignlings a job can import (see
``sandbox.job_tree``): the library, the packs and the solutions are not visible to it.
"""

from __future__ import annotations

import contextlib
import functools
import io
import signal
import sys
import traceback
import types
from typing import Any

from alignlings.grading import values

STDOUT_CAP = 8000


class _CappedIO(io.StringIO):
    def write(self, s):
        if self.tell() < STDOUT_CAP:
            super().write(s[: STDOUT_CAP - self.tell()])
        return len(s)


_SOURCES: dict[str, list[str]] = {}  # file name -> the lines of the source last loaded under it


def _tail(exc: BaseException, filename: str = "exercise.py", limit: int = 6) -> str:
    """The traceback lines that point into the module's file (``line N: text``), plus the error."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    source = _SOURCES.get(filename) or []
    lines = []
    for f in frames[-limit:]:
        text = f.line or (source[f.lineno - 1].strip() if f.lineno and 0 < f.lineno <= len(source) else "")
        lines.append(f"  line {f.lineno}: {text}".rstrip())
    head = f"{type(exc).__name__}: {exc}"
    return "\n".join([head, *lines]) if lines else head


_recorded: dict[str, Any] = {}  # this job's learner file, compiled with its blanks recorded


def load_module(code: str, name: str = "exercise", *, main: bool = False, recorder=None,
                sites: list | None = None) -> types.ModuleType:
    """``code`` run as a module; with a ``recorder``, each blank of ``sites`` is recorded (``record``).
    Run as ``__main__`` after its cases, a recorded file reuses that code object with recording
    switched off (the same lines, one compile less)."""
    from alignlings.grading import record

    module = types.ModuleType(name)
    module.__file__ = "exercise.py"
    _SOURCES["exercise.py"] = code.splitlines()
    if main:
        module.__name__ = "__main__"
    if recorder is not None:
        compiled = _recorded[code] = record.compile_recorded(code, sites or [], recorder=recorder)
        record.install(module.__dict__, recorder)
    elif code in _recorded:
        compiled = _recorded[code]
        record.install(module.__dict__, record.Recorder.off())
    else:
        compiled = compile(code, "exercise.py", "exec")
    exec(compiled, module.__dict__)  # noqa: S102 - this is the sandbox
    return module


def load_cases(check_source: str, variant: int = 0) -> list:
    """The exercise's cases, from check.py's source (the pack folder itself is not visible here),
    drawing the inputs of ``variant`` (see ``checks.fresh``)."""
    from alignlings.content import checks

    checks.VARIANT = int(variant)
    module = types.ModuleType("_alignlings_check")
    module.__file__ = "check.py"
    _SOURCES["check.py"] = check_source.splitlines()
    exec(compile(check_source, "check.py", "exec"), module.__dict__)  # noqa: S102 - pack code
    return list(module.cases())


def case_meta(case) -> dict:
    return {"name": case.name, "kind": case.kind, "note": dict(case.note or {}), "label": dict(case.label or {}),
            "rtol": case.rtol, "atol": case.atol, "scope": case.scope, "predicate": case.expect is not None,
            "tensor": bool(getattr(case, "tensor", False))}


TIMED_OUT = "CaseTimeout"
"""The error a case reports when the job's time for its cases ran out while it ran; the cases after
it report ``NOT_RUN``. The grader words both ("timed out after N s")."""
NOT_RUN = "CaseNotRun"


class _OutOfTime(BaseException):  # not an Exception: code that catches Exception does not swallow it
    pass


class _Clock:
    """The time the cases of one job may use together (``case_seconds``), as a real-time alarm in
    this process: a case still running when it rings stops with ``TIMED_OUT``, so the verdict names
    the case that ran out of time instead of the supervisor killing the whole job without a word."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.rang = False

    def __enter__(self):
        if self.seconds:
            def ring(signum, frame):
                self.rang = True
                raise _OutOfTime()

            signal.signal(signal.SIGALRM, ring)
            signal.setitimer(signal.ITIMER_REAL, float(self.seconds))
        return self

    def __exit__(self, *exc):
        if self.seconds:
            signal.setitimer(signal.ITIMER_REAL, 0)
        return False


_clock = _Clock(None)


def _run_one(case, module, recorder=None) -> dict:
    if _clock.rang:
        return {"error": f"{NOT_RUN}: the time for the cases ran out before this one"}
    if recorder is not None:
        recorder.case = case.name
    out = _run_case(case, module)
    if recorder is not None:
        recorder.end_case(out.get("error"))
        recorder.case = None
    return out


def _run_case(case, module) -> dict:
    try:
        with contextlib.redirect_stdout(_CappedIO()):
            value = case.run(module)
        return {"value": values.encode(value)}
    except _OutOfTime:
        return {"error": f"{TIMED_OUT}: timed out after {_clock.seconds:g} s"}
    except Exception as exc:  # noqa: BLE001 - module code may raise anything
        return {"error": _tail(exc)}


def _evaluate(cases: list, code: str, sites: list | None = None) -> dict:
    recorder = None
    if sites is not None:
        from alignlings.grading import record

        recorder = record.Recorder()
    try:
        with contextlib.redirect_stdout(_CappedIO()):
            module = load_module(code, recorder=recorder, sites=sites)
    except _OutOfTime:
        return {"load_error": f"{TIMED_OUT}: timed out after {_clock.seconds:g} s", "cases": {}}
    except BaseException as exc:  # noqa: BLE001 - SyntaxError, NameError at import, SystemExit...
        if isinstance(exc, KeyboardInterrupt):
            raise
        return {"load_error": _tail(exc), "cases": {}}
    out: dict[str, Any] = {"load_error": None, "cases": {c.name: _run_one(c, module, recorder) for c in cases}}
    if recorder is not None:
        out["records"] = recorder.records
    return out


def _timed(payload: dict) -> _Clock:
    global _clock
    _clock = _Clock(payload.get("case_seconds"))
    return _clock


def perturb(value: Any, how: int = 0) -> Any:
    """A wrong value of the same type as ``value`` (``dev check``: is this blank graded at all?).
    ``how`` 0 keeps the order of numbers (floats scaled and shifted, ints + 1), 1 reverses it
    (floats x -> 0.5 - 0.73 x, ints - 1), so a blank that only an argmax or a sort reads is caught by
    one of the two. Bools are negated, strings extended, containers perturbed element by element, a
    module's parameters changed in a copy; anything else raises TypeError (a case that reaches the
    blank then fails, which still proves it is run)."""
    import copy

    a, b = (1.37, 0.11) if how == 0 else (-0.73, 0.5)
    torch = sys.modules.get("torch")
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + (1 if how == 0 else -1)
    if isinstance(value, float):
        return value * a + b
    if torch is not None and isinstance(value, torch.Tensor):
        if value.dtype == torch.bool:
            return ~value
        if value.is_floating_point() or value.is_complex():
            return value * a + b
        return value + (1 if how == 0 else -1)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(perturb(v, how) for v in value)
    if isinstance(value, str):
        return value + "_"
    if torch is not None and isinstance(value, torch.nn.Module) and any(True for _ in value.parameters()):
        other = copy.deepcopy(value)
        with torch.no_grad():
            for p in other.parameters():
                p.mul_(a).add_(b)
        return other
    raise TypeError(f"dev check cannot perturb a {type(value).__name__}")


def _select(cases: list, names: list[str] | None) -> list:
    if names is None:
        return cases
    wanted = set(names)
    return [c for c in cases if c.name in wanted]


def run_cases(payload: dict) -> dict:
    """payload: ``check`` (check.py source), ``code`` (the module), ``cases`` (names to run, or None
    for all), ``run_main`` (also run the file as __main__ and capture what it prints)."""
    cases = _select(load_cases(payload["check"], payload.get("variant", 0)), payload.get("cases"))
    with _timed(payload) as clock:
        out = _evaluate(cases, payload["code"], payload.get("sites"))
        out["stdout"] = None
        if payload.get("run_main") and out["load_error"] is None and not clock.rang:
            buf = _CappedIO()
            try:
                with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                    load_module(payload["code"], main=True)
            except _OutOfTime:
                buf.write(f"\n(timed out after {clock.seconds:g} s)")
            except BaseException as exc:  # noqa: BLE001
                if isinstance(exc, KeyboardInterrupt):
                    raise
                buf.write("\n" + _tail(exc))
            out["stdout"] = buf.getvalue()
    sys.stdout.flush()
    return out


def run_trusted(payload: dict) -> dict:
    """payload: ``check``, ``variants`` {key: code} (the reference and the misconception splices),
    ``cases`` {key: names or None}. Returns the cases' metadata and each variant's values."""
    cases = load_cases(payload["check"], payload.get("variant", 0))
    names = payload.get("cases") or {}
    out = {}
    sites = payload.get("sites") or {}
    for key, code in payload["variants"].items():
        with _timed(payload):  # each variant gets the time of one run
            out[key] = _evaluate(_select(cases, names.get(key)), code, sites.get(key))
    return {"meta": [case_meta(c) for c in cases], "variants": out}


def judge_predicates(payload: dict) -> dict:
    """payload: ``check``, ``values`` {case name: encoded value}. Returns {name: [passed, detail]}."""
    by_name = {c.name: c for c in load_cases(payload["check"], payload.get("variant", 0))}
    out: dict[str, Any] = {}
    for name, data in payload["values"].items():
        case = by_name.get(name)
        if case is None or case.expect is None:
            out[name] = [False, f"no predicate for case {name!r}"]
            continue
        try:
            passed, detail = case.expect(values.to_torch(values.decode(data)))
            out[name] = [bool(passed), None if detail is None else str(detail)]
        except Exception as exc:  # noqa: BLE001 - an odd value makes the predicate fail, not the grader
            out[name] = [False, _tail(exc, filename="check.py")]
    return out


def warm_up() -> None:
    """Called once in the warm grader's fork server: run the torch paths checks use (autograd,
    logsigmoid, gather, Adam, numpy export) so every forked job starts with them initialised."""
    import torch
    import torch.nn.functional as F

    x = torch.randn(4, 8, requires_grad=True)
    y = F.logsigmoid(x).mean() + F.log_softmax(x, -1).gather(-1, torch.zeros(4, 1, dtype=torch.long)).sum()
    y.backward()
    opt = torch.optim.Adam([x], lr=1e-3)
    opt.step()
    values.encode((x.grad, y, 1.0))
    # one blank recorded and judged, so a forked job finds recording's and judging's paths warm
    # (numpy's array format, the AST and compile caches): ~15 ms less per trusted judgement
    from alignlings.grading import record

    code = "import torch\ndef f(x):\n    return torch.sigmoid(x) * 2\n"
    recorder = record.Recorder()
    module = load_module(code, recorder=recorder, sites=[{"index": 1, "kind": "expr", "line": 3, "col": 11,
                                                          "end_line": 3, "end_col": 31}])
    recorder.case = "warm-up"
    module.f(x)
    judge_blanks({"reference": code, "blanks": {"1": {"fill": "torch.sigmoid(x) * 2", "miscs": {"m": "x"}}},
                  "records": recorder.records})


def _rebuild(entry: Any) -> Any:
    """A scope entry (``record.encode_item``) as a value, or ``_OPAQUE``."""
    import importlib

    if not isinstance(entry, dict):
        return _OPAQUE
    if "module" in entry:
        from alignlings.grading import record

        name = entry["module"]
        return importlib.import_module(name) if name in record.MODULES else _OPAQUE
    if "v" in entry:
        value = values.to_torch(values.decode(entry["v"]))
        if entry.get("grad") and hasattr(value, "requires_grad_") and value.is_floating_point():
            value = value.clone().requires_grad_(True)
        elif isinstance(entry.get("grad_items"), list) and isinstance(value, (list, tuple)):
            items = {i for i in entry["grad_items"] if isinstance(i, int)}
            value = type(value)(v.clone().requires_grad_(True) if i in items and hasattr(v, "requires_grad_")
                                and v.is_floating_point() else v for i, v in enumerate(value))
        return value
    if isinstance(entry.get("nn"), dict):
        return _build_module(entry["nn"])
    return _OPAQUE


def _build_module(spec: dict, depth: int = 0) -> Any:
    """A model sent as data (``record._module_spec``) built again here: a torch.nn class from the
    allowlist, a transformers model class from its config, or, for any other class, a bare
    ``nn.Module`` holding the same children, parameters, buffers and plain attributes. Nothing of
    the learner's class comes along: no method, no name that is looked up."""
    import json

    import torch
    from alignlings.grading import record

    if depth > 6 or not isinstance(spec, dict):
        raise ValueError("model: malformed")
    kind, cls, args = spec.get("kind"), spec.get("cls"), spec.get("args") or {}
    children = {str(k): _build_module(v, depth + 1) for k, v in (spec.get("children") or {}).items()}
    state = {str(k): values.to_torch(values.decode(v)) for k, v in (spec.get("state") or {}).items()}
    if sum(t.numel() for t in state.values() if isinstance(t, torch.Tensor)) > record.MAX_MODULE_ELEMENTS:
        raise ValueError("model: too large")
    m: Any
    if kind == "nn" and cls in record.NN_CLASSES:
        known = record.NN_CLASSES[cls]
        kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in args.items() if k in known}
        if cls == "Sequential":
            m = torch.nn.Sequential(*(children[k] for k in sorted(children, key=int)))
        elif cls == "ModuleList":
            m = torch.nn.ModuleList([children[k] for k in sorted(children, key=int)])
        elif cls == "ModuleDict":
            m = torch.nn.ModuleDict(children)
        else:
            m = getattr(torch.nn, cls)(**kwargs)
        if state:
            m.load_state_dict(state, strict=not children)
    elif kind == "hf" and isinstance(cls, str) and cls.isidentifier() and isinstance(args.get("config"), str):
        import transformers

        model_cls = getattr(transformers, cls, None)
        if not (isinstance(model_cls, type) and issubclass(model_cls, transformers.PreTrainedModel)):
            raise ValueError(f"model: {cls!r} is not a transformers model")
        config_cls = model_cls.config_class
        if config_cls is None:
            raise ValueError(f"model: {cls!r} has no config class")
        config = config_cls.from_dict(json.loads(args["config"]))
        with torch.device("meta"):  # its size first, from the config alone: nothing is allocated
            size = sum(p.numel() for p in model_cls(config).parameters())
        if size > record.MAX_MODULE_ELEMENTS:
            raise ValueError("model: too large")
        m = model_cls(config)
        m.load_state_dict(state, strict=False)
    elif kind == "object":
        m = torch.nn.Module()
        for k, child in children.items():
            m.add_module(k, child)
        for k, v in (spec.get("attrs") or {}).items():
            if str(k).isidentifier() and not str(k).startswith("_"):
                setattr(m, str(k), values.to_torch(values.decode(v)))
        for k, t in state.items():
            m.register_parameter(k, torch.nn.Parameter(t)) if k in (spec.get("grad") or []) or t.is_floating_point() \
                else m.register_buffer(k, t)
    else:
        raise ValueError("model: a class that cannot be built here")
    grad = set(spec.get("grad") or [])
    for name, p in m.named_parameters(recurse=kind == "hf"):
        p.requires_grad_(name in grad)
    m.train(bool(spec.get("training", True)))
    for k, child in children.items():  # train() sets every child: each keeps its own mode
        child.train(bool((spec["children"][k] or {}).get("training", True)))
    return m


def _linear(value: Any, lin: dict, ns: dict) -> Any:
    """A scalar rebuilt with its graph as data (``record._linearise``): its value plus the first-order
    term in the leaves it was computed from, so its gradient with respect to each is the learner's."""
    import torch

    out = value
    for name, g in lin.items():
        leaf = ns.get(name)
        if isinstance(leaf, torch.Tensor) and leaf.requires_grad:
            grad = values.to_torch(values.decode(g)).to(leaf.dtype)
            out = out + (grad * (leaf - leaf.detach())).sum().to(value.dtype)
    return out


def _namespace(ref: types.ModuleType, scope: dict, needed: set[str] | None = None) -> tuple[dict, Any]:
    """The reference module's names with a record's scope rebuilt over them (only the ``needed``
    ones when given: the names the fills read), and torch's random state at the blank (or
    ``_OPAQUE``). A name the learner's scope holds only as an opaque object is removed, except a
    helper the exercise gives (a function, a class), which stays the reference's."""
    keep = None if needed is None else needed | {"__torch_rng__", "__torch_grad__"}
    rebuilt = {str(k): _rebuild(v) for k, v in scope.items() if keep is None or k in keep}
    rng = rebuilt.pop("__torch_rng__", _OPAQUE)
    rebuilt.pop("__torch_grad__", None)
    ns = dict(ref.__dict__)
    for k, v in rebuilt.items():
        if v is not _OPAQUE:
            ns[k] = v
        elif not (scope[k].get("opaque") in ("function", "type") and callable(ns.get(k))):
            ns.pop(k, None)
    return ns, rng


@functools.lru_cache(maxsize=1024)
def _names(fill: str) -> tuple[str, ...]:
    """The names a fill reads or binds: what is rebuilt for it, and what a statement blank's effect
    is judged on."""
    import ast

    try:
        return tuple(sorted({n.id for n in ast.walk(ast.parse(fill)) if isinstance(n, ast.Name)}))
    except SyntaxError:
        return ()


def _after(local: dict, names: Any) -> dict:
    """The names a statement blank's scope holds after it ran, as record entries."""
    from alignlings.grading import record

    return {n: record.encode_item(local[n]) for n in names if isinstance(n, str) and n in local}


_OPAQUE = object()


def judge_blanks(payload: dict) -> dict:
    """A trusted job (pack code only, no learner code): each blank's reference fill, and each of its
    misconceptions' fills, evaluated on the scopes a learner job recorded (``record``).

    payload: ``reference`` (the reference's source), ``blanks`` {index: {"fill", "miscs": {id: fill}}},
    ``records`` (as the learner job returned them, parsed as data here). The reference module gives
    the names a scope lacks (its helpers); a name the learner's scope holds only as an opaque object
    is removed, so a fill that needs it cannot be judged (``unjudged``) rather than judged on the
    reference's object. Returns {"results": [one per record: {"expected": entry or {"error"},
    "miscs": {id: entry or {"error"}}} or {"unjudged": reason}]}."""
    from alignlings.grading import record

    ref = types.ModuleType("_alignlings_reference")
    with contextlib.redirect_stdout(_CappedIO()):
        exec(compile(payload["reference"], "solution.py", "exec"), ref.__dict__)  # noqa: S102 - pack code
    torch = sys.modules.get("torch")  # imported by the reference (a judging job need not have it before)
    blanks = payload["blanks"]
    results: list[dict[str, Any]] = []
    for rec in payload["records"][:2000]:
        spec = blanks.get(str(rec.get("blank"))) if isinstance(rec, dict) else None
        scope = rec.get("scope") if isinstance(rec, dict) else None
        if spec is None or not isinstance(scope, dict):
            results.append({"unjudged": "malformed record"})
            continue
        fills = [spec["fill"], *(spec.get("miscs") or {}).values()]
        needed = {n for fill in fills for n in _names(fill)}  # what a fill reads: the rest is not rebuilt
        try:
            ns, rng = _namespace(ref, scope, needed)
        except Exception as exc:  # noqa: BLE001 - a scope that cannot be rebuilt is not judged this way
            results.append({"unjudged": f"unreadable scope ({type(exc).__name__})"})
            continue
        # gradients with respect to the names a fill reads (any other's is zero for every fill)
        wanted = sorted(set(rec.get("vjp") or {}) & needed) if isinstance(rec.get("vjp"), dict) else []
        # a statement blank: judged on the names its reference fill, or a misconception's, reads or binds
        after = sorted(needed) if isinstance(rec.get("after"), dict) else None

        def run(fill: str, ns=ns, rng=rng, wanted=wanted, scope=scope, after=after) -> dict:
            try:
                # a statement changes what it touches: each fill runs on a scope of its own
                local = dict(ns) if after is None else _namespace(ref, scope, needed)[0]
                if torch is not None and rng is not _OPAQUE and isinstance(rng, torch.Tensor):
                    torch.set_rng_state(rng.to(torch.uint8))
                for k in wanted:  # fresh leaves, so each fill's gradient is its own
                    if isinstance(scope.get(k), dict):
                        local[k] = _rebuild(scope[k])
                for k, e in scope.items():  # scalars carrying their graph, on this run's leaves
                    if isinstance(e, dict) and isinstance(e.get("lin"), dict) and k in local and k not in wanted:
                        local[k] = _linear(local[k].detach(), e["lin"], local)
                # gradients as at the blank (inside ``torch.no_grad()`` there, or not)
                grad = contextlib.nullcontext() if torch is None else torch.set_grad_enabled(
                    (scope.get("__torch_grad__") or {}).get("v") is not False)
                if after is not None:  # a statement blank: what it leaves in the names it touches
                    with contextlib.redirect_stdout(_CappedIO()), grad:
                        exec(compile(fill, "<blank>", "exec"), local)  # noqa: S102 - pack code
                    return {"after": _after(local, after)}
                with contextlib.redirect_stdout(_CappedIO()), grad:
                    value = eval(compile(fill, "<blank>", "eval"), local)  # noqa: S307 - pack code
                out = record.encode_item(value)
                if wanted:
                    out["vjp"] = record.gradients(value, {k: local[k] for k in wanted if k in local})
                return out
            except Exception as exc:  # noqa: BLE001 - a fill may raise on the learner's values
                return {"error": f"{type(exc).__name__}: {exc}"[:500]}

        results.append({"expected": run(spec["fill"]),
                        "miscs": {mid: run(fill) for mid, fill in (spec.get("miscs") or {}).items()}})
    return {"results": results}
