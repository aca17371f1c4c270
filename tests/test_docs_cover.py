"""The README and ``--help`` cover every CLI command and every environment variable the code reads.

Both lists are discovered, never written here: the commands by walking the Typer app (groups and
their sub-commands, e.g. ``train toy-dpo``, ``dev new``), the variables by reading the source for
``"ALIGNLINGS_…"`` string literals in modules that read the environment. A new command or variable
fails this test until it is documented.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from alignlings.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "alignlings"
README = (ROOT / "README.md").read_text(encoding="utf-8")
ENV_NAME = re.compile(r"ALIGNLINGS_[A-Z0-9_]*[A-Z0-9]")


def _commands() -> list[tuple[tuple[str, ...], object]]:
    """Every command below the root as (path, click command), groups included, depth first."""
    found: list[tuple[tuple[str, ...], object]] = []

    def walk(command, path: tuple[str, ...]) -> None:
        for name, sub in sorted((getattr(command, "commands", None) or {}).items()):
            if getattr(sub, "hidden", False):
                continue
            found.append(((*path, name), sub))
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return found


def _reads_environment(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
            return True
        if isinstance(node, ast.Name) and node.id in ("environ", "getenv"):
            return True
    return False


def _environment_variables() -> dict[str, list[str]]:
    """``ALIGNLINGS_*`` names the package reads: a string literal that is exactly such a name, in a
    module that reads ``os.environ`` / ``os.getenv`` (directly, through a constant or a loop)."""
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if not _reads_environment(tree):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and ENV_NAME.fullmatch(node.value):
                found.setdefault(node.value, []).append(str(path.relative_to(ROOT)))
    return found


COMMANDS = _commands()
LEAVES = [path for path, command in COMMANDS if not getattr(command, "commands", None)]
ENV = _environment_variables()


def _help(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, (path, result.output)
    return result.output


def test_discovery_finds_what_is_known_to_exist():
    # guards the walkers themselves: if they found nothing, every test below would pass vacuously
    assert ("train", "toy-dpo") in LEAVES and ("dev", "new") in LEAVES and ("check",) in LEAVES
    assert {"ALIGNLINGS_LANG", "ALIGNLINGS_WORKSPACE", "ALIGNLINGS_HOME", "ALIGNLINGS_PACK"} <= set(ENV)


@pytest.mark.parametrize("path", LEAVES, ids=" ".join)
def test_readme_names_every_command(path):
    usage = re.compile(r"\balignlings\s+" + r"\s+".join(map(re.escape, path)) + r"(?![\w-])")
    assert usage.search(README), f"README.md never shows `alignlings {' '.join(path)}`"


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=" ".join)
def test_help_lists_and_explains_every_command(path):
    parent = _help(path[:-1])
    listed = re.search(rf"^\s+{re.escape(path[-1])}\s+(\S.*)$", parent, re.MULTILINE)
    assert listed, f"`alignlings {' '.join(path[:-1])} --help` does not list {path[-1]!r} with a summary"
    own = _help(path)
    # the command's own help has its description, beyond the usage line and the options
    description = own.split("\n\n", 1)[1].split("Options:")[0].strip() if "\n\n" in own else ""
    assert len(description) > 20, f"`alignlings {' '.join(path)} --help` has no description:\n{own}"


def _readme_environment_table() -> str:
    section = re.search(r"^#+ Environment variables\s*$(.*?)(?=^#+ |\Z)", README, re.MULTILINE | re.DOTALL)
    assert section, "README.md has no 'Environment variables' section"
    return section.group(1)


@pytest.mark.parametrize("name", sorted(ENV))
def test_readme_table_documents_every_environment_variable(name):
    rows = [line for line in _readme_environment_table().splitlines() if line.startswith("|")]
    row = next((line for line in rows if f"`{name}`" in line.split("|")[1]), None)
    assert row, f"{name} (read in {', '.join(ENV[name])}) has no row in README's Environment variables table"
    assert len(row.split("|")[2].strip()) > 10, f"{name}: its README row says nothing"


def test_help_mentions_every_environment_variable():
    helps = "\n".join(_help(path) for path in [(), *(p for p, _ in COMMANDS)])
    missing = [name for name in ENV if not re.search(rf"\b{name}\b", helps)]
    assert not missing, f"no `--help` mentions {missing} (read in {[ENV[n] for n in missing]})"
