"""No import circles among alignlings modules (issue 20 §2), imports inside functions included.

Every module's AST is read for ``import``/``from ... import`` anywhere in it (top level, functions,
methods); only ``if TYPE_CHECKING:`` blocks are left out, since they never run. ``from a import b``
counts as an edge to ``a.b`` where that is a module, else to ``a``; a module importing its own
parent package is not counted (the parent is always imported first)."""

from __future__ import annotations

import ast
from pathlib import Path

import alignlings

ROOT = Path(alignlings.__file__).parent


def _module_names(root: Path) -> dict[str, Path]:
    mods = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _imports(tree: ast.AST):
    """Import nodes anywhere in ``tree`` except under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in _imports_of(child))
            continue
        yield from _imports_of(node)


def _imports_of(node: ast.AST):
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    yield from _imports(node)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    mods = _module_names(root)
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        targets: list[str] = []
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets += [a.name for a in node.names]
                continue
            base = node.module or ""
            if node.level:
                pkg = mod.split(".") if is_pkg else mod.split(".")[:-1]
                pkg = pkg[:len(pkg) - (node.level - 1)]
                base = ".".join(pkg + ([base] if base else []))
            targets += [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
        deps = set()
        for name in targets:
            while name and name not in mods:
                name = name.rpartition(".")[0]
            if name and name != mod and not mod.startswith(name + "."):
                deps.add(name)
        graph[mod] = deps
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_the_finder_sees_a_circle_through_a_function_import(tmp_path):
    pkg = tmp_path / "alignlings"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import a\n")
    (pkg / "sub" / "a.py").write_text("from alignlings.sub.b import f\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from . import a\n    return a\n")
    (pkg / "sub" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                      "    from alignlings.sub import a\nimport alignlings.sub.b\n")
    graph = import_graph(pkg)
    assert graph["alignlings.sub.c"] == {"alignlings.sub.b"}  # the TYPE_CHECKING import is left out
    assert circles(graph) == [["alignlings.sub.a", "alignlings.sub.b"]]


def test_no_import_circles_among_alignlings_modules():
    graph = import_graph()
    assert "alignlings.grading.grader" in graph and graph["alignlings.grading.grader"]
    assert circles(graph) == []


# -- the package directions (issue 30) ------------------------------------------------------------------
# content <- grading <- practice <- cli / web: a package imports only the packages below it. Module-level
# imports never point up; an import inside a function may, only where LAZY_UPWARD names it, each a
# function waiting to move to the package it belongs in (shrink the list, never grow it).

LAYERS = {"alignlings.content": 0, "alignlings.grading": 1, "alignlings.practice": 2,
          "alignlings.cli": 3, "alignlings.web": 3}

LAZY_UPWARD = {
    ("alignlings.content.bugdrill", "alignlings.grading.feedback"):
        "bugdrill.annotate adds the drill's part to a verdict: grading's work, to move to grading",
    ("alignlings.content.bugdrill", "alignlings.grading.behaviour"):
        "bugdrill.annotate compares behaviour with the known wrong fixes: to move to grading",
    ("alignlings.content.packlint", "alignlings.practice.review"):
        "the concept tags of a pack (review.concept_names, blank_concepts, drill_concepts) are pack data "
        "read in review.py: to move to content",
}


def _layer(mod: str) -> int | None:
    for pkg, n in LAYERS.items():
        if mod == pkg or mod.startswith(pkg + "."):
            return n
    return None


def _top_level_imports(tree: ast.AST):
    """Import nodes that run when the module is imported: not in a function, not under TYPE_CHECKING."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                yield from _top_level_imports_of(child)
            continue
        yield from _top_level_imports_of(node)


def _top_level_imports_of(node: ast.AST):
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        yield from _top_level_imports(node)


def _upward(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    out = set()
    for mod, deps in graph.items():
        low = _layer(mod)
        for dep in deps:
            high = _layer(dep)
            if low is not None and high is not None and high > low:
                out.add((mod, dep))
    return out


def _graph_with(walker, root: Path = ROOT) -> dict[str, set[str]]:
    global _imports
    saved = _imports
    _imports = walker
    try:
        return import_graph(root)
    finally:
        _imports = saved


def test_the_three_packages_hold_their_modules_and_say_what_they_are():
    for pkg, module in [("content", "pack"), ("content", "exercise"), ("content", "kinds"), ("grading", "grader"),
                        ("grading", "casejob"), ("grading", "sandbox"), ("practice", "session"),
                        ("practice", "store")]:
        path = ROOT / pkg / module
        assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), f"{pkg}/{module}"
    for pkg in ("content", "grading", "practice"):
        doc = ast.get_docstring(ast.parse((ROOT / pkg / "__init__.py").read_text(encoding="utf-8")))
        assert doc and len(doc) > 200 and "\n\n" not in doc.strip(), f"{pkg}: one paragraph saying what it holds"
    assert not (ROOT / "practice" / "progress.py").exists()


def test_module_level_imports_point_one_way():
    graph = _graph_with(_top_level_imports)
    assert graph["alignlings.grading.grader"] and graph["alignlings.practice.session"]
    assert sorted(_upward(graph)) == []


def test_imports_in_functions_point_one_way_but_for_the_listed_few():
    graph = import_graph()
    up = _upward(graph)
    assert sorted(up - set(LAZY_UPWARD)) == [], "a new import points up: content <- grading <- practice <- cli/web"
    assert sorted(set(LAZY_UPWARD) - up) == [], "fixed: take it off LAZY_UPWARD"


def test_the_direction_check_sees_an_upward_import(tmp_path):
    pkg = tmp_path / "alignlings"
    for sub in ("content", "grading"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "content" / "a.py").write_text("def f():\n    from alignlings.grading import b\n")
    (pkg / "grading" / "b.py").write_text("from alignlings.content import a\n")
    (pkg / "content" / "c.py").write_text("from alignlings.grading.b import x\n")
    assert _upward(import_graph(pkg)) == {("alignlings.content.a", "alignlings.grading.b"),
                                          ("alignlings.content.c", "alignlings.grading.b")}
    assert _upward(_graph_with(_top_level_imports, pkg)) == {("alignlings.content.c", "alignlings.grading.b")}


def test_a_module_over_600_lines_says_why_in_its_docstring():
    """Issue 30 §3: no module above ~600 lines without a reason (the packs' files are content, not code)."""
    import ast
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "src" / "alignlings"
    long = []
    for path in sorted(src.rglob("*.py")):
        if "packs" in path.relative_to(src).parts:
            continue
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > 600 and "Why one long module" not in (ast.get_docstring(ast.parse(text)) or ""):
            long.append(str(path.relative_to(src)))
    assert long == []
