"""Case values across the sandbox boundary: a plain wire format, and comparison on the trusted side.

A job (learner code, a splice, the reference) returns each case's value *encoded*: JSON with every
tensor as ``{"__tensor__": dtype, "shape": [...], "npy": base64}`` where ``npy`` is the bytes of
``numpy.save`` (plain numbers, never pickled objects). The trusted side decodes with
``allow_pickle=False``, so nothing a job returns can run code or carry behaviour (a tensor subclass
arrives as a plain array; an object with a clever ``__eq__`` arrives as its ``repr``).

``encode`` runs in jobs and imports torch lazily; ``decode`` and ``compare`` need only numpy, so the
process that judges never has to import torch.
"""

from __future__ import annotations

import base64
import functools
import io
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

MAX_DEPTH = 32
_TENSOR = "__tensor__"
_TUPLE = "__tuple__"
_REPR = "__repr__"
_NONFINITE = "__float__"  # JSON has no inf/nan


# -- job side -------------------------------------------------------------------------------------
def encode(value: Any, depth: int = 0) -> Any:
    """A JSON-able form of a case's value (tensors, numbers, bools, str, None, and containers)."""
    if depth > MAX_DEPTH:
        raise ValueError("value: nested deeper than 32 levels")
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {_NONFINITE: repr(value)}
    torch = _torch()
    if torch is not None and isinstance(value, torch.Tensor):
        t = torch.Tensor.detach(value)
        t = torch.Tensor.cpu(t)
        dtype = str(t.dtype).replace("torch.", "")
        if t.dtype in (torch.bfloat16, torch.float16):
            t = torch.Tensor.float(t)
        array = np.array(torch.Tensor.numpy(t), copy=True, order="C")  # a plain copy: no subclass survives
        return {_TENSOR: dtype, "shape": list(t.shape), "npy": base64.b64encode(_npy(array)).decode()}
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        return encode(float(value) if np.ndim(value) == 0 and np.issubdtype(np.asarray(value).dtype, np.floating)
                      else np.asarray(value).tolist(), depth + 1)
    if isinstance(value, dict):
        return {"__dict__": [[str(k), encode(v, depth + 1)] for k, v in value.items()]}
    if isinstance(value, tuple):
        return {_TUPLE: [encode(v, depth + 1) for v in value]}
    if isinstance(value, list):
        return [encode(v, depth + 1) for v in value]
    return {_REPR: repr(value)[:200]}


_NPY_MAGIC = b"\x93NUMPY\x01\x00"
_NPY_DTYPES = frozenset(("<f2", "<f4", "<f8", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "|b1"))
"""Array types the fast paths below write and read; anything else goes through numpy's own."""
_NPY_HEADER = re.compile(rb"\{'descr': '([<|][a-z][0-9])', 'fortran_order': False, 'shape': \(((?:[0-9]+, ?)*[0-9]*)\), \} *\n")


def _npy(array: np.ndarray) -> bytes:
    """``numpy.save``'s bytes (format 1.0) for a C-ordered array, written directly: the header
    numpy writes (padded to 64 bytes), then the data; numpy.save itself for any other type."""
    descr = array.dtype.str
    if descr not in _NPY_DTYPES or not array.flags.c_contiguous:
        buf = io.BytesIO()
        np.save(buf, array, allow_pickle=False)
        return buf.getvalue()
    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple(int(n) for n in array.shape)!r}, }}"
    pad = 64 - (len(_NPY_MAGIC) + 2 + len(text) + 1) % 64
    header = (text + " " * (pad % 64) + "\n").encode("latin1")
    return _NPY_MAGIC + len(header).to_bytes(2, "little") + header + array.tobytes()


def _from_npy(data: bytes) -> np.ndarray:
    """An array from ``numpy.save`` bytes. The headers ``_npy`` writes (plain numbers, C order) are
    read directly, strictly (a pattern, the exact byte count); anything else goes to numpy.load,
    without pickles."""
    if data[:8] == _NPY_MAGIC and len(data) >= 10:
        size = int.from_bytes(data[8:10], "little")
        m = _NPY_HEADER.fullmatch(data[10:10 + size])
        if m is not None and m.group(1).decode() in _NPY_DTYPES:
            dtype = np.dtype(m.group(1).decode())
            shape = tuple(int(n) for n in m.group(2).decode().replace(" ", "").split(",") if n)
            count = math.prod(shape)
            body = data[10 + size:]
            if len(body) != count * dtype.itemsize:
                raise ValueError("npy data does not match its header")
            return np.frombuffer(body, dtype=dtype, count=count).reshape(shape).copy()
    return np.load(io.BytesIO(data), allow_pickle=False)


def _torch():
    import sys

    return sys.modules.get("torch")


# -- trusted side ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TensorValue:
    """A tensor as it came back from a job: its torch dtype name and a numpy array."""

    dtype: str
    array: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)


@dataclass(frozen=True)
class ReprValue:
    """A value of a type cases may not return, known only by its repr."""

    text: str


class DecodeError(ValueError):
    pass


def decode(data: Any, depth: int = 0) -> Any:
    """The value ``encode`` produced, from untrusted JSON: raises DecodeError on anything else."""
    if depth > MAX_DEPTH:
        raise DecodeError("nested deeper than 32 levels")
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [decode(v, depth + 1) for v in data]
    if not isinstance(data, dict) or len(data) == 0:
        raise DecodeError(f"unexpected {type(data).__name__}")
    if _TENSOR in data:
        dtype, shape, npy = data.get(_TENSOR), data.get("shape"), data.get("npy")
        if not isinstance(dtype, str) or not isinstance(shape, list) or not isinstance(npy, str) \
                or not all(isinstance(n, int) and not isinstance(n, bool) for n in shape):
            raise DecodeError("malformed tensor")
        return _tensor(dtype, tuple(shape), npy) if len(npy) <= _CACHED_NPY else _tensor.__wrapped__(dtype, tuple(shape), npy)
    if _TUPLE in data and isinstance(data[_TUPLE], list):
        return tuple(decode(v, depth + 1) for v in data[_TUPLE])
    if "__dict__" in data and isinstance(data["__dict__"], list):
        out = {}
        for item in data["__dict__"]:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
                raise DecodeError("malformed dict")
            out[item[0]] = decode(item[1], depth + 1)
        return out
    if _NONFINITE in data and data[_NONFINITE] in ("inf", "-inf", "nan"):
        return float(data[_NONFINITE])
    if _REPR in data and isinstance(data[_REPR], str):
        return ReprValue(data[_REPR][:200])
    raise DecodeError("unknown value form")


_CACHED_NPY = 64 << 10
"""Tensors up to this size on the wire are decoded once (``_tensor``): a trusted run's values and
judgements are read again at every check."""


@functools.lru_cache(maxsize=4096)
def _tensor(dtype: str, shape: tuple, npy: str) -> TensorValue:
    """A tensor entry decoded, its array read-only (it may be shared by later checks)."""
    try:
        array = _from_npy(base64.b64decode(npy, validate=True))
    except Exception as exc:  # noqa: BLE001 - any malformed bytes are the job's fault
        raise DecodeError(f"malformed tensor data ({type(exc).__name__})") from None
    if array.shape != shape or array.dtype.kind not in "biuf":
        raise DecodeError("tensor data does not match its header")
    array.flags.writeable = False
    return TensorValue(dtype, array)


def to_torch(value: Any) -> Any:
    """Decoded values as torch objects (for a check's ``expect`` predicate, in a trusted job)."""
    import torch

    if isinstance(value, TensorValue):
        t = torch.from_numpy(np.array(value.array))
        return t.to(getattr(torch, value.dtype)) if hasattr(torch, value.dtype) else t
    if isinstance(value, tuple):
        return tuple(to_torch(v) for v in value)
    if isinstance(value, list):
        return [to_torch(v) for v in value]
    if isinstance(value, dict):
        return {k: to_torch(v) for k, v in value.items()}
    if isinstance(value, ReprValue):
        return value.text
    return value


def _fmt(x: float) -> float | str:
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x


def _item(a: np.ndarray, idx: tuple) -> Any:
    v = a[idx]
    return _fmt(float(v)) if a.dtype.kind == "f" else (bool(v) if a.dtype.kind == "b" else int(v))


def compare(expected: Any, got: Any, *, rtol: float = 1e-5, atol: float = 1e-6, equal_nan: bool = False,
            path: str = "", numbers: bool = True) -> dict | None:
    """None when ``got`` matches ``expected`` (both decoded); otherwise a JSON-able diff.

    Diff keys: ``path`` (where in a nested value), ``reason`` ("type", "shape", "dtype", "value",
    "nonfinite", "length", "keys"), and for tensors ``expected_shape``/``got_shape``,
    ``expected_dtype``/``got_dtype``, ``shape``, ``max_abs_diff``, ``mean_abs_diff``, ``first`` (up to
    5 of ``{"index", "expected", "got"}``); for scalars ``expected``, ``got``. A value difference also
    says what kind it is without numbers (``kind``: "sign", "scale" or "error", with ``band``,
    ``larger``, ``count`` of ``size`` values; ``got_nan`` for "nonfinite"), which is all ``redact``
    keeps for cases whose values are not shown.

    ``numbers``: a Python number (``.item()``) is accepted where the value is a 0-d tensor, unless
    the case asks for a tensor (``Case(tensor=True)``); a 0-d tensor is always accepted for a number.
    """
    where = path or "value"
    if numbers and isinstance(expected, TensorValue) and expected.array.ndim == 0 and _is_number(got) \
            and (expected.array.dtype.kind == "b") == isinstance(got, bool):
        kind = expected.array.dtype.kind
        scalar = bool(expected.array) if kind == "b" else (int(expected.array) if kind in "iu" else
                                                           float(expected.array))
        return compare(scalar, got, rtol=rtol, atol=atol, equal_nan=equal_nan, path=path, numbers=numbers)
    if isinstance(expected, TensorValue):
        if not isinstance(got, TensorValue):
            return {"path": where, "reason": "type", "expected": f"tensor {expected.shape}",
                    "got": "tensor" if isinstance(got, TensorValue) else _type_name(got)}
        if got.shape != expected.shape:
            return {"path": where, "reason": "shape", "expected_shape": list(expected.shape),
                    "got_shape": list(got.shape)}
        if got.dtype != expected.dtype:
            return {"path": where, "reason": "dtype", "expected_dtype": expected.dtype, "got_dtype": got.dtype}
        e, g = expected.array, got.array
        if e is g or np.array_equal(e, g):  # the common case: the very values (NaN never equals: below)
            return None
        floating = e.dtype.kind == "f"
        if floating:
            e64, g64 = e.astype(np.float64), g.astype(np.float64)
            with np.errstate(invalid="ignore"):
                close = np.isclose(g64, e64, rtol=rtol, atol=atol, equal_nan=equal_nan)
            bad = ~close
        else:
            bad = e != g
        if not bool(bad.any()):
            return None
        diff: dict[str, Any] = {"path": where, "reason": "value", "shape": list(e.shape)}
        diff.update(_kind(e, g, bad))
        if floating:
            if bool((np.isfinite(e) & ~np.isfinite(g)).any()):
                diff["reason"] = "nonfinite"
            with np.errstate(invalid="ignore"):
                d = np.abs(g.astype(np.float64) - e.astype(np.float64))
            d = np.where(np.isnan(d), np.inf, d)
            diff["max_abs_diff"] = _fmt(float(d.max()))
            diff["mean_abs_diff"] = _fmt(float(d.mean()))
        idx = np.argwhere(bad)[:5]
        diff["first"] = [{"index": [int(i) for i in row], "expected": _item(e, tuple(row)),
                          "got": _item(g, tuple(row))} for row in idx]
        if e.ndim == 0:  # a scalar tensor: no index to show
            diff["expected"], diff["got"] = _item(e, ()), _item(g, ())
        return diff
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            return {"path": where, "reason": "keys", "expected": sorted(expected),
                    "got": sorted(got) if isinstance(got, dict) else _type_name(got)}
        for k in expected:
            sub = compare(expected[k], got[k], rtol=rtol, atol=atol, equal_nan=equal_nan, path=f"{where}[{k!r}]",
                          numbers=numbers)
            if sub:
                return sub
        return None
    if isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            return {"path": where, "reason": "length", "expected": len(expected),
                    "got": len(got) if isinstance(got, (list, tuple)) else _type_name(got)}
        for i, (a, b) in enumerate(zip(expected, got)):
            sub = compare(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan, path=f"{where}[{i}]", numbers=numbers)
            if sub:
                return sub
        return None
    if isinstance(expected, bool) or isinstance(got, bool):
        return None if expected == got and type(expected) is type(got) else {
            "path": where, "reason": "value", "expected": expected, "got": _safe(got)}
    if isinstance(expected, (int, float)):
        if isinstance(got, TensorValue) and got.array.size == 1:
            got = float(got.array.reshape(()))
        if not isinstance(got, (int, float)):
            return {"path": where, "reason": "type", "expected": type(expected).__name__, "got": _type_name(got)}
        if math.isnan(expected) and math.isnan(got) and equal_nan:
            return None
        if expected == got or (math.isfinite(got) and math.isclose(got, expected, rel_tol=rtol, abs_tol=atol)):
            return None
        what = _kind(np.array(float(expected)), np.array(float(got)), np.array(True))
        if math.isfinite(expected) and not math.isfinite(got):
            return {"path": where, "reason": "nonfinite", "expected": expected, "got": _fmt(float(got)), **what}
        if expected == got or math.isclose(got, expected, rel_tol=rtol, abs_tol=atol):
            return None
        return {"path": where, "reason": "value", "expected": _fmt(float(expected)), "got": _fmt(float(got)),
                "max_abs_diff": _fmt(abs(float(got) - float(expected))), **what}
    if isinstance(expected, ReprValue) or isinstance(got, ReprValue):
        return {"path": where, "reason": "type", "expected": _type_name(expected), "got": _type_name(got)}
    return None if expected == got else {"path": where, "reason": "value", "expected": _safe(expected),
                                         "got": _safe(got)}


def _type_name(x: Any) -> str:
    if isinstance(x, TensorValue):
        return f"tensor {x.shape}"
    if isinstance(x, ReprValue):
        return x.text[:60]
    return type(x).__name__


def _safe(x: Any) -> Any:
    if isinstance(x, (int, float, str, bool)) or x is None:
        return _fmt(x) if isinstance(x, float) else x
    return _type_name(x)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, TensorValue)


BANDS = (1e-3, 1e-2, 1e-1, 1.0)
"""Upper edges of the relative-error bands a hidden case's difference is reported in: below 0.1 %,
0.1-1 %, 1-10 %, 10-100 %, more than 100 % (index 0..4)."""


def _kind(e: np.ndarray, g: np.ndarray, bad: np.ndarray) -> dict[str, Any]:
    """What kind of difference ``got`` has from ``expected`` where ``bad``, without its numbers:
    ``kind`` "sign" (the wrong sign), "scale" (a constant factor off, ``larger`` or not) or "error"
    (``band``: the relative error's band, see BANDS), with ``count`` of ``size`` values differing;
    ``got_nan`` where a finite value came back as NaN rather than inf."""
    out: dict[str, Any] = {"count": int(np.count_nonzero(bad)), "size": int(e.size)}
    if e.dtype.kind not in "biuf" or g.dtype.kind not in "biuf" or e.dtype.kind == "b":
        return out | {"kind": "error"}  # true/false values: no size to a difference, only a count
    e64, g64 = e.astype(np.float64).ravel(), g.astype(np.float64).ravel()
    badv = np.broadcast_to(bad, e.shape).ravel()
    finite = np.isfinite(e64) & np.isfinite(g64)
    out["got_nan"] = bool((np.isfinite(e64) & np.isnan(g64)).any())
    if not finite.any():
        return out | {"kind": "error", "band": len(BANDS)}
    ef, gf = e64[finite], g64[finite]
    scale = float(np.abs(ef).max())
    with np.errstate(all="ignore"):
        rel = float(np.abs(gf - ef).max()) / scale if scale > 0 else math.inf
    band = next((i for i, edge in enumerate(BANDS) if rel < edge), len(BANDS))
    eb, gb = e64[badv & finite], g64[badv & finite]
    nonzero = (eb != 0) & (gb != 0)
    if nonzero.any() and bool((np.sign(eb[nonzero]) == -np.sign(gb[nonzero])).all()) and \
            bool(np.allclose(np.abs(gb), np.abs(eb), rtol=0.1, atol=0)):
        return out | {"kind": "sign", "band": band}
    ee = float(ef @ ef)
    if ee > 0 and band >= 1 and ef.size >= 2:  # one number is always "a factor" off: not a kind
        c = float(ef @ gf) / ee
        with np.errstate(all="ignore"):
            resid = float(np.abs(gf - c * ef).max()) / max(float(np.abs(gf).max()), 1e-30)
        if c > 0 and abs(c - 1) > 1e-2 and resid < 1e-3:
            return out | {"kind": "scale", "band": band, "larger": c > 1}
    return out | {"kind": "error", "band": band}


_SHOWN_WITHOUT_NUMBERS = ("path", "reason", "got_nan", "expected_shape", "got_shape", "expected_dtype", "got_dtype",
                          "shape")
"""What a hidden or edge case's diff keeps: differences that do not depend on how far the learner's
value is from the expected one (where in the value, shape, dtype, NaN/inf). A sign, a scale factor,
a relative-error band or how many values fall outside the tolerance each compare the learner's
value with the expected one, so each answers "is the expected value above or below mine?" and can
be used to read a hidden value back check by check (issue 29 §2)."""


def redact(diff: dict | None) -> dict | None:
    """A diff for a case whose values are not shown (hidden and edge cases): what kind of difference
    it is when that kind does not depend on the distance to the expected value, never a value, a
    band, a sign or a count. Type, length and key differences keep their names (types, lengths, the
    expected keys), which hold no numbers."""
    if diff is None:
        return None
    out = {k: diff[k] for k in _SHOWN_WITHOUT_NUMBERS if k in diff}
    if diff.get("reason") in ("type", "length", "keys"):
        out["expected"], out["got"] = diff.get("expected"), diff.get("got")
    out["redacted"] = True
    return out
