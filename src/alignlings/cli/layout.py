"""Tables that read at 80 columns (issue 33): fixed columns that never truncate (an exercise id must be
readable and copyable at any width down to 60 columns), and one last column of prose that wraps by
character width, as Chinese needs.

rich's Table wraps by words only: a Chinese title is one long "word" to it, so it cuts it with "…",
sometimes inside a formula ("×1…"). Here a break may fall between any two wide characters, never
before closing punctuation ("。" is not stranded on its own line) nor after opening punctuation, nor
inside a `command` in backticks, and never inside a run of narrow characters (a formula such as ``×10`` or ``k1``), which is only folded
when it is wider than the whole column. Nothing is ever replaced with "…".
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text

# No line starts with these (closing punctuation), none ends with the opening ones.
NO_START = frozenset("。，、：；！？）」』”’》〉】…,.;:!?)]}%")
NO_END = frozenset("（「『“‘《〈【([{")
GAP = "  "  # between two columns
MIN_LAST = 24  # a last column narrower than this goes on its own lines, under the second column


def _units(text: str) -> list[tuple[str, str]]:
    """``text`` as (separator, unit) pairs: a unit is what must stay on one line (a run of narrow
    characters, one wide character, with the punctuation glued to it); the separator is " " where
    the text had white space before the unit, else ""."""
    units: list[tuple[str, str]] = []
    sep = ""
    code = False  # inside `a command`: kept on one line, to be copied whole
    for ch in text:
        if ch == "`":
            code = not code
        if code and ch == " " and units:
            units[-1] = (units[-1][0], units[-1][1] + ch)
            continue
        if ch.isspace():
            sep = " " if units else ""
            continue
        if units and not sep:
            last = units[-1][1][-1]
            narrow_run = cell_len(ch) == 1 and cell_len(last) == 1
            if ch in NO_START or last in NO_END or narrow_run or (code and ch != "`") or ch == "`" and not code:
                units[-1] = (units[-1][0], units[-1][1] + ch)
                continue
        units.append((sep, ch))
        sep = ""
    return units


def _fold(unit: str, width: int) -> list[str]:
    """A unit wider than the column, cut by characters (a long formula or URL: nothing dropped)."""
    lines, line = [], ""
    for ch in unit:
        if line and cell_len(line + ch) > width:
            lines.append(line)
            line = ""
        line += ch
    return [*lines, line]


def wrap_cells(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` terminal cells (rich's cell widths: a Chinese character
    takes two), broken at spaces and between wide characters; the words are all kept."""
    width = max(width, 2)
    lines: list[str] = []
    line = ""
    for sep, unit in _units(text):
        joined = line + sep + unit if line else unit
        if cell_len(joined) <= width:
            line = joined
            continue
        if line:
            lines.append(line)
        if cell_len(unit) > width:
            *full, line = _fold(unit, width)
            lines.extend(full)
        else:
            line = unit
    if line or not lines:
        lines.append(line)
    return lines


def pad(text: str, width: int, right: bool = False) -> str:
    fill = " " * max(width - cell_len(text), 0)
    return fill + text if right else text + fill


@dataclass
class Column:
    header: str
    right: bool = False  # numbers are right-aligned
    width: int = 0  # at least the header and every value: set by grid()


def grid(columns: list[Column], rows: list[list[tuple[str, str]]], width: int, min_last: int = MIN_LAST,
         header: bool = True) -> list[Text]:
    """The lines of a table without borders: ``rows`` hold (text, style) per column; every column but the
    last is as wide as its widest value (so never cut); the last one wraps in the width left, or, when
    less than ``min_last`` cells are left, on lines of its own, indented a little more than the second column. The
    first line is the header (dim), unless ``header`` is False. No line ends with a space."""
    fixed = columns[:-1]
    for i, col in enumerate(fixed):
        col.width = max([1, cell_len(col.header), *(cell_len(r[i][0]) for r in rows)])
    used = sum(c.width for c in fixed) + len(GAP) * len(fixed)
    inline = width - used >= min_last
    indent = fixed[0].width + len(GAP) * (2 if len(fixed) > 1 else 1)  # under the second column, a little in
    last_width = width - used if inline else width - indent
    lines = [_line(fixed, [(c.header, "dim") for c in fixed], (columns[-1].header if inline else "", "dim"))]
    if not header:
        lines = []
    for row in rows:
        text, style = row[-1]
        wrapped = wrap_cells(text, last_width) if text else []
        if inline:
            lines.append(_line(fixed, row[:-1], (wrapped[0] if wrapped else "", style)))
            lines.extend(_line([Column("", width=used - len(GAP))], [("", "")], (more, style)) for more in wrapped[1:])
        else:
            lines.append(_line(fixed, row[:-1], ("", "")))
            lines.extend(_line([Column("", width=indent - len(GAP))], [("", "")], (more, style)) for more in wrapped)
    return lines


def _line(fixed: list[Column], cells: list[tuple[str, str]], last: tuple[str, str]) -> Text:
    line = Text()
    for col, (text, style) in zip(fixed, cells, strict=True):
        line.append(pad(text, col.width, col.right), style=style or None)
        line.append(GAP)
    line.append(last[0], style=last[1] or None)
    line.rstrip()
    return line


def paragraph(out, text: str, style: str = "") -> None:
    """Print prose wrapped to the terminal by cell width (Chinese between characters, English at spaces),
    with no line ending in a space."""
    for part in text.split("\n"):
        for line in wrap_cells(part, out.width) if part else [""]:
            out.print(Text(line, style=style or ""))
