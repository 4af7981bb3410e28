"""How a buffer's bytes read as an array: its dtype and shape.

Convention (the attributes a producer gives at create): ``dtype`` is a numpy
dtype string ("float16", "float32", "<f4", "uint8", also "bfloat16"),
``shape`` comma-separated non-negative ints ("4096,4096"; "" is a scalar),
``layout`` "row-major" (the default; nothing else is supported). Without
attributes a buffer reads as uint8, one dimension, every byte.

Pure Python and numpy-free (numpy, when importable, only widens the accepted
dtype spellings), so DLPack export works without numpy.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

# DLDataTypeCode (dlpack.h). kDLBool is DLPack 0.8+.
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT, _DL_COMPLEX, _DL_BOOL = 0, 1, 2, 4, 5, 6

_MAX_DIMENSION = 2**63 - 1
_MAX_DIMENSIONS = 32  # numpy's own limit (NPY_MAXDIMS in numpy 1.24)

if sys.byteorder != "little":  # pragma: no cover - memd runs on x86-64/aarch64 LE
    raise ImportError("memd's array helpers assume a little-endian machine")


@dataclass(frozen=True)
class DType:
    name: str                 # numpy's name ("float32"); "bfloat16" has no numpy dtype.
    typestr: Optional[str]    # __array_interface__ typestr ("<f4"); None for bfloat16.
    dl_code: int              # DLDataTypeCode.
    bits: int

    @property
    def itemsize(self) -> int:
        return self.bits // 8


_DTYPES = [
    DType("bool", "|b1", _DL_BOOL, 8),
    DType("int8", "|i1", _DL_INT, 8),
    DType("int16", "<i2", _DL_INT, 16),
    DType("int32", "<i4", _DL_INT, 32),
    DType("int64", "<i8", _DL_INT, 64),
    DType("uint8", "|u1", _DL_UINT, 8),
    DType("uint16", "<u2", _DL_UINT, 16),
    DType("uint32", "<u4", _DL_UINT, 32),
    DType("uint64", "<u8", _DL_UINT, 64),
    DType("float16", "<f2", _DL_FLOAT, 16),
    DType("float32", "<f4", _DL_FLOAT, 32),
    DType("float64", "<f8", _DL_FLOAT, 64),
    DType("complex64", "<c8", _DL_COMPLEX, 64),
    DType("complex128", "<c16", _DL_COMPLEX, 128),
    DType("bfloat16", None, _DL_BFLOAT, 16),
]
_BY_NAME = {d.name: d for d in _DTYPES}
_BY_TYPESTR = {d.typestr: d for d in _DTYPES if d.typestr}
# Typestrs without the byte-order character, or with "=" (native).
for _d in list(_BY_TYPESTR.values()):
    _BY_TYPESTR[_d.typestr[1:]] = _d
    _BY_TYPESTR["=" + _d.typestr[1:]] = _d
    _BY_TYPESTR["<" + _d.typestr[1:]] = _d
    _BY_TYPESTR["|" + _d.typestr[1:]] = _d


@dataclass(frozen=True)
class Layout:
    dtype: DType
    shape: Tuple[int, ...]

    @property
    def count(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.itemsize


def parse_dtype(spec: Any) -> DType:
    """A DType from a string, a numpy dtype or scalar type, or a torch dtype.

    ValueError for anything memd cannot describe (big-endian, objects...).
    """
    if isinstance(spec, DType):
        return spec
    text = str(spec) if not isinstance(spec, str) else spec
    if text.startswith("torch."):  # str(torch.float16)
        text = text[len("torch."):]
    found = _BY_NAME.get(text) or _BY_TYPESTR.get(text)
    if found is not None:
        return found
    if text.startswith(">"):
        raise ValueError(f"dtype {text!r} is big-endian; memd arrays are little-endian")
    try:
        import numpy
    except ImportError:
        numpy = None
    if numpy is not None:
        try:
            normalized = numpy.dtype(spec if not isinstance(spec, str) else text)
        except TypeError as e:
            raise ValueError(f"dtype {text!r} is not a dtype numpy knows: {e}") from None
        if normalized.byteorder == ">":
            raise ValueError(f"dtype {text!r} is big-endian; memd arrays are little-endian")
        found = _BY_TYPESTR.get(normalized.str)
        if found is not None:
            return found
    raise ValueError(
        f"dtype {text!r} is not supported: use one of {', '.join(sorted(_BY_NAME))}")


def parse_shape(spec: Any) -> Tuple[int, ...]:
    """A shape from "4096,4096", an int, or a sequence of ints; ValueError otherwise."""
    if isinstance(spec, str):
        text = spec.strip()
        if not text:
            return ()
        parts = text.split(",")
        try:
            dims = tuple(int(p.strip(), 10) for p in parts)
        except ValueError:
            raise ValueError(
                f"shape {spec!r} is not comma-separated integers (e.g. '4096,4096')") from None
    elif isinstance(spec, int):
        dims = (spec,)
    else:
        try:
            dims = tuple(int(d) for d in spec)
        except (TypeError, ValueError):
            raise ValueError(f"shape {spec!r} is not a sequence of integers") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"shape {spec!r} has a negative dimension")
    # DLPack and numpy hold dimensions as int64; a zero elsewhere would let a
    # larger one pass the size check.
    if any(d > _MAX_DIMENSION for d in dims):
        raise ValueError(f"shape {spec!r} has a dimension over {_MAX_DIMENSION}")
    if len(dims) > _MAX_DIMENSIONS:
        raise ValueError(f"shape {spec!r} has {len(dims)} dimensions; at most {_MAX_DIMENSIONS}")
    return dims


def format_shape(shape: Any) -> str:
    """The ``shape`` attribute text for a shape ("4096,4096")."""
    return ",".join(str(d) for d in parse_shape(shape))


def resolve(attrs: Mapping[str, str], size: int, dtype: Any = None,
            shape: Any = None) -> Layout:
    """The layout to read a buffer of `size` bytes with, from explicit
    arguments first and the buffer's attributes second.

    An explicit dtype without a shape reads the whole buffer in one dimension
    (the attributes' shape belongs to the attributes' dtype). ValueError when
    the attributes are malformed, the layout is not row-major, or the shape
    needs more bytes than the buffer has.
    """
    layout = attrs.get("layout", "row-major")
    if layout != "row-major":
        raise ValueError(f"layout {layout!r} is not supported (only 'row-major')")
    dt = parse_dtype(dtype if dtype is not None else attrs.get("dtype", "uint8"))
    if shape is not None:
        dims = parse_shape(shape)
    elif dtype is None and "shape" in attrs:
        dims = parse_shape(attrs["shape"])
    else:
        dims = (size // dt.itemsize,)
    result = Layout(dt, dims)
    if result.nbytes > size:
        raise ValueError(
            f"shape {dims} of {dt.name} needs {result.nbytes} bytes "
            f"({result.count} x {dt.itemsize}); the buffer has {size}")
    return result
