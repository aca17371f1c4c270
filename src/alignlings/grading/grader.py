"""The grader: runs a learner's file in a sandbox, and judges what it returns outside it.

Checking is by execution, never by comparing text: the exercise's cases (visible spec data, hidden
randomised shapes, edge cases) run on the learner's module and, once per pack version, on the
reference. Each blank is also judged on its own, from the learner's own run (``record`` records its
value and scope; the reference fill is evaluated on that scope in a trusted job, ``instrument``), so
the verdict names exactly which blanks are wrong, with a known misconception's feedback (matched by
behaviour) or a diff.

Who holds what (a pass must be earned, whatever the learner's code does in its process):

- The learner's whole file runs in a sandboxed job of its own (``casejob.run_cases``) that holds no
  reference code, no expected values and no comparison; the library and the packs are not even
  visible to it. It returns each case's value in a plain wire format (``values``).
- No reference text is ever spliced into a job that runs learner code: a blank that recording
  cannot judge is judged by the file's cases alone (``_by_cases``).
- The reference's values and the misconceptions' values come from trusted jobs (pack code only),
  cached per exercise and pack version (``TrustedRun``).
- Comparison, per-blank judgement and misconception matching happen here, in the caller's process,
  on decoded values; a check's ``expect`` predicate runs in a trusted job on the decoded values.
- Only the exercise's own case names are accepted from a job, each with a value or an error.

The verdict (``practice.verdict.Verdict``) is a plain dict, the JSON of ``alignlings check --json``
and of the web API:
``exercise``, ``passed``, ``blanks`` (in blank order: ``index``, ``name``, ``fill``, ``passed``,
``message``, ``misconception``, ``diff``), ``cases`` (``name``, ``label``, ``kind``, ``passed``,
``message``), ``error`` (None or ``kind`` + ``message``), ``isolation``, ``stdout``, ``seconds``.

Why one long module: it is the trusted judge, and keeping it whole keeps every comparison between a
learner's values and the reference's in one place that can be audited against docs/isolation.md; the
learner's job (``casejob``), recording (``record``, ``instrument``), values and feedback are apart.
"""

from __future__ import annotations

import ast
import collections
import contextlib
import contextvars
import functools
import hashlib
import json
import math
import os
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from alignlings.content import blanks as bl
from alignlings.grading import instrument
from alignlings.grading import values as vals
from alignlings.grading.behaviour import CaseResult, _decode_cases, _same_behaviour  # noqa: F401 - re-exported
from alignlings.grading.casejob import NOT_RUN, TIMED_OUT, _names
from alignlings.content.checks import MAX_VARIANTS
from alignlings.grading.feedback import describe_case, msg
from alignlings.content.exercise import Exercise
from alignlings.content.pack import Pack, PackError, load_pack
from alignlings.grading.verdict import Verdict

RUN_CASES = "alignlings.grading.casejob:run_cases"
RUN_TRUSTED = "alignlings.grading.casejob:run_trusted"
JUDGE_PREDICATES = "alignlings.grading.casejob:judge_predicates"
JUDGE_BLANKS = "alignlings.grading.casejob:judge_blanks"
CACHE_FORMAT = 3
JUDGED_BYTES = 4 << 20
"""At most this much of a trusted run's own judgements (``TrustedRun.judged``) is kept with it."""
MEMORY_CACHE = 64
"""Trusted runs (an exercise's reference values for one draw of inputs) kept in memory, least
recently used first out."""
DISK_CACHE = 256
"""Files of reference values kept on disk (in the cache folder); the oldest go first, and a file of
an older pack version goes as soon as the same exercise's new one is written."""
__all__ = ["DISK_CACHE", "MAX_VARIANTS", "MEMORY_CACHE", "Grader", "GradingError", "Submission", "TrustedRun",
           "machine_slowness", "solution_for", "template_for"]


def _same_code(a: str, b: str) -> bool:
    try:
        return ast.dump(ast.parse(a.strip())) == ast.dump(ast.parse(b.strip()))
    except SyntaxError:
        return False


@dataclass(frozen=True)
class Submission:
    code: str
    fills: dict[int, str | None]
    located: instrument.Located | None = None  # each blank found by statement shape, where the file parses


class GradingError(RuntimeError):
    """The exercise itself is broken (its reference fails a case, or its check.py does not load)."""


@dataclass
class TrustedRun:
    """What pack code alone produced for one exercise: case metadata, the reference's values, and
    each misconception's results on the per-blank cases."""

    meta: list[dict]
    expected: dict[str, CaseResult]
    misconceptions: dict[str, dict[str, CaseResult] | None] = field(default_factory=dict)
    # bug drills: the buggy file ("buggy") and each known wrong fix ("w:<id>"), on every case
    variants: dict[str, dict[str, CaseResult] | None] = field(default_factory=dict)
    # blanks judged by recording (``instrument``): those whose reference fill, evaluated on the
    # reference's own recorded scopes, gives back the reference's recorded values
    recorded: frozenset[int] = frozenset()
    # the judging job's results on the reference's own records, by what decides them
    # (``Grader._judge_key``): a learner's record with the same key needs no job of its own
    judged: dict[str, dict] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [m["name"] for m in self.meta]

    def blank_cases(self) -> list[dict]:
        return [m for m in self.meta if m["scope"] == "all"]


def fold_variant(variant: int) -> int:
    """``variant`` within the ``MAX_VARIANTS`` draws an exercise has: 0 stays 0 (the exercise's own
    inputs), any other folds into 1..MAX_VARIANTS-1, so reference values stay few and cached."""
    return 0 if variant <= 0 else 1 + (variant - 1) % (MAX_VARIANTS - 1)


def _ran_for(result: Any, exercise: Exercise) -> float:
    """The seconds a job's cases had (set by ``Grader._run``), else the exercise's own timeout."""
    return float(getattr(result, "case_seconds", exercise.timeout))


class _ContextPool(ThreadPoolExecutor):
    """A thread pool whose tasks run in the submitter's context (contextvars), so that a "Stop"
    (``sandbox.STOP``) set where a check was asked for reaches the jobs its workers start."""

    def submit(self, fn, /, *args, **kwargs):
        return super().submit(contextvars.copy_context().run, fn, *args, **kwargs)


def _timed_out(result: Any, exercise: Exercise, lang: str) -> str:
    """Which limit a job that timed out hit: its CPU time (scaled to this machine's calibrated speed)
    or its wall-clock time (scaled to speed and load), in the learner's language."""
    cpu = getattr(result, "cpu_limit", None)
    if cpu is not None and "of CPU time" in (result.error_message or ""):
        return msg("cpu_timed_out", lang, seconds=_seconds(float(cpu)))
    return msg("timed_out", lang, seconds=_seconds(_ran_for(result, exercise)))


def _seconds(x: float) -> str:
    return f"{x:.0f}" if x >= 10 else f"{x:.1f}"


def _syntax_error(code: str) -> str | None:
    """None if ``code`` compiles, else "SyntaxError: <the parser's words>" (compiled, never run)."""
    try:
        compile(code, "exercise.py", "exec")
    except SyntaxError as exc:
        return f"{type(exc).__name__}: {exc.msg}"
    except (ValueError, OverflowError, RecursionError, MemoryError) as exc:  # e.g. a null byte, deep nesting
        return type(exc).__name__
    return None


_SPEED_WORK_S = 0.03  # the calibration below on an ordinary 2023 server core, unloaded (0.02 s on a fast one)
_speed: float | None = None


def _calibrate() -> float:
    """Seconds a fixed mix of Python and numpy work takes here (the best of three)."""
    import numpy as np

    a = np.random.default_rng(0).standard_normal((160, 160))
    best = math.inf
    for _ in range(3):
        t = time.perf_counter()
        x = 0
        for i in range(150_000):
            x += i * i % 7
        for _ in range(10):
            a = np.tanh(a @ a / 160.0)
        best = min(best, time.perf_counter() - t)
    return best


def machine_speed() -> float:
    """How many times slower than an ordinary laptop core this machine runs (at least 1, at most 4),
    from a quick calibration cached for a day in the cache folder."""
    global _speed
    if _speed is not None:
        return _speed
    path = _cache_dir().parent / "speed.json"
    seconds = None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if time.time() - float(data["when"]) < 86400 and data.get("cpus") == os.cpu_count():
            seconds = float(data["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if seconds is None:
        seconds = _calibrate()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"seconds": seconds, "when": time.time(), "cpus": os.cpu_count()}))
            os.replace(tmp, path)
        except OSError:
            pass
    _speed = min(4.0, max(1.0, seconds / _SPEED_WORK_S))
    return _speed


def machine_load() -> float:
    """How many runnable tasks share each CPU now (at least 1, at most 8): the larger of the
    one-minute load average and the tasks running this instant, per CPU."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    load = 0.0
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            fields = f.read().split()
        load = max(float(fields[0]), float(fields[3].split("/")[0]) - 1)
    except (OSError, ValueError, IndexError):
        with contextlib.suppress(OSError, AttributeError):
            load = os.getloadavg()[0]
    return min(8.0, max(1.0, load / cpus))


CPU_MARGIN = 1.5  # a job's CPU time limit over its exercise's timeout (on this machine's calibrated speed)


def machine_slowness() -> float:
    """The factor an exercise's time limit is scaled by: this machine's speed times its load."""
    return machine_speed() * machine_load()


def _evict(written: Path, key: str) -> None:
    """After writing ``written``: remove the same exercise's files of other pack versions, then the
    oldest files while more than DISK_CACHE remain."""
    folder = written.parent
    stem = written.name[: -len(f"-{key}.json")]
    pattern = re.compile(re.escape(stem) + r"-([0-9a-f]{24})(-v\d+)?\.json")
    fingerprint = key.split("-v")[0]
    try:
        files = [p for p in folder.iterdir() if p.suffix == ".json"]
        for p in files:
            m = pattern.fullmatch(p.name)
            if m and m.group(1) != fingerprint:
                with contextlib.suppress(OSError):
                    p.unlink()
        files = [p for p in files if p.exists()]
        if len(files) > DISK_CACHE:
            files.sort(key=lambda p: p.stat().st_mtime)
            for p in files[: len(files) - DISK_CACHE]:
                with contextlib.suppress(OSError):
                    p.unlink()
    except OSError:
        pass


def _cache_dir() -> Path:
    home = os.environ.get("ALIGNLINGS_HOME")
    if home:
        return Path(home) / "cache" / "expected"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("alignlings")) / "expected"


_torch_version: str | None = None


def _versions() -> str:
    global _torch_version
    if _torch_version is None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            _torch_version = version("torch")
        except PackageNotFoundError:
            _torch_version = "?"
    from alignlings import __version__
    from alignlings.grading.sandbox import job_tree

    # the job tree's name carries the hash of the job-side code that produced the values
    return f"{CACHE_FORMAT}/{__version__}/{_torch_version}/{os.path.basename(job_tree())}/{_trusted_code()}"


@functools.lru_cache(maxsize=1)
def _trusted_code() -> str:
    """A hash of the trusted side's code that turns a run into what is cached (which blanks
    recording judges, and their judgements)."""
    here = Path(__file__).parent
    return hashlib.sha256(b"".join((here / f).read_bytes() for f in ("grader.py", "instrument.py"))).hexdigest()[:16]


class _SessionState(threading.local):
    server: Any = None  # this thread's per-check fork server, if any


class Grader:
    """Grades submissions for one pack. ``warm=True`` keeps a fork server with torch imported
    (watch mode, the web app); otherwise each check starts fresh sandboxed processes."""

    def __init__(self, pack: Pack | None = None, *, warm: bool = False, isolation: str = "auto",
                 cache: bool = True, fork_server: bool = True, fresh_inputs: bool = True):
        """``warm``: keep a fork server for the grader's life (watch mode, the web app); otherwise
        each check starts one for its own jobs, or, with ``fork_server=False``, a fresh interpreter
        per job (under bubblewrap). ``isolation``: one of ``sandbox.ISOLATION_MODES``. ``cache``:
        keep the reference's values on disk per exercise and pack version. ``fresh_inputs``: a check
        that names no ``variant`` draws one of ``MAX_VARIANTS`` input draws at random where the
        exercise's cases have fresh inputs (``checks.fresh``), so hidden values cannot be collected
        check by check."""
        from alignlings.grading.sandbox.limits import ISOLATION_MODES

        if isolation not in ISOLATION_MODES:
            raise ValueError(f"isolation: expected one of {ISOLATION_MODES}, got {isolation!r}")
        self._fork_server_per_check = fork_server
        self.pack = pack or load_pack()
        self.isolation = isolation
        self._cache = cache
        self._warm = None
        self._lock = threading.Lock()
        # (id, variant) -> (key, run), least recently used first
        self._trusted: collections.OrderedDict[tuple[str, int], tuple[str, TrustedRun]] = collections.OrderedDict()
        self.fresh_inputs = fresh_inputs
        # one computation per (id, variant) at a time: a check that arrives while the web app's
        # background warm-up computes the same values waits for them instead of computing them twice
        self._computing: dict[tuple[str, int], threading.Lock] = {}
        self._pool = _ContextPool(max_workers=max(2, min(4, os.cpu_count() or 2)),
                                  thread_name_prefix="alignlings-grade")
        self._session_state = _SessionState()
        if warm:
            self._warm = self._fork_server(list(self.pack))

    def _fork_server(self, exercises: list[Exercise], *, warm_up: bool = True):
        from alignlings.grading.sandbox import WarmSandbox

        # exercise.toml may name heavy modules its checks import (e.g. transformers): the fork
        # server imports them once instead of every job. warm_up (first autograd pass, Adam) costs
        # ~1 s once and saves each later job its share: worth it for a long-lived server only.
        preload = ["torch", "alignlings.grading.casejob", "alignlings.content.checks"]
        if warm_up:
            preload.append("alignlings.grading.casejob:warm_up")
        for ex in exercises:
            preload += [m for m in ex.meta.get("preload", []) if m not in preload]
        return WarmSandbox(preload=preload, isolation=self.isolation)

    def close(self) -> None:
        if self._warm is not None:
            self._warm.close()
            self._warm = None
        self._pool.shutdown(wait=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- building the submission ------------------------------------------------------------
    def blanks(self, exercise: Exercise) -> list[bl.Blank]:
        return bl.find_blanks(exercise.solution_source)

    def submission(self, exercise: Exercise, code: str | None = None, fills: list[str] | None = None) -> Submission:
        source, blanks = exercise.solution_source, self.blanks(exercise)
        if (code is None) == (fills is None):
            raise ValueError("code, fills: give exactly one of them")
        if fills is not None:
            if not isinstance(fills, (list, tuple)) or not all(isinstance(f, str) for f in fills):
                raise ValueError("fills: expected a list of strings, one per blank")
            if len(fills) != len(blanks):
                raise ValueError(f"fills: expected {len(blanks)} fills for {exercise.id}, got {len(fills)}")
            by_index = {b.index: (f.strip() or bl.PLACEHOLDER) for b, f in zip(blanks, fills)}
            return Submission(code=bl.render(source, blanks, by_index), fills=dict(by_index))
        assert code is not None  # exactly one of code and fills, checked above
        located = instrument.locate(code, source, blanks)
        if located is not None and all(located.fills.get(b.index) is not None for b in blanks):
            return Submission(code=code, fills=dict(located.fills), located=located)  # every blank found by shape
        # by lines around each blank (a file that does not parse, or a blank its shape did not find)
        return Submission(code=code, fills=bl.extract_fills(code, source, blanks), located=located)

    # -- trusted values -----------------------------------------------------------------------
    @staticmethod
    def _check_source(exercise: Exercise) -> str:
        return (Path(exercise.path) / "check.py").read_text(encoding="utf-8")

    def _fingerprint(self, exercise: Exercise, check: str) -> str:
        h = hashlib.sha256(_versions().encode())
        for part in (exercise.id, exercise.solution_source, check,
                     json.dumps([[m.id, m.blank, m.fill] for m in exercise.misconceptions])):
            h.update(b"\0" + part.encode())
        extra = exercise.kind_spec.trusted_variants(exercise)
        if extra:
            h.update(b"\0" + json.dumps(extra, sort_keys=True).encode())
        return h.hexdigest()[:24]

    def trusted(self, exercise: Exercise, variant: int = 0) -> TrustedRun:
        """The reference's values and the misconceptions' behaviour (pack code only), computed once
        per exercise and pack version in a sandboxed job, cached in memory and on disk."""
        variant = fold_variant(variant)
        check = self._check_source(exercise)
        key = self._fingerprint(exercise, check) + (f"-v{variant}" if variant else "")
        with self._lock:
            hit = self._trusted.get((exercise.id, variant))
            if hit and hit[0] == key:
                self._trusted.move_to_end((exercise.id, variant))
                return hit[1]
            computing = self._computing.setdefault((exercise.id, variant), threading.Lock())
        with computing:
            with self._lock:
                hit = self._trusted.get((exercise.id, variant))
                if hit and hit[0] == key:
                    self._trusted.move_to_end((exercise.id, variant))
                    return hit[1]
            return self._compute_trusted(exercise, variant, check, key)

    def _compute_trusted(self, exercise: Exercise, variant: int, check: str, key: str) -> TrustedRun:
        raw = self._read_cache(exercise, key)
        if raw is None:
            source, blanks = exercise.solution_source, self.blanks(exercise)
            variants = {"reference": bl.reference(source, blanks)}
            for m in exercise.misconceptions:
                variants[f"m:{m.id}"] = bl.splice(source, blanks, m.blank, m.fill)
            variants.update(exercise.kind_spec.trusted_variants(exercise))
            located = instrument.locate(variants["reference"], source, blanks) if blanks else None
            sites = {"reference": located.sites} if located and located.sites else {}
            result = self._run(RUN_TRUSTED, {"check": check, "variants": variants, "cases": {}, "variant": variant,
                                             "sites": sites}, exercise, trusted=True)
            if not result.ok and result.error_kind == "timeout":
                result.error_message = _timed_out(result, exercise, "en")
            if not result.ok:
                raise GradingError(f"{exercise.id}: the reference run failed ({result.error_kind}): "
                                   f"{result.error_message or ''} {result.stdout[-2000:]}".strip())
            raw = result.value
            records = (raw.get("variants", {}).get("reference") or {}).pop("records", None) \
                if isinstance(raw, dict) else None
            recorded, raw["judged"] = self._self_check(exercise, records or [])
            raw["recorded"] = recorded or []
            run = self._parse_trusted(exercise, raw)
            if recorded is None:
                return run  # its judging job failed twice: kept nowhere, so the next check tries again
            self._write_cache(exercise, key, raw)
        else:
            run = self._parse_trusted(exercise, raw)
        with self._lock:
            self._trusted[(exercise.id, variant)] = (key, run)
            self._trusted.move_to_end((exercise.id, variant))
            while len(self._trusted) > MEMORY_CACHE:
                self._trusted.popitem(last=False)
        return run

    def reference_reproducible(self, exercise: Exercise) -> list[str]:
        """The names of the cases whose reference values change between two runs of the reference in
        one process (an unseeded random input, say): such a case cannot grade anyone. Uncached."""
        check = self._check_source(exercise)
        ref = bl.reference(exercise.solution_source, self.blanks(exercise))
        result = self._run(RUN_TRUSTED, {"check": check, "variants": {"first": ref, "again": ref}, "cases": {}},
                           exercise, trusted=True)
        if not result.ok:
            raise GradingError(f"{exercise.id}: the reference run failed ({result.error_kind}): "
                               f"{result.error_message or ''}")
        names = [m["name"] for m in result.value["meta"]]
        runs = []
        for key in ("first", "again"):
            decoded, problem = _decode_cases(result.value["variants"][key]["cases"], names)
            if problem:
                raise GradingError(f"{exercise.id}: {problem}")
            runs.append(decoded)
        return [n for n in names if not _same_behaviour(runs[0], runs[1], [n], rtol=1e-6, atol=1e-7)]

    def _parse_trusted(self, exercise: Exercise, raw: dict) -> TrustedRun:
        meta = raw["meta"]
        names = [m["name"] for m in meta]
        ref = raw["variants"]["reference"]
        if ref["load_error"]:
            raise GradingError(f"{exercise.id}: the reference does not load: {ref['load_error']}")
        expected, problem = _decode_cases(ref["cases"], names)
        if problem:
            raise GradingError(f"{exercise.id}: {problem}")
        by_name = {m["name"]: m for m in meta}
        for name, r in expected.items():
            if r.error is not None and not by_name[name]["predicate"]:
                raise GradingError(f"the reference solution fails case {name!r}: {r.error}")
        miscs: dict[str, dict[str, CaseResult] | None] = {}
        for m in exercise.misconceptions:
            res = raw["variants"].get(f"m:{m.id}")
            if res is None or res["load_error"]:
                miscs[m.id] = None
                continue
            decoded, problem = _decode_cases(res["cases"], names)
            miscs[m.id] = None if problem else decoded
        extra: dict[str, dict[str, CaseResult] | None] = {}
        for key, res in raw["variants"].items():
            if key == "reference" or key.startswith("m:"):
                continue
            decoded, problem = ({}, "load error") if res["load_error"] else _decode_cases(res["cases"], names)
            extra[key] = None if problem else decoded
        recorded = frozenset(int(i) for i in raw.get("recorded") or ())
        judged: dict[str, dict] = raw["judged"] if isinstance(raw.get("judged"), dict) else {}
        return TrustedRun(meta=meta, expected=expected, misconceptions=miscs, variants=extra, recorded=recorded,
                          judged=judged)

    def _blank_specs(self, exercise: Exercise, indices) -> dict[str, dict]:
        return {str(b.index): {"fill": b.answer, "miscs": {m.id: m.fill for m in exercise.misconceptions
                                                          if m.blank == b.index}}
                for b in self.blanks(exercise) if b.index in indices}

    def _judge_records(self, exercise: Exercise, records: list, indices) -> list[dict] | None:
        """The reference fill (and each misconception's) evaluated on each record's scope, in a
        trusted job (``casejob.judge_blanks``); None if that job failed."""
        source, blanks = exercise.solution_source, self.blanks(exercise)
        result = self._run(JUDGE_BLANKS, {"reference": bl.reference(source, blanks),
                                          "blanks": self._blank_specs(exercise, indices),
                                          "records": records}, exercise, trusted=True)
        if not result.ok or not isinstance(result.value, dict):
            return None
        results = result.value.get("results")
        return results if isinstance(results, list) and len(results) == len(records) else None

    def _self_check(self, exercise: Exercise, records: list) -> tuple[list[int] | None, dict[str, dict]]:
        """The blanks that recording can judge: their reference fill, evaluated on the reference's
        own recorded scopes, gives back every recorded value (a scope that holds objects the
        trusted side cannot rebuild fails this, and the blank is judged by the file's cases). With
        them, those judgements by key (``_judge_key``), up to ``JUDGED_BYTES``. A judging job that
        fails is tried once more (a loaded machine can cut one short), so that no blank is left to
        the cases for want of time."""
        indices = {b.index for b in self.blanks(exercise)}
        if not records or not indices:
            return [], {}
        results = self._judge_records(exercise, records, indices) or self._judge_records(exercise, records, indices)
        if results is None:  # not kept (``_compute_trusted``): the next check tries again
            return None, {}
        rtol, atol = 1e-6, 1e-7
        recorded = sorted(i for i in indices
                          if instrument.judge(i, records, results, rtol=rtol, atol=atol).passed is True)
        needed, judged, size = self._needed(exercise), {}, 0
        for rec, res in zip(records, results):
            key = self._judge_key(rec, needed)
            if key is None or rec.get("blank") not in recorded or not isinstance(res, dict) or "unjudged" in res:
                continue
            size += len(json.dumps(res))
            if size > JUDGED_BYTES:
                break
            judged[key] = res
        return recorded, judged

    def _needed(self, exercise: Exercise) -> dict[int, frozenset[str]]:
        """Per blank, the names its fills (the reference's and its misconceptions') read or bind:
        all of a record's scope that the judging job rebuilds (``casejob.judge_blanks``)."""
        specs = self._blank_specs(exercise, {b.index for b in self.blanks(exercise)})
        return {int(i): frozenset(n for fill in [spec["fill"], *spec["miscs"].values()] for n in _names(fill))
                for i, spec in specs.items()}

    @staticmethod
    def _judge_key(rec: Any, needed: dict[int, frozenset[str]]) -> str | None:
        """What decides a record's judgement in ``casejob.judge_blanks``, hashed: its blank, the scope
        entries of the names the fills read (with torch's random state and grad mode), the names
        gradients are taken for, and whether it is a statement. Two records with one key get the
        same judgement; None for a record that is not well formed."""
        if not isinstance(rec, dict) or not isinstance(rec.get("scope"), dict) or rec.get("blank") not in needed:
            return None
        names, scope = needed[rec["blank"]], rec["scope"]
        kept = {str(k): v for k, v in scope.items() if k in names or k in ("__torch_rng__", "__torch_grad__")}
        vjp = sorted(set(rec["vjp"]) & names) if isinstance(rec.get("vjp"), dict) else []
        try:
            body = json.dumps([rec["blank"], kept, vjp, isinstance(rec.get("after"), dict)], sort_keys=True)
        except (TypeError, ValueError):
            return None
        return hashlib.sha256(body.encode()).hexdigest()

    def _cache_file(self, exercise: Exercise, key: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in exercise.id)
        return _cache_dir() / f"{safe}-{key}.json"

    def _read_cache(self, exercise: Exercise, key: str) -> dict | None:
        if not self._cache:
            return None
        try:
            return json.loads(self._cache_file(exercise, key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def _write_cache(self, exercise: Exercise, key: str, raw: dict) -> None:
        if not self._cache:
            return
        path = self._cache_file(exercise, key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(raw), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            return  # a read-only home only costs a recomputation next time
        _evict(path, key)

    # -- grading ----------------------------------------------------------------------------
    def check(self, exercise_id: str, code: str | None = None, *, fills: list[str] | None = None,
              lang: str = "en", run_main: bool = True, quick: bool = False, variant: int | None = None) -> Verdict:
        """Grade a whole file (``code``) or one fill per blank (``fills``). ``quick=True`` leaves out
        the whole-file-only cases (``scope="full"``, e.g. a training run): the verdict then covers
        the per-blank cases alone, for fast feedback while typing and for proving misconceptions.
        ``variant`` > 0 draws fresh random inputs (``checks.fresh``) for the learner, the splices and
        the reference alike: a review's re-test on inputs the learner has not seen (folded into
        ``MAX_VARIANTS`` draws); None (the default) draws one at random when ``fresh_inputs`` is on
        and the exercise has fresh inputs, else 0."""
        if variant is not None and (not isinstance(variant, int) or isinstance(variant, bool) or variant < 0):
            raise ValueError(f"variant: expected an int >= 0, got {variant!r}")
        exercise = self.pack.get(exercise_id)
        if not exercise.kind_spec.graded_as_file:
            raise PackError(f"exercise: {exercise_id!r} is a {exercise.kind}; answer it with `alignlings quiz`")
        sub = self.submission(exercise, code, fills)
        if variant is None:
            fresh = self.fresh_inputs and "fresh(" in self._check_source(exercise)
            variant = random.randrange(MAX_VARIANTS) if fresh else 0
        variant = fold_variant(variant)
        with self._session(exercise):
            return self._check(exercise, sub, lang, run_main, quick, variant)

    @contextlib.contextmanager
    def _session(self, exercise: Exercise):
        """Without a warm server, one check's jobs (the learner's file, its splices, a first trusted
        run) share a fork server started for this check alone: torch is imported once, not per job.
        With fork_server=False each job gets a fresh interpreter instead."""
        if self._warm is not None or not self._fork_server_per_check or \
                getattr(self._session_state, "server", None) is not None:
            yield
            return
        server = self._fork_server([exercise], warm_up=False)
        self._session_state.server = server
        try:
            yield
        finally:
            self._session_state.server = None
            server.close()

    def _check(self, exercise: Exercise, sub: Submission, lang: str, run_main: bool,
               quick: bool = False, variant: int = 0) -> Verdict:
        source, blanks = exercise.solution_source, self.blanks(exercise)
        started = time.perf_counter()
        check = self._check_source(exercise)
        located = sub.located if sub.located is not None else instrument.locate(sub.code, source, blanks)
        if located is not None:  # found by statement shape, whatever the file's formatting
            sub = Submission(code=sub.code, fills={i: located.fills.get(i) or sub.fills.get(i)
                                                   for i in set(sub.fills) | set(located.fills)})
        trusted = self.trusted(exercise, variant)
        sited = {s["index"] for s in (located.sites if located else [])}
        skipped, recorded, unjudged, syntax = {}, set(), set(), {}
        for b in blanks:
            fill = sub.fills.get(b.index)
            if fill is None or fill == bl.PLACEHOLDER:
                continue
            if _same_code(fill, b.answer):
                skipped[b.index] = True  # textually the reference: no need to judge it
                continue
            # a fill that does not parse is told here, from our own compile of it in place (never
            # run): no job, and the parser's words instead of anything a job could have made up
            syntax[b.index] = _syntax_error(bl.splice(source, blanks, b.index, fill))
            if syntax[b.index] is not None:
                continue
            if b.index in trusted.recorded and b.index in sited:
                recorded.add(b.index)  # judged in the learner's own run (``instrument``)
            else:
                unjudged.add(b.index)  # not found in the file, or a blank recording cannot judge
        blank_names = [m["name"] for m in trusted.blank_cases()]
        names = blank_names if quick else trusted.names
        sites = [s for s in (located.sites if located else []) if s["index"] in recorded]
        # the learner's file is the only code that runs on the learner's behalf: no reference text
        # is ever spliced into a job that holds learner code (issue 29)
        learner = self._run(RUN_CASES, {"check": check, "code": sub.code, "cases": names, "run_main": run_main,
                                        "variant": variant, "sites": sites}, exercise)
        records = learner.value.pop("records", None) if learner.ok and isinstance(learner.value, dict) else None
        verdict = self._judge_learner(exercise, trusted, learner, check, lang, names, variant)
        own = verdict.pop("_values", {})
        blank_verdicts = self._judge_recorded(exercise, trusted, records, recorded, verdict)
        blank_verdicts.update(self._by_cases(unjudged, verdict))
        for i, entry in blank_verdicts.items():  # judged by the cases: a known mistake by its behaviour
            if entry["passed"] is False and entry["misconception"] is None and entry["failed_case"] is None:
                named = self._misconception_by_behaviour(exercise, trusted, own, i, blank_names)
                if named is not None:
                    entry.update(misconception=named, error=None)
        blank_verdicts.update({i: {"passed": False, "load_error": text, "misconception": None, "failed_case": None,
                                   "error": None} for i, text in syntax.items() if text is not None})
        verdict["blanks"] = self._blank_entries(exercise, blanks, sub, skipped, blank_verdicts, verdict, lang)
        # a verdict never contradicts itself: every blank that was found must be right as well
        verdict["passed"] = bool(verdict["passed"]) and all(
            b["passed"] is True or (b["passed"] is None and b["fill"] is None) for b in verdict["blanks"])
        verdict["variant"] = variant
        # the kind's own entries (a bug drill: which lines changed, the wrong fix it matches, the story)
        exercise.kind_spec.annotate(exercise, trusted, learner, sub.code, verdict, lang, names)
        verdict["seconds"] = round(time.perf_counter() - started, 4)
        return verdict  # type: ignore[return-value]  # built as a plain dict, the Verdict's JSON form

    def _judge_recorded(self, exercise: Exercise, trusted: TrustedRun, records: Any, indices: set[int],
                        verdict: dict) -> dict[int, dict]:
        """Per-blank verdicts of the recorded blanks, from the learner's own run: each occurrence's
        value against the reference fill evaluated on the learner's scope there (trusted job)."""
        if not indices:
            return {}
        out: dict[int, dict] = {}
        error = (verdict.get("error") or {}).get("kind")
        if not isinstance(records, list) or not records:
            return self._by_cases(indices, verdict, "not reached")  # an earlier error: the cases decide
        records = records[:4000]
        results = self._judged(exercise, trusted, records, indices)
        meta = {m["name"]: m for m in trusted.meta}
        rtol = max([1e-4] + [m["rtol"] for m in trusted.blank_cases()])
        atol = max([1e-5] + [m["atol"] for m in trusted.blank_cases()])
        visible = frozenset(m["name"] for m in trusted.meta if m["kind"] == "visible")
        for i in indices:
            j = instrument.judge(i, records, results, rtol=rtol, atol=atol, visible=visible)
            entry: dict[str, Any] = {"passed": j.passed, "load_error": None, "misconception": j.misconception,
                                     "failed_case": None, "error": None}
            if j.passed is None:  # never reached, or a scope that cannot be judged: the cases decide
                cases_ok = bool(verdict.get("cases")) and all(c["passed"] for c in verdict["cases"])
                entry.update(passed=cases_ok, error=None if cases_ok or error is None else error)
                if not cases_ok and error is None:
                    entry["error"] = "not judged"
            elif j.failed is not None:
                m = meta.get(str(j.failed.get("case"))) or {"name": str(j.failed.get("case")), "kind": "hidden"}
                diff = j.failed.get("diff")
                if m.get("kind") != "visible":
                    diff = vals.redact(diff)
                entry["failed_case"] = {"name": m["name"], "label": m.get("label") or {}, "kind": m["kind"],
                                        "passed": False, "error": j.failed.get("error"), "diff": diff,
                                        "detail": None, "note": m.get("note") or None}
            out[i] = entry
        return out

    def _judged(self, exercise: Exercise, trusted: TrustedRun, records: list, indices: set[int]) -> list:
        """The trusted judgement of each record: the reference's own where the record's key matches
        one of its records (a blank whose scope is the reference's, as when every earlier blank is
        right: no job), the rest from one judging job (``_judge_records``)."""
        needed = self._needed(exercise) if trusted.judged else {}
        results: list[Any] = [trusted.judged.get(self._judge_key(r, needed) or "") if needed else None
                              for r in records]
        missing = [i for i, r in enumerate(results) if r is None]
        if missing:
            fresh = self._judge_records(exercise, [records[i] for i in missing], indices) \
                or [{"unjudged": "job"}] * len(missing)
            for i, res in zip(missing, fresh):
                results[i] = res
        return results

    @staticmethod
    def _misconception_by_behaviour(exercise: Exercise, trusted: TrustedRun, own: dict, index: int,
                                    names: list[str]) -> str | None:
        """The misconception of blank ``index`` whose known behaviour (its fill in the reference, run
        once on the trusted side) the learner's whole file shows on every per-blank case: how a
        mistake is named when its blank is judged by the cases, e.g. one that fails before the blank
        is reached (an assignment that makes a name local to its function)."""
        names = [n for n in names if n in own]
        for m in exercise.misconceptions:
            behaviour = trusted.misconceptions.get(m.id)
            if m.blank == index and names and behaviour is not None and all(n in behaviour for n in names) \
                    and _same_behaviour(own, behaviour, names):
                return m.id
        return None

    @staticmethod
    def _by_cases(indices: set[int], verdict: dict, why: str = "not judged") -> dict[int, dict]:
        """Blanks judged by the file's cases alone: a blank the learner's run never reached, or one
        that recording cannot judge (not found in the file, or a scope the trusted side cannot
        rebuild: ``dev check`` names such blanks to the pack's author). Right when every case
        passed; otherwise wrong without a case or misconception of its own, saying why."""
        cases_ok = bool(verdict.get("cases")) and all(c["passed"] for c in verdict["cases"])
        error = (verdict.get("error") or {}).get("kind")
        return {i: {"passed": cases_ok, "load_error": None, "misconception": None, "failed_case": None,
                    "error": None if cases_ok else (error or why)} for i in indices}

    def _judge_learner(self, exercise: Exercise, trusted: TrustedRun, result, check: str, lang: str,
                       names: list[str], variant: int = 0) -> dict:
        verdict: dict[str, Any] = {"exercise": exercise.id, "passed": False, "blanks": [], "cases": [],
                                   "error": None, "isolation": result.isolation, "stdout": result.stdout or ""}
        if not result.ok:
            message = result.error_message or ""
            if result.error_kind == "timeout":
                message = _timed_out(result, exercise, lang)
            elif result.error_kind == "stopped":
                message = msg("stopped", lang)
            verdict["error"] = {"kind": result.error_kind or "crashed", "message": message}
            return verdict
        value = result.value
        if not isinstance(value, dict) or set(value) != {"load_error", "cases", "stdout"}:
            verdict["error"] = {"kind": "forbidden", "message": msg("bad_report", lang)}
            return verdict
        if value.get("stdout"):
            verdict["stdout"] = str(value["stdout"])[:8000]
        if value["load_error"]:
            text = str(value["load_error"])[:4000]
            if text.startswith(TIMED_OUT):
                verdict["error"] = {"kind": "timeout", "message": msg("timed_out", lang,
                                                                      seconds=_seconds(_ran_for(result, exercise)))}
            else:
                verdict["error"] = {"kind": "exception", "message": text}
            return verdict
        got, problem = _decode_cases(value["cases"], names)
        if problem:
            verdict["error"] = {"kind": "forbidden", "message": msg("bad_report", lang) + f" ({problem})"}
            return verdict
        verdict["_values"] = got  # for levels' misconceptions (``levels``); not part of the verdict
        judged = self._predicates(exercise, check, trusted, value["cases"], got, names, variant)
        budget = _seconds(_ran_for(result, exercise))
        for m in (m for m in trusted.meta if m["name"] in got):
            r = self._case_result(m, got[m["name"]], trusted.expected[m["name"]], judged.get(m["name"]))
            r["seconds"] = budget
            verdict["cases"].append({"name": m["name"], "label": m.get("label") or {}, "kind": m["kind"],
                                     "passed": r["passed"], "message": describe_case(r, lang)})
        verdict["passed"] = bool(verdict["cases"]) and all(c["passed"] for c in verdict["cases"])
        return verdict

    def _predicates(self, exercise: Exercise, check: str, trusted: TrustedRun, raw: dict,
                    got: dict[str, CaseResult], names: list[str], variant: int = 0) -> dict[str, list]:
        """The ``expect`` predicates of these cases, judged in a trusted job on the reported values
        (the plain wire form, re-decoded there): {name: [passed, detail]}."""
        meta = {m["name"]: m for m in trusted.meta}
        values = {n: raw[n]["value"] for n in names if meta[n]["predicate"] and got[n].error is None}
        if not values:
            return {}
        pr = self._run(JUDGE_PREDICATES, {"check": check, "values": values, "variant": variant}, exercise,
                       trusted=True)
        if pr.ok and isinstance(pr.value, dict):
            return pr.value
        return {n: [False, f"the check could not judge this value: {pr.error_message}"] for n in values}

    @staticmethod
    def _case_result(meta: dict, got: CaseResult, expected: CaseResult, judged: list | None) -> dict:
        """One case judged. Numbers reach the learner only for visible cases: a hidden or edge case's
        diff says what kind of difference it is (``values.redact``), so its expected values cannot be
        read back check by check."""
        result: dict[str, Any] = {"name": meta["name"], "label": meta.get("label") or {}, "kind": meta["kind"],
                                  "passed": False, "error": got.error, "diff": None, "detail": None,
                                  "note": meta.get("note") or None}
        if got.error is not None:
            if got.error.startswith(TIMED_OUT):
                result["timed_out"] = True
            elif got.error.startswith(NOT_RUN):
                result["not_run"] = True
            return result
        if meta["predicate"]:
            passed, detail = (judged or [False, "not judged"])[:2]
            return result | {"passed": bool(passed), "detail": detail}
        diff = vals.compare(expected.value, got.value, rtol=meta["rtol"], atol=meta["atol"],
                            numbers=not meta.get("tensor", False))
        if meta["kind"] != "visible":
            diff = vals.redact(diff)
        return result | {"passed": diff is None, "diff": diff}

    def _passes(self, exercise: Exercise, trusted: TrustedRun, result, names: list[str]) -> bool:
        """Whether a whole file's job (a cloze answer, say) passed every case of ``names``."""
        if not result.ok or not isinstance(result.value, dict) or result.value.get("load_error"):
            return False
        got, problem = _decode_cases(result.value.get("cases"), names)
        if problem:
            return False
        meta = {m["name"]: m for m in trusted.meta}
        judged = self._predicates(exercise, self._check_source(exercise), trusted, result.value["cases"], got, names)
        return all(self._case_result(meta[n], got[n], trusted.expected[n], judged.get(n))["passed"] for n in names)

    def _blank_entries(self, exercise: Exercise, blanks, sub: Submission, skipped: dict, results: dict,
                       verdict: dict, lang: str) -> list[dict]:
        miscs = {m.id: m for m in exercise.misconceptions}
        entries = []
        for b in blanks:
            fill = sub.fills.get(b.index)
            entry = {"index": b.index, "name": b.name, "fill": fill, "passed": False, "message": "",
                     "misconception": None, "diff": None}
            res = results.get(b.index)
            if fill is None:
                entry.update(passed=None, message=msg("not_found", lang))
            elif fill == bl.PLACEHOLDER:
                entry["message"] = msg("empty", lang)
            elif skipped.get(b.index):
                entry.update(passed=True, message=msg("correct", lang))
            elif res is not None and res["error"] == "timeout":
                entry["message"] = msg("blank_timed_out", lang, seconds=res["seconds"])
            elif res is not None and res["error"] in ("not reached", "not judged"):
                entry.update(passed=None, message=msg("blank_not_judged", lang))
            elif res is None or res["error"]:
                reason = (res or {}).get("error") or (verdict["error"] or {}).get("kind", "error")
                entry.update(passed=None, message=msg("not_checked", lang, reason=reason))
            elif res["passed"]:
                entry.update(passed=True, message=msg("correct", lang))
            elif res["load_error"]:
                entry["message"] = msg("load_error", lang, error=res["load_error"])
            elif res["misconception"] in miscs:
                m = miscs[res["misconception"]]
                entry.update(misconception=m.id, message=m.feedback.get(lang) or m.feedback.get("en", ""))
                entry["diff"] = (res.get("failed_case") or {}).get("diff")
            else:
                failed = res.get("failed_case") or {}
                entry.update(message=describe_case(failed, lang) if failed else "", diff=failed.get("diff"))
            entries.append(entry)
        return entries

    def behaves_like_reference(self, exercise_id: str, variants: dict[str, str]) -> dict[str, bool]:
        """For each variant of the exercise's file (key -> full source; untrusted, e.g. a cloze
        answer), whether it passes every case that per-blank checks use, i.e. behaves like the
        reference. Each variant runs in a job of its own; the comparison happens here."""
        exercise = self.pack.get(exercise_id)
        with self._session(exercise):
            return self._behaves(exercise, variants)

    def _behaves(self, exercise: Exercise, variants: dict[str, str]) -> dict[str, bool]:
        trusted = self.trusted(exercise)
        check = self._check_source(exercise)
        names = [m["name"] for m in trusted.blank_cases()]
        futures = {key: self._pool.submit(self._run, RUN_CASES, {"check": check, "code": code, "cases": names,
                                                                  "run_main": False}, exercise)
                   for key, code in variants.items()}
        out = {}
        for key, fut in futures.items():
            out[key] = self._passes(exercise, trusted, fut.result(), names)
        return out

    def _limits(self, exercise: Exercise, trusted: bool = False, variants: int = 1):
        """(the job's Limits, the seconds its cases may use).

        Two separate limits. CPU time (what a runaway fill burns) is the exercise's timeout scaled
        by the calibrated speed of this machine only (``machine_speed``), never by its current
        load, with CPU_MARGIN and the job's start: a loop without end is stopped near the stated
        limit however busy the machine is. Wall time is generous for a right answer on a busy
        machine: the timeout scaled by speed and load (``machine_slowness``). Both count once per
        variant a trusted job runs, plus the job's start (an interpreter and torch on the cold
        path)."""
        from alignlings.grading.sandbox import Limits

        speed, slow = machine_speed(), machine_slowness()
        cases = exercise.timeout * slow
        warm = self._warm is not None or self._session_state.server is not None
        runs = max(3, variants) if trusted else 1
        wall = cases * runs + (2.0 if warm else 8.0) * slow
        cpu = exercise.timeout * speed * runs * CPU_MARGIN + (1.0 if warm else 4.0) * speed
        return Limits(wall_seconds=wall, cpu_seconds=math.ceil(cpu)), cases

    def _run(self, target: str, payload: dict, exercise: Exercise, *, trusted: bool = False):
        from alignlings.grading.sandbox import STOP, run_job

        if trusted and STOP.get() is not None:  # reference values are shared: one learner's Stop never ends them
            return contextvars.copy_context().run(self._run_unstoppable, target, payload, exercise)
        limits, cases = self._limits(exercise, trusted, len(payload.get("variants") or ()) or 1)
        payload = dict(payload, case_seconds=cases)
        server = self._warm or self._session_state.server
        if server is not None:
            result = server.run(target, payload, limits=limits)
        else:
            result = run_job(target, payload, limits=limits, isolation=self.isolation)
        result.case_seconds = cases  # the limit it ran under, for "timed out after N s"
        result.cpu_limit = limits.cpu_seconds  # for "used more than N s of CPU time"
        return result

    def _run_unstoppable(self, target: str, payload: dict, exercise: Exercise):
        from alignlings.grading.sandbox import STOP

        STOP.set(None)  # in this copied context only
        return self._run(target, payload, exercise, trusted=True)


def template_for(exercise: Exercise, lang: str = "en") -> str:
    """The learner's template in ``lang``: generated from solution.py, never stored (a ``bug``
    drill's is its buggy.py)."""
    return exercise.kind_spec.learner_file(exercise, lang)


def solution_for(exercise: Exercise, lang: str = "en") -> str:
    """The reference solution as the learner is shown it (a ``bug`` drill's: the fixed file)."""
    return exercise.kind_spec.solution_file(exercise, lang)
