"""`alignlings watch ID [FILE]`: re-check on every save, rustlings-style. A save while a check runs
stops that check (its sandbox jobs end at once, nothing is recorded) and checks the new version."""

from __future__ import annotations

import queue
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from alignlings import i18n
from alignlings.cli.common import (ExerciseId, LangOption, LevelOption, PackOption, console, next_text, open_exercise,
                                   session)
from alignlings.cli.layout import paragraph

MSG = i18n.table("cli.watch")  # strings: locales/{en,zh}.toml [cli.watch]


def _changes_watchfiles(path: Path):
    from watchfiles import watch as wf_watch

    for _ in wf_watch(path.parent, watch_filter=lambda _c, p: Path(p).name == path.name, debounce=200):
        yield


def _changes_polling(path: Path, interval: float = 0.5):
    last = path.stat().st_mtime_ns if path.exists() else 0
    while True:
        time.sleep(interval)
        now = path.stat().st_mtime_ns if path.exists() else 0
        if now != last:
            last = now
            yield


def _stamp(path: Path) -> tuple[int, int] | None:
    """What identifies one saved version of the file: its mtime (ns) and size; None if missing."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _listen(changes, events: queue.Queue) -> None:
    """Forward each change to ``events`` (in a thread started before the first check, so that a
    save made while that check runs is not missed)."""
    try:
        for _ in changes:
            events.put("change")
    except Exception as exc:  # noqa: BLE001 - the main loop reports it and falls back to polling
        events.put(exc)
    events.put(None)


def _changes_manual():
    for line in sys.stdin:
        if line.strip().lower() in ("q", "quit", "exit"):
            return
        yield


def watch(
    exercise_id: ExerciseId,
    file: Annotated[Path | None, typer.Argument(metavar="[FILE]", help="Your file (default: the workspace file).")] = None,
    manual: Annotated[bool, typer.Option("--manual", help="Re-check when you press Enter instead of on save.")] = False,
    poll: Annotated[bool, typer.Option("--poll", help="Poll the file's mtime instead of OS file events.")] = False,
    once: Annotated[bool, typer.Option("--once", hidden=True, help="Check once and exit (tests).")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Say in full how the sandbox isolated each run.")] = False,
    level: LevelOption = None,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Keep a warm grader (torch imported once) and re-check your file whenever it changes."""
    from alignlings.cli.check import grade_and_record, read_submission
    from alignlings.cli.report import render_verdict
    from alignlings.grading.grader import Grader
    from alignlings.grading.sandbox import STOP, is_isolated

    lang, p, ex = open_exercise(exercise_id, lang, pack, code_only=True)
    path, _ = read_submission(ex.key, file, level=level)
    out = console()
    with Grader(p, warm=True) as grader:
        seen: list[tuple[int, int] | None] = [None]
        warned = [False]

        def grade(code: str) -> Any:
            """Grade in a thread; when the file is saved again meanwhile, stop this check (its jobs
            end at once, nothing is recorded) and return None."""
            stop, box = threading.Event(), {}

            def work() -> None:
                STOP.set(stop)  # this thread's context: the check's jobs end when it is set
                try:
                    box["verdict"] = grade_and_record(grader, ex.key, code, lang, source="watch", level=level)
                except BaseException as exc:  # noqa: BLE001 - raised again in the main thread
                    box["error"] = exc

            worker = threading.Thread(target=work, name="alignlings-watch-check", daemon=True)
            worker.start()
            while worker.is_alive():
                worker.join(0.2)
                if worker.is_alive() and not stop.is_set() and _stamp(path) != seen[0]:
                    stop.set()
            if "error" in box:
                raise box["error"]
            if stop.is_set():
                out.print(f"[yellow]{escape(MSG['superseded'][lang])}[/]")
                return None
            return box["verdict"]

        def run() -> bool:
            verdict = None
            while verdict is None:  # saved again during the check: check the new version
                seen[0] = _stamp(path)  # the version this check reads
                _, code = read_submission(ex.key, path)
                out.rule(time.strftime("%H:%M:%S"))
                verdict = grade(code)
            render_verdict(verdict, lang, out, verbose=verbose)
            if verdict["passed"]:  # what comes next, as rustlings says it
                paragraph(out, next_text(session(p).next_exercise(ex), lang, pack))
            isolation = verdict.get("isolation") or ""
            if not warned[0] and not is_isolated(isolation):  # once: no namespaces, or no task limit
                warned[0] = True
                why = i18n.reword("practice.isolation", isolation, lang)
                out.print(f"[bold red]{escape(MSG['unisolated'][lang].format(why=why))}[/]")
            return verdict["passed"]

        def run_until_current() -> bool:
            """Check, and check again while the file was saved during the check."""
            passed = run()
            while _stamp(path) != seen[0]:
                passed = run()
            return passed

        if once:
            raise typer.Exit(0 if run() else 1)
        # listen before the first check: a save made while it runs must trigger the next one
        events: queue.Queue = queue.Queue()
        if manual:
            changes = _changes_manual()
        else:
            try:
                changes = _changes_polling(path) if poll else _changes_watchfiles(path)
            except (ImportError, OSError):
                changes = _changes_polling(path)
        threading.Thread(target=_listen, args=(changes, events), name="alignlings-watch", daemon=True).start()
        try:
            run_until_current()
            out.print(MSG["manual" if manual else "watching"][lang].format(path=path))
            while True:
                try:
                    event = events.get(timeout=0.5)
                except queue.Empty:
                    continue
                if event is None:  # the source ended (manual: q or end of input)
                    break
                if isinstance(event, Exception):  # the OS watcher failed: poll instead
                    threading.Thread(target=_listen, args=(_changes_polling(path), events), daemon=True).start()
                    continue
                while not events.empty():  # several saves in a row: one check of the latest
                    if events.get_nowait() is None:
                        break
                if not manual and _stamp(path) == seen[0]:
                    continue  # already checked (a save during a check was caught by run_until_current)
                run_until_current()
        except KeyboardInterrupt:
            pass
