"""Job side of per-blank judging: run the learner's own file with each blank recorded.

The grader locates each blank in the learner's file (``instrument.locate``, trusted side) and sends
only positions: line and column spans in the learner's own file, never reference text. Here the
file is parsed, each blank's expression is wrapped in two calls (``__alignlings_scope__`` records
the values in scope just before the expression runs, ``__alignlings_value__`` its value) and the
module is compiled with the learner's own line numbers, so tracebacks read as without recording.

A statement blank is wrapped the same way by two calls around it (``__alignlings_before__``
records the scope, ``__alignlings_after__`` the names in scope once it ran: ``after``).

A record is plain data in ``values``' wire format: the blank, the case it ran under, the scope
(tensors with their ``requires_grad``, numbers, strings, containers of them, allowlisted modules
by name, models as data (``_module_spec``), a scalar's gradient with respect to the leaves in scope
(``_linearise``), anything else only by its type name) and the value, the names after a
statement, or the error. The trusted side
evaluates the reference fill on the scope and compares (``instrument.judge``). Recording is bounded:
``MAX_OCCURRENCES`` per blank and case (a blank inside a loop), ``MAX_BYTES`` in all, ``MAX_NAMES``
per scope.
"""

from __future__ import annotations

import ast
import sys
from typing import Any

from alignlings.grading import values

SCOPE = "__alignlings_scope__"
VALUE = "__alignlings_value__"
BEFORE = "__alignlings_before__"
AFTER = "__alignlings_after__"
MAX_OCCURRENCES = 32
ALWAYS = 3
"""Occurrences of one blank under one case (a blank inside a loop): the first ``ALWAYS`` are always
recorded, then up to ``MAX_OCCURRENCES`` while that blank and case used less than ``KEY_BYTES``."""
KEY_BYTES = 256 << 10
MAX_BYTES = 8 << 20
MAX_NAMES = 200
MAX_ITEMS = 512
MAX_MODULE_ELEMENTS = 1 << 20
"""Parameters and buffers a model in scope may hold (all its tensors' elements) to be sent as data."""
NN_CLASSES: dict[str, tuple[str, ...]] = {
    # torch.nn classes a scope may hold, sent as (class, constructor arguments read back from the
    # module, state): the trusted side builds the same class from the allowlist, never from a name
    "Linear": ("in_features", "out_features", "bias"),
    "Embedding": ("num_embeddings", "embedding_dim", "padding_idx"),
    "LayerNorm": ("normalized_shape", "eps", "elementwise_affine", "bias"),
    "GELU": ("approximate",), "ReLU": (), "Tanh": (), "Sigmoid": (), "SiLU": (), "Identity": (),
    "Dropout": ("p",), "Softmax": ("dim",),
    "Sequential": (), "ModuleList": (), "ModuleDict": (),
}
MODULES = ("torch", "torch.nn", "torch.nn.functional", "math", "numpy", "torch.distributions")
"""Modules a scope may name (``{"module": name}``); the trusted side imports them itself."""


def _is_data(value: Any, depth: int = 0) -> bool:
    if depth > 4:
        return False
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return type(value) in (torch.Tensor, torch.nn.Parameter) and value.numel() <= 1 << 20
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return len(value) <= MAX_ITEMS and all(_is_data(v, depth + 1) for v in value)
    if type(value) is dict:
        return len(value) <= MAX_ITEMS and all(isinstance(k, str) and _is_data(v, depth + 1)
                                               for k, v in value.items())
    return False


def _module_spec(m: Any, budget: list[int], depth: int = 0) -> dict | None:
    """A model as data: {"kind": "nn" | "hf" | "object", "cls", "args", "state", "grad", "training",
    "children", "attrs"}; None where it cannot be sent (too large, too deep, a class the trusted side
    cannot build). ``nn``: a class of :data:`NN_CLASSES`; ``hf``: a transformers model, built again
    from its config; ``object``: any other ``nn.Module`` (the learner's own class, say), sent as its
    attributes only (its children, parameters, buffers and plain data): the trusted side holds a
    module with those attributes and none of its methods, so a fill that calls a method of the
    learner's class cannot be judged this way."""
    torch = sys.modules["torch"]
    Module = torch.nn.Module
    if depth > 6:
        return None
    cls = type(m)
    own = vars(m)
    children = own.get("_modules") or {}
    spec: dict[str, Any] = {"training": bool(own.get("training", True)), "children": {}, "attrs": {},
                            "state": {}, "grad": []}
    if cls.__module__.startswith("torch.nn.modules.") and cls.__name__ in NN_CLASSES:
        spec.update(kind="nn", cls=cls.__name__, args={})
        for a in NN_CLASSES[cls.__name__]:
            v = own.get("_parameters", {}).get(a, own.get(a)) if a == "bias" else own.get(a)
            spec["args"][a] = (v is not None) if a == "bias" else (list(v) if isinstance(v, tuple) else v)
        if not all(_is_data(v) for v in spec["args"].values()):
            return None
        tensors = Module.state_dict(m, keep_vars=True) if not children else {
            **own.get("_parameters", {}), **own.get("_buffers", {})}
    elif cls.__module__.startswith("transformers.models.") and hasattr(m, "config"):
        import transformers

        if getattr(transformers, cls.__name__, None) is not cls:
            return None
        spec.update(kind="hf", cls=cls.__name__, args={"config": m.config.to_json_string(use_diff=False)})
        tensors = Module.state_dict(m, keep_vars=True)
        children = {}
    else:
        spec.update(kind="object", cls=cls.__name__[:60], args={})
        tensors = {**(own.get("_parameters") or {}), **(own.get("_buffers") or {})}
        for name, v in own.items():
            if name.startswith("_") or name == "training" or isinstance(v, Module):
                continue
            if _is_data(v):
                spec["attrs"][name] = values.encode(v)
    for name, t in tensors.items():
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            return None
        budget[0] -= t.numel()
        if budget[0] < 0:
            return None
        spec["state"][name] = values.encode(t)
        if t.requires_grad:
            spec["grad"].append(name)
    for name, child in children.items():
        if child is None:
            continue
        sub = _module_spec(child, budget, depth + 1)
        if sub is None:
            return None
        spec["children"][name] = sub
    return spec


def encode_item(value: Any) -> dict:
    """One value of a scope (or a blank's value) as a record entry."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.nn.Module):
        try:
            spec = _module_spec(value, [MAX_MODULE_ELEMENTS])
        except Exception:  # noqa: BLE001 - a module that cannot be read is sent by its type name
            spec = None
        return {"nn": spec} if spec is not None else {"opaque": type(value).__name__[:60]}
    if isinstance(value, type(sys)):
        name = getattr(value, "__name__", "")
        return {"module": name} if name in MODULES else {"opaque": "module"}
    if _is_data(value):
        out: dict[str, Any] = {"v": values.encode(value)}
        if torch is not None and isinstance(value, torch.Tensor) and value.requires_grad:
            out["grad"] = True
        elif torch is not None and isinstance(value, (list, tuple)):  # a list of tensors (GAE's per-step terms)
            items = [i for i, v in enumerate(value) if isinstance(v, torch.Tensor) and v.requires_grad]
            if items:
                out["grad_items"] = items
        return out
    return {"opaque": type(value).__name__[:60]}


def _size(entry: Any) -> int:
    """About how many bytes an entry takes on the wire (its tensors' bytes, 64 per other item)."""
    if isinstance(entry, dict):
        if isinstance(entry.get("npy"), str):
            return len(entry["npy"])
        return 64 + sum(_size(v) for v in entry.values())
    if isinstance(entry, list):
        return 64 + sum(_size(v) for v in entry)
    return 64


def _names_in(frame: Any) -> dict[str, Any]:
    """The names a frame sees (its module's, then its own; at most ``MAX_NAMES`` of each), without
    dunder names (the recorder's own hooks among them)."""
    names: dict[str, Any] = {}
    for ns in (frame.f_globals, frame.f_locals):
        for name, v in list(ns.items())[:MAX_NAMES]:
            if not name.startswith("__"):
                names[name] = v
    return names


class Recorder:
    """Collects records while the cases run; ``case`` is set by the case runner."""

    def __init__(self) -> None:
        self.records: list[dict] = []
        self.case: str | None = None
        self._counts: dict[tuple[int, str | None], int] = {}
        self._bytes = 0
        self._key_bytes: dict[tuple[int, str | None], int] = {}
        self._leaves: dict[int, list[str]] = {}  # record -> the names of the scope's tensors with a gradient
        self.exprs: dict[int, Any] = {}  # blank -> its expression compiled alone (for ``gradients``)
        self._open: dict[int, list[int]] = {}  # blank -> its records whose statement has not ended
        self._rng: dict[int, Any] = {}  # record -> torch's random state just before its blank ran

    @classmethod
    def off(cls) -> Recorder:
        """A recorder that records nothing: a recorded file run again (as ``__main__``)."""
        recorder = cls()
        recorder.scope = lambda index, frame=None: -1  # type: ignore[method-assign]
        recorder.before = lambda index: None  # type: ignore[method-assign]
        recorder.after = lambda index: None  # type: ignore[method-assign]
        recorder.value = lambda number, value: value  # type: ignore[method-assign]
        return recorder

    def scope(self, index: int, frame: Any = None) -> int:
        """Record the caller's scope (or ``frame``'s) for blank ``index``; returns the record's
        number, or -1."""
        frame = frame or sys._getframe(1)
        key = (int(index), self.case)
        n = self._counts.get(key, 0)
        if n >= MAX_OCCURRENCES or self._bytes > MAX_BYTES or (
                n >= ALWAYS and self._key_bytes.get(key, 0) > KEY_BYTES):
            return -1
        self._counts[key] = n + 1
        names = _names_in(frame)
        scope = {name: encode_item(v) for name, v in names.items()}
        torch = sys.modules.get("torch")
        if torch is not None:
            _linearise(names, scope)
            if not torch.is_grad_enabled():  # inside ``torch.no_grad()``: replayed so on the trusted side
                scope["__torch_grad__"] = {"v": False}
            # last, just before the blank runs (reading the scope must not be what it draws after);
            # sent only if the blank draws from it (``_drew``): 5 KB a scope otherwise for nothing
            self._rng[len(self.records)] = torch.get_rng_state()
        size = sum(_size(e) for e in scope.values())
        self._bytes += size
        self._key_bytes[key] = self._key_bytes.get(key, 0) + size
        self.records.append({"blank": int(index), "case": self.case, "scope": scope})
        self._leaves[len(self.records) - 1] = [n for n in names if scope[n].get("grad")]
        self._open.setdefault(int(index), []).append(len(self.records) - 1)
        return len(self.records) - 1

    def before(self, index: int) -> None:
        """A statement blank is about to run: its scope is recorded (``scope``)."""
        number = self.scope(index, sys._getframe(1))
        if number < 0:
            self._open.setdefault(int(index), []).append(-1)

    def after(self, index: int) -> None:
        """A statement blank has run: the names of its scope as they are now (``after``), which the
        trusted side compares with the reference statement run on the recorded scope."""
        stack = self._open.get(int(index)) or [-1]
        number = stack.pop()
        if not 0 <= number < len(self.records):
            return
        self._drew(number)
        after = {name: encode_item(v) for name, v in _names_in(sys._getframe(1)).items()}
        self._bytes += sum(_size(e) for e in after.values())
        self.records[number]["after"] = after

    def _drew(self, number: int) -> None:
        """Keep torch's random state with the record if the blank drew from it (a sample, a fresh
        layer's initialisation): the trusted side replays the reference fill from the same state."""
        state = self._rng.pop(number, None)
        torch = sys.modules.get("torch")
        if state is not None and torch is not None and not torch.equal(state, torch.get_rng_state()):
            entry = {"v": values.encode(state)}
            self._bytes += _size(entry)
            self.records[number]["scope"]["__torch_rng__"] = entry

    def value(self, number: int, value: Any) -> Any:
        stack = self._open.get(self.records[number]["blank"]) if 0 <= number < len(self.records) else None
        if stack and stack[-1] == number:
            stack.pop()
        if 0 <= number < len(self.records):
            self._drew(number)
            entry = encode_item(value)
            self._bytes += _size(entry)
            self.records[number]["value"] = entry
            leaves = self._leaves.pop(number, [])
            expr = self.exprs.get(self.records[number]["blank"])
            if leaves and expr is not None:
                vjp = self._again(expr, leaves, value, sys._getframe(1))
                if vjp:
                    self.records[number]["vjp"] = vjp
        return value

    @staticmethod
    def _again(expr: Any, names: list[str], value: Any, frame: Any) -> dict:
        """The blank's expression evaluated again with each gradient-carrying tensor of its scope
        replaced by a fresh leaf of the same value (torch's random state kept), and its
        ``gradients`` with respect to them: the trusted side evaluates the reference fill on the
        same leaves, so the two are comparable even where the scope's tensors depend on each other."""
        torch = sys.modules.get("torch")
        if torch is None or not isinstance(value, torch.Tensor) or not value.requires_grad:
            return {}
        ns = dict(frame.f_locals)
        leaves = {}
        for n in names:
            t = ns.get(n, frame.f_globals.get(n))
            if isinstance(t, torch.Tensor):
                leaves[n] = torch.Tensor.clone(torch.Tensor.detach(t)).requires_grad_(True)
        ns.update(leaves)
        state = torch.get_rng_state()
        try:
            again = eval(expr, frame.f_globals, ns)  # noqa: S307 - the learner's own expression, in its job
            return gradients(again, leaves)
        except Exception:  # noqa: BLE001 - an expression that cannot run twice has no gradient record
            return {}
        finally:
            torch.set_rng_state(state)

    def end_case(self, error: str | None) -> None:
        """Records of this case whose expression (or statement) never ended get the case's error."""
        for rec in self.records:
            if rec["case"] == self.case and "value" not in rec and "after" not in rec and "error" not in rec:
                rec["error"] = (error or "the blank's expression did not return")[:2000]
        self._open.clear()


def _linearise(names: dict[str, Any], scope: dict[str, dict]) -> None:
    """A scalar in scope computed with gradient from leaves also in scope (a loss built from
    per-token losses) carries its graph as data: its gradient with respect to each such leaf
    (``lin``). The trusted side rebuilds it as its value plus that first-order term, so a fill that
    differentiates it (``torch.autograd.grad(loss, per_token_loss)``) is judged on the learner's own
    loss; every aggregation a blank may take is linear, so the gradient is exact there."""
    torch = sys.modules["torch"]
    leaves = {n: v for n, v in names.items() if isinstance(v, torch.Tensor) and v.requires_grad and v.is_leaf
              and scope[n].get("grad")}
    if not leaves:
        return
    for n, v in names.items():
        if not (isinstance(v, torch.Tensor) and v.requires_grad and not v.is_leaf and v.numel() == 1
                and v.is_floating_point() and "v" in scope[n]):
            continue
        try:
            grads = torch.autograd.grad(v, list(leaves.values()), retain_graph=True, allow_unused=True)
        except RuntimeError:
            continue
        lin = {k: values.encode(g) for k, g in zip(leaves, grads) if g is not None}
        if lin:
            scope[n]["lin"] = lin


def gradients(value: Any, leaves: dict[str, Any]) -> dict[str, Any]:
    """The vector-Jacobian product of ``value`` with a fixed random vector (seed 0), with respect to
    each tensor of ``leaves`` that carries a gradient: {name: encoded gradient, or None where the
    value does not depend on it}. It tells a fill that detaches a branch from the right one when
    their values agree. {} when the value carries no gradient."""
    torch = sys.modules.get("torch")
    if torch is None or not leaves or not isinstance(value, torch.Tensor) or not value.requires_grad \
            or not value.is_floating_point():
        return {}
    names = [n for n, t in leaves.items() if isinstance(t, torch.Tensor) and t.requires_grad]
    if not names:
        return {}
    g = torch.Generator().manual_seed(0)
    weights = torch.randn(tuple(value.shape), generator=g, dtype=torch.float64).to(value.dtype)
    try:
        grads = torch.autograd.grad(value, [leaves[n] for n in names], grad_outputs=weights,
                                    retain_graph=True, allow_unused=True)
    except RuntimeError:
        return {}
    return {n: (None if gr is None else values.encode(gr)) for n, gr in zip(names, grads)}


class _Wrap(ast.NodeTransformer):
    def __init__(self, sites: list[dict], recorder: Recorder | None = None):
        self.sites = {(s["line"], s["col"], s["end_line"], s["end_col"]): int(s["index"]) for s in sites
                      if s.get("kind") == "expr"}
        self.statements = {(s["line"], s["col"], s["end_line"], s["end_col"]): int(s["index"]) for s in sites
                           if s.get("kind") == "stmt"}
        self.done: set[int] = set()
        self.recorder = recorder
        self._spans = [(k[0], k[2]) for k in (*self.sites, *self.statements)]

    def visit(self, node):
        start, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        if start is not None and end is not None and not any(a <= end and start <= b for a, b in self._spans):
            return node  # no blank inside: nothing to wrap below (most of a file)
        node = super().visit(node)
        if isinstance(node, ast.stmt):
            key = (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)
            index = self.statements.get(key)
            if index is not None and index not in self.done:  # a statement blank: its scope before, after
                self.done.add(index)
                calls = [ast.copy_location(ast.Expr(ast.Call(ast.Name(name, ast.Load()), [ast.Constant(index)], [])),
                                           node) for name in (BEFORE, AFTER)]
                return [calls[0], node, calls[1]]
        if isinstance(node, ast.expr):
            key = (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)
            index = self.sites.get(key)
            if index is not None and index not in self.done:
                self.done.add(index)
                if self.recorder is not None:
                    alone = ast.fix_missing_locations(ast.Expression(body=node))
                    self.recorder.exprs[index] = compile(alone, "exercise.py", "eval")
                scope = ast.Call(ast.Name(SCOPE, ast.Load()), [ast.Constant(index)], [])
                call = ast.Call(ast.Name(VALUE, ast.Load()), [scope, node], [])
                return ast.copy_location(call, node)
        return node


def compile_recorded(code: str, sites: list[dict], filename: str = "exercise.py", recorder: Recorder | None = None):
    """``code`` compiled with each expression blank of ``sites`` recorded (same line numbers)."""
    tree = ast.parse(code, filename)
    tree = _Wrap(sites, recorder).visit(tree)
    ast.fix_missing_locations(tree)
    return compile(tree, filename, "exec")


def install(module_dict: dict, recorder: Recorder) -> None:
    module_dict[SCOPE] = recorder.scope
    module_dict[VALUE] = recorder.value
    module_dict[BEFORE] = recorder.before
    module_dict[AFTER] = recorder.after
