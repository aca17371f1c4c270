"""``alignlings dev new ID --kind KIND --pack DIR``: a working skeleton of every file of an exercise.

The files come from the kind (``Kind.skeleton``; the built-in ones in ``content/kinds/skeletons.py``):
each is a small complete exercise that ``alignlings dev check`` can already grade, every text a
teacher must write marked ``TODO(author)``, which ``dev check`` reports until it is replaced.
"""

from __future__ import annotations

import re
from pathlib import Path

from alignlings.content import kinds
from alignlings.content.packdata import PLACEHOLDER

ID_PATTERN = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


def names() -> tuple[str, ...]:
    """What ``--kind`` accepts: every registered kind that writes a skeleton, by its author name."""
    return tuple(k.author_name for k in kinds.REGISTRY.values() if k.writes_skeleton)


def files(exercise_id: str, kind: str = "fill") -> dict[str, str]:
    """Relative path -> content of the new exercise folder's files, for ``kind`` (one of ``names()``)."""
    spec = kinds.by_author_name(kind)
    content = spec.skeleton(exercise_id) if spec is not None else None
    if content is None:
        raise ValueError(f"--kind: expected one of {', '.join(names())}, got {kind!r}")
    return content


def write(pack_dir: Path, exercise_id: str, kind: str = "fill") -> list[Path]:
    """Create ``pack_dir/exercise_id`` (and pack.toml when the pack is new); add the id to ``order``.

    Raises ValueError naming the argument when the id is malformed or the folder exists.
    """
    if not ID_PATTERN.fullmatch(exercise_id):
        raise ValueError(f"ID: expected lower-case words joined by '-', e.g. ipo-loss, got {exercise_id!r}")
    content = files(exercise_id, kind)  # a bad kind is refused before anything is written
    pack_dir = Path(pack_dir).expanduser().resolve()
    folder = pack_dir / exercise_id
    if folder.exists():
        raise ValueError(f"ID: {folder} already exists")
    written = []
    toml = pack_dir / "pack.toml"
    if not toml.exists():
        pack_dir.mkdir(parents=True, exist_ok=True)
        toml.write_text(f'[pack]\nid = "{pack_dir.name}"\n'
                        f'title = {{ en = "{PLACEHOLDER}: pack title", zh = "{PLACEHOLDER}: 课程标题" }}\n'
                        f'include = []              # other packs first, e.g. ["dpo-grpo"] (the built-in one)\n'
                        f'order = ["{exercise_id}"]\n', encoding="utf-8")
        written.append(toml)
    else:
        text = toml.read_text(encoding="utf-8")
        toml.write_text(add_to_order(text, exercise_id), encoding="utf-8")
        written.append(toml)
    for rel, text in content.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def add_to_order(text: str, exercise_id: str) -> str:
    """pack.toml's text with ``exercise_id`` appended to ``order`` (a one- or multi-line array)."""
    match = re.search(r"^(\s*order\s*=\s*\[)(.*?)(\])", text, flags=re.M | re.S)
    if match is None:
        header = re.search(r"^\s*\[pack\]\s*$", text, flags=re.M)
        if header is None:
            return f'[pack]\norder = ["{exercise_id}"]\n' + text
        return text[:header.end()] + f'\norder = ["{exercise_id}"]' + text[header.end():]
    body = match.group(2).rstrip()
    sep = "" if not body.strip() else ("," if not body.endswith(",") else "") + " "
    return text[:match.start(2)] + body + f'{sep}"{exercise_id}"' + text[match.end(2):]
