"""Predict items (issue 21 §5): commit to what a small run will show, then run it and see.

An exercise of kind ``predict`` has a ``predict.toml`` (one or more ``[[question]]`` tables) and a
``variant.py`` whose functions produce the measured numbers (format: docs/pack-format.md, "Predict
items"). This module holds what the rest of the code needs of it, apart from the kind's hooks
(``practice.kinds.predict``):

- the typed data (:class:`PredictQuestion` and its options and chart), read by :func:`load_questions`
  with ``FILE:LINE: field: what was expected`` errors;
- :func:`run_variant`: ``variant.py``'s ``run`` function in a separate ``python -I`` process (a time
  limit, CPU/file-size/core rlimits, one thread, an empty working folder), its JSON validated
  (``values``: name -> finite float, ``series``: name -> list of finite floats, bounded sizes) and
  cached under alignlings' cache folder, keyed by a hash of variant.py, the question id and the
  alignlings version; a corrupt cache file is ignored and replaced. Failures raise
  :class:`VariantError`, whose message is for the learner (no traceback) and ``detail`` for logs;
- :func:`result_text`: the question's ``result`` text formatted over the measured values.

It imports neither torch nor the pack loader (the loader calls it), so listing exercises stays fast.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import string
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from alignlings.i18n import LANGS
from alignlings.content.packdata import PackError, _question_lines, _read_toml, field_line, option_line  # noqa: F401

if TYPE_CHECKING:
    from alignlings.content.exercise import Exercise

log = logging.getLogger("alignlings.practice")

MIN_OPTIONS, MAX_OPTIONS = 2, 6
MAX_VALUES = 64  # names in result["values"]
MAX_SERIES = 16  # names in result["series"]
MAX_POINTS = 200  # points per series
MAX_NAME = 64  # characters of a value or series name
MAX_OUTPUT_BYTES = 1_000_000  # the run's JSON file
DEFAULT_TIMEOUT = 120.0  # seconds for one run, torch's import included (a run itself should take < 10 s)
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TAG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


# -- the data ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PredictOption:
    text: dict[str, str]
    why: dict[str, str]  # feedback for choosing it, shown after the run


@dataclass(frozen=True)
class PredictChart:
    x: dict[str, str]  # axis labels per language
    y: dict[str, str]
    series: dict[str, dict[str, str]]  # series key in result["series"] -> its legend label per language


@dataclass(frozen=True)
class PredictQuestion:
    id: str  # unique in the pack across quiz, bug-or-not and predict ids; review key "predict/<id>"
    concepts: tuple[str, ...]
    answer: int  # the option the measured run supports
    run: str  # function of variant.py: () -> {"values": {...}, "series": {...}}
    supports: str  # function of variant.py: (result) -> the option index the numbers support
    question: dict[str, str]
    result: dict[str, str]  # str.format over result["values"]
    explanation: dict[str, str]
    options: tuple[PredictOption, ...]
    chart: PredictChart | None
    line: int = 0  # where its [[question]] table starts in predict.toml (1-based)

    def result_fields(self) -> set[str]:
        """The value names the ``result`` texts use."""
        out: set[str] = set()
        for text in self.result.values():
            out |= _format_fields(text)
        return out


# -- reading predict.toml --------------------------------------------------------------------------

def _format_fields(text: str) -> set[str]:
    """The field names of a ``str.format`` text (``{name:.2f}`` -> ``name``)."""
    out = set()
    for _, name, _, _ in string.Formatter().parse(text):
        if name is not None:
            out.add(name)
    return out


def _langs(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise PackError(f"{where}: expected a table with {' and '.join(LANGS)} (e.g. {where.rsplit(' ', 1)[-1]}.en = "
                        f"\"...\"), got {type(value).__name__}")
    missing = [lang for lang in LANGS if not isinstance(value.get(lang), str) or not value[lang].strip()]
    if missing:
        raise PackError(f"{where}: missing {' and '.join(missing)} text (expected a non-empty string per language)")
    return {lang: str(value[lang]) for lang in LANGS}


def load_questions(ex: Exercise) -> tuple[PredictQuestion, ...]:
    """The ``[[question]]`` tables of ``ex``'s predict.toml, validated (``PackError`` with FILE:LINE)."""
    path = ex.path / "predict.toml"
    data = _read_toml(path)
    items = data.get("question")
    if not isinstance(items, list) or not items or not all(isinstance(q, dict) for q in items):
        raise PackError(f"{path}:1: question: expected one or more [[question]] tables")
    out, seen = [], set()
    for i, q in enumerate(items):
        def where(name: str, i: int = i) -> str:
            return f"{path}:{field_line(path, i, name)}: question #{i + 1} {name}"

        for name in ("id", "answer", "run", "supports", "question", "result", "explanation", "option"):
            if name not in q:
                raise PackError(f"{path}:{field_line(path, i, 'id')}: question #{i + 1}: missing field {name!r}")
        qid = q["id"]
        if not isinstance(qid, str) or not TAG.match(qid):
            raise PackError(f"{where('id')}: expected an id like \"old-policy-sync\" (lowercase words joined by '-'), "
                            f"got {qid!r}")
        if qid in seen:
            raise PackError(f"{where('id')}: a second question with the id {qid!r}")
        seen.add(qid)
        for name in ("run", "supports"):
            if not isinstance(q[name], str) or not IDENT.match(q[name]):
                raise PackError(f"{where(name)}: expected the name of a function in variant.py, got {q[name]!r}")
        concepts = q.get("concepts", [])
        if not isinstance(concepts, list) or not all(isinstance(c, str) and TAG.match(c) for c in concepts):
            raise PackError(f"{where('concepts')}: expected a list of concept tags like \"implicit-reward\", "
                            f"got {concepts!r}")
        raw_options = q["option"]
        if not isinstance(raw_options, list) or not MIN_OPTIONS <= len(raw_options) <= MAX_OPTIONS:
            n = len(raw_options) if isinstance(raw_options, list) else 0
            raise PackError(f"{where('option')}: expected {MIN_OPTIONS} to {MAX_OPTIONS} [[question.option]] "
                            f"tables, got {n}")
        options = []
        for k, o in enumerate(raw_options):
            def at(name: str, i: int = i, k: int = k) -> str:  # the option's own line, not the question's
                return f"{path}:{option_line(path, i, k, name)}: question #{i + 1} option #{k + 1}" + \
                    (f" {name}" if name else "")

            if not isinstance(o, dict) or "text" not in o or "why" not in o:
                raise PackError(f"{at('')}: expected text.en/zh and why.en/zh")
            options.append(PredictOption(text=_langs(o["text"], at("text")), why=_langs(o["why"], at("why"))))
        answer = q["answer"]
        if isinstance(answer, bool) or not isinstance(answer, int) or not 0 <= answer < len(options):
            raise PackError(f"{where('answer')}: expected an option index 0..{len(options) - 1} (0-based), got {answer!r}")
        result = _langs(q["result"], where("result"))
        for lang, text in result.items():
            try:
                fields = _format_fields(text)
            except ValueError as exc:
                raise PackError(f"{where('result')}.{lang}: not a format text ({exc})") from None
            bad = [f for f in fields if not IDENT.match(f)]
            if bad:
                raise PackError(f"{where('result')}.{lang}: {{{bad[0]}}}: expected a plain value name "
                                "({name} or {name:.2f})")
        chart = None
        if "chart" in q:
            chart = _chart(q["chart"], where("chart"))
        out.append(PredictQuestion(
            id=qid, concepts=tuple(concepts), answer=answer, run=q["run"], supports=q["supports"],
            question=_langs(q["question"], where("question")), result=result,
            explanation=_langs(q["explanation"], where("explanation")), options=tuple(options), chart=chart,
            line=field_line(path, i, "id")))
    return tuple(out)


def _chart(value: Any, where: str) -> PredictChart:
    if not isinstance(value, dict):
        raise PackError(f"{where}: expected a table [question.chart]")
    series = value.get("series")
    if not isinstance(series, dict) or not series:
        raise PackError(f"{where}.series: expected one table per series to draw ([question.chart.series.NAME] "
                        "with en and zh legend labels)")
    if len(series) > MAX_SERIES:
        raise PackError(f"{where}.series: at most {MAX_SERIES} series, got {len(series)}")
    return PredictChart(x=_langs(value.get("x"), f"{where}.x"), y=_langs(value.get("y"), f"{where}.y"),
                        series={str(k): _langs(v, f"{where}.series.{k}") for k, v in series.items()})


# -- running the variant -----------------------------------------------------------------------------

class VariantError(RuntimeError):
    """The variant could not be run: ``message`` for the learner (no traceback), ``detail`` for logs
    and ``dev check`` (the run's stderr tail)."""

    def __init__(self, message: str, detail: str = ""):
        super().__init__(message)
        self.message, self.detail = message, detail


@dataclass(frozen=True)
class Run:
    """One measured run: ``values`` (name -> float), ``series`` (name -> list of floats), the option
    ``supports`` says the numbers support (None when it failed: ``supports_error``), and whether it
    came from the cache."""

    values: dict[str, float]
    series: dict[str, list[float]]
    supports: int | None
    supports_error: str | None
    cached: bool
    seconds: float


_LOAD_VARIANT = r"""
for name, value in (("RLIMIT_CPU", int(cpu)), ("RLIMIT_CORE", 0), ("RLIMIT_FSIZE", 16 * 2**20)):
    try:
        resource.setrlimit(getattr(resource, name), (value, value))
    except (AttributeError, ValueError, OSError):
        pass
sys.path.insert(0, src)
import importlib.util
spec = importlib.util.spec_from_file_location("alignlings_predict_variant", variant)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
"""
"""What both child processes start with: their limits, then variant.py loaded as a module."""

_CHILD = r"""
import json, sys, resource
src, variant, run_name, supports_name, out_path, cpu = sys.argv[1:7]
""" + _LOAD_VARIANT + r"""
fn = getattr(module, run_name, None)
if not callable(fn):
    sys.stderr.write(f"variant.py has no function {run_name}()\n")
    sys.exit(3)
result = fn()
supports, supports_error = None, None
check = getattr(module, supports_name, None) if supports_name else None
if supports_name and not callable(check):
    supports_error = f"variant.py has no function {supports_name}(result)"
elif check is not None:
    try:
        supports = check(result)
        if isinstance(supports, bool) or not isinstance(supports, int):
            supports_error = f"{supports_name}() returned {type(supports).__name__} {supports!r}, expected an int"
            supports = None
    except Exception as exc:
        supports_error = f"{supports_name}() raised {type(exc).__name__}: {exc}"
with open(out_path, "w", encoding="utf-8") as f:
    json.dump({"result": result, "supports": supports, "supports_error": supports_error}, f)
"""


def _src_dir() -> str:
    """The folder that holds the ``alignlings`` package this process runs (the variant imports it)."""
    return str(Path(__file__).resolve().parents[2])


def _version() -> str:
    from alignlings import __version__

    return __version__


def cache_dir() -> Path:
    home = os.environ.get("ALIGNLINGS_HOME")
    if home:
        return Path(home) / "cache" / "predict"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("alignlings")) / "predict"


def cache_path(ex: Exercise, q: PredictQuestion) -> Path:
    """Where a run is cached: keyed by variant.py's bytes, the question (its id, run and supports
    functions) and the alignlings version, so an edited variant or a new release runs again."""
    try:
        source = (ex.path / "variant.py").read_bytes()
    except OSError:
        source = b""
    key = hashlib.sha256(b"\0".join([source, q.id.encode(), q.run.encode(), q.supports.encode(),
                                     _version().encode()])).hexdigest()[:24]
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", f"{ex.pack}-{ex.id}-{q.id}")[:120]
    return cache_dir() / f"{safe}-{key}.json"


def _finite(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(float(v))


def validate_result(data: Any) -> tuple[dict[str, float], dict[str, list[float]]]:
    """``run()``'s return value as (values, series); ``ValueError`` naming what is wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"expected a dict with 'values' (and 'series'), got {type(data).__name__}")
    extra = set(data) - {"values", "series"}
    if extra:
        raise ValueError(f"unexpected keys {sorted(extra)}: expected only 'values' and 'series'")
    values, series = data.get("values"), data.get("series", {})
    if not isinstance(values, dict) or not values:
        raise ValueError("'values': expected a non-empty dict of name -> number")
    if len(values) > MAX_VALUES:
        raise ValueError(f"'values': at most {MAX_VALUES} names, got {len(values)}")
    for k, v in values.items():
        if not isinstance(k, str) or not IDENT.match(k) or len(k) > MAX_NAME:
            raise ValueError(f"'values': name {k!r} is not a short identifier")
        if not _finite(v):
            raise ValueError(f"'values'[{k!r}]: expected a finite number, got {v!r}")
    if not isinstance(series, dict):
        raise ValueError("'series': expected a dict of name -> list of numbers")
    if len(series) > MAX_SERIES:
        raise ValueError(f"'series': at most {MAX_SERIES} series, got {len(series)}")
    lengths = set()
    for k, v in series.items():
        if not isinstance(k, str) or not IDENT.match(k) or len(k) > MAX_NAME:
            raise ValueError(f"'series': name {k!r} is not a short identifier")
        if not isinstance(v, list) or not 2 <= len(v) <= MAX_POINTS or not all(_finite(x) for x in v):
            raise ValueError(f"'series'[{k!r}]: expected a list of 2 to {MAX_POINTS} finite numbers")
        lengths.add(len(v))
    if len(lengths) > 1:
        raise ValueError(f"'series': expected lists of one length, got lengths {sorted(lengths)}")
    return ({k: float(v) for k, v in values.items()},
            {k: [float(x) for x in v] for k, v in series.items()})


def _read_cache(path: Path) -> Run | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        values, series = validate_result(data["result"])
        supports = data.get("supports")
        if supports is not None and (isinstance(supports, bool) or not isinstance(supports, int)):
            raise ValueError("supports")
        error = data.get("supports_error")
        return Run(values, series, supports, str(error) if error is not None else None, True, 0.0)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):  # corrupt or from an older layout: run again
        log.warning("ignoring the unreadable predict cache file %s", path)
        return None


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


_running_lock = threading.Lock()
_running: dict[Path, threading.Lock] = {}  # cache path -> the lock of its one run in this process


def run_variant(ex: Exercise, q: PredictQuestion, *, timeout: float | None = None, use_cache: bool = True) -> Run:
    """Run ``q.run`` of ``ex``'s variant.py in a separate process (or take the cached run).

    ``timeout``: seconds (default :data:`DEFAULT_TIMEOUT`, or ``ALIGNLINGS_PREDICT_TIMEOUT``);
    ``use_cache=False`` runs it whatever the cache holds (``dev check``) and refreshes the cache.
    One variant runs once at a time in this process: a second request for it (another learner,
    the server's warm-up) waits and takes the cached run. Raises :class:`VariantError` when it
    times out, crashes or returns malformed data."""
    path = cache_path(ex, q)
    if use_cache:
        hit = _read_cache(path)
        if hit is not None:
            return hit
    with _running_lock:
        lock = _running.setdefault(path, threading.Lock())
    with lock:
        if use_cache:  # it may have run while this one waited
            hit = _read_cache(path)
            if hit is not None:
                return hit
        return _run_variant(ex, q, path, timeout)


def _run_variant(ex: Exercise, q: PredictQuestion, path: Path, timeout: float | None) -> Run:
    variant = ex.path / "variant.py"
    if not variant.is_file():
        raise VariantError(f"{ex.key}: variant.py is missing", str(variant))
    if timeout is None:
        timeout = float(os.environ.get("ALIGNLINGS_PREDICT_TIMEOUT") or DEFAULT_TIMEOUT)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tempfile.gettempdir(),
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "CUDA_VISIBLE_DEVICES": "", "LANG": "C.UTF-8"}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="alignlings-predict-") as work:
        out = Path(work) / "result.json"
        cmd = [sys.executable, "-I", "-c", _CHILD, _src_dir(), str(variant.resolve()), q.run, q.supports, str(out),
               str(int(timeout) + 5)]
        try:
            proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout,
                                  start_new_session=True, check=False)
        except subprocess.TimeoutExpired as exc:
            err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            raise VariantError(f"the run of {ex.key} took longer than {timeout:g} s and was stopped",
                               _tail(err)) from None
        seconds = time.monotonic() - started
        if proc.returncode != 0:
            last = _tail(proc.stderr, 1) or f"exit status {proc.returncode}"
            raise VariantError(f"the run of {ex.key} failed: {last[:300]}", _tail(proc.stderr))
        try:
            if out.stat().st_size > MAX_OUTPUT_BYTES:
                raise ValueError(f"its output is over {MAX_OUTPUT_BYTES} bytes")
            data = json.loads(out.read_text(encoding="utf-8"))
            values, series = validate_result(data["result"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise VariantError(f"the run of {ex.key} returned malformed data: {str(exc)[:300]}",
                               _tail(proc.stderr)) from None
    run = Run(values, series, data.get("supports"), data.get("supports_error"), False, seconds)
    _write_cache(path, run)
    return run


_PROBE = r"""
import json, sys, resource
src, variant, supports_name, in_path, out_path, cpu = sys.argv[1:7]
""" + _LOAD_VARIANT + r"""
check = getattr(module, supports_name)
out = []
for result in json.load(open(in_path, encoding="utf-8")):
    try:
        got = check(result)
        out.append(got if isinstance(got, int) and not isinstance(got, bool) else None)
    except Exception:
        out.append(None)
json.dump(out, open(out_path, "w", encoding="utf-8"))
"""


def perturbed(run: Run) -> list[dict]:
    """Results other than the measured one (each value, and every number at once, scaled, negated,
    shifted, zeroed): what a ``supports_*`` that reads the numbers answers differently for some of."""
    out = []
    def scaled(f, g=None) -> dict:
        return {"values": {k: f(v) for k, v in run.values.items()},
                "series": {k: [(g or f)(x) for x in xs] for k, xs in run.series.items()}}
    for fn in (lambda v: 0.0, lambda v: v * 10, lambda v: v * 0.1, lambda v: -v, lambda v: v + 1, lambda v: v * 1000,
               lambda v: v - 1000):
        out.append(scaled(fn))
    for name in run.values:
        for fn in (lambda v: 0.0, lambda v: v * 10 + 10, lambda v: v * 0.1 - 10, lambda v: -v, lambda v: v + 100):
            out.append({"values": {k: (fn(v) if k == name else v) for k, v in run.values.items()},
                        "series": dict(run.series)})
    return out


def probe_supports(ex: Exercise, q: PredictQuestion, results: list[dict], *, timeout: float = 60.0) -> list[int | None]:
    """``q.supports`` of ``ex``'s variant.py applied to each of ``results`` in a separate process (as
    the run is): the option each gives, None where it failed (``dev check``: a supports function
    that ignores the numbers)."""
    variant = ex.path / "variant.py"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tempfile.gettempdir(),
           "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "LANG": "C.UTF-8"}
    with tempfile.TemporaryDirectory(prefix="alignlings-predict-") as work:
        given, out = Path(work) / "results.json", Path(work) / "supports.json"
        given.write_text(json.dumps(results), encoding="utf-8")
        cmd = [sys.executable, "-I", "-c", _PROBE, _src_dir(), str(variant.resolve()), q.supports, str(given),
               str(out), str(int(timeout) + 5)]
        try:
            proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout,
                                  start_new_session=True, check=False)
            got = json.loads(out.read_text(encoding="utf-8")) if proc.returncode == 0 else []
        except (subprocess.TimeoutExpired, OSError, ValueError):
            got = []
    return [g if isinstance(g, int) else None for g in got] if isinstance(got, list) else []


def _write_cache(path: Path, run: Run) -> None:
    payload = {"result": {"values": run.values, "series": run.series}, "supports": run.supports,
               "supports_error": run.supports_error}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(payload), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:  # a read-only cache folder: the result is still shown, just not kept
        log.warning("could not cache the predict run at %s", path)


# -- showing the result ------------------------------------------------------------------------------

def result_text(q: PredictQuestion, values: dict[str, float], lang: str) -> str:
    """The question's ``result`` text in ``lang`` over the measured values (a name the run did not
    give shows as ``?`` rather than failing: ``dev check`` reports it)."""
    class Missing(dict):
        def __missing__(self, key: str) -> Any:
            return _Unknown()

    try:
        return q.result.get(lang, q.result["en"]).format_map(Missing(values))
    except (ValueError, TypeError):
        return q.result.get(lang, q.result["en"])


class _Unknown:
    def __format__(self, spec: str) -> str:
        return "?"


def sparkline(values: list[float]) -> str:
    """A one-line picture of a series (▁▂▃▄▅▆▇█), for the terminal."""
    bars = "▁▂▃▄▅▆▇█"
    lo, hi = min(values), max(values)
    if hi - lo <= 1e-12 * max(1.0, abs(hi)):
        return bars[3] * len(values)
    return "".join(bars[min(7, int((v - lo) / (hi - lo) * 8))] for v in values)


def chart_data(q: PredictQuestion, run: Run, lang: str) -> dict | None:
    """What a chart draws: axis labels and the legend in ``lang``, and each drawn series' points."""
    if q.chart is None:
        return None
    series = [{"key": k, "label": label.get(lang, label["en"]), "points": run.series[k]}
              for k, label in q.chart.series.items() if k in run.series]
    if not series:
        return None
    return {"x": q.chart.x.get(lang, q.chart.x["en"]), "y": q.chart.y.get(lang, q.chart.y["en"]), "series": series}


__all__ = ["PredictQuestion", "PredictOption", "PredictChart", "Run", "VariantError", "load_questions",
           "run_variant", "result_text", "chart_data", "sparkline", "validate_result", "cache_path", "field_line"]
