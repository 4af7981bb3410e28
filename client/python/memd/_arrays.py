"""Buffer.numpy(), Buffer.torch() and Client.create_array(), over the layout
rules of memd._layout. numpy and torch are imported only when used."""

from __future__ import annotations

from typing import Any, Optional

from . import _layout


def numpy(buf: Any, dtype: Any = None, shape: Any = None):
    import numpy as np

    layout = _layout.resolve(buf.attrs, buf.size, dtype, shape)
    if layout.dtype.typestr is None:
        raise ValueError(f"buffer {buf.name!r}: {layout.dtype.name} has no numpy dtype; "
                         "pass dtype= (e.g. 'uint16'), or use torch()")
    # Through a memoryview, which the array keeps as its base: np.frombuffer
    # would let go of a view of the Buffer itself at once (see Buffer).
    view = memoryview(buf)
    array = np.frombuffer(view, dtype=np.dtype(layout.dtype.typestr), count=layout.count)
    return array.reshape(layout.shape)


def torch(buf: Any, dtype: Any = None, shape: Any = None, copy: bool = False):
    import torch as _torch

    if buf.readonly:
        if not copy:
            raise BufferError(
                f"buffer {buf.name!r} is read-only ({'sealed' if buf.writable else 'a read lease'})"
                " and torch tensors are always writable: pass copy=True for a copy, or use "
                "numpy() / np.asarray() for a read-only zero-copy view")
        if buf.location.startswith("device:"):
            raise BufferError(f"buffer {buf.name!r}: copy=True copies host buffers only")
        layout = _layout.resolve(buf.attrs, buf.size, dtype, shape)
        if layout.dtype.name == "bfloat16":
            # numpy has no bfloat16 and torch 1.13 takes no uint16 array:
            # the bits travel as int16, which torch then reads as bfloat16.
            words = numpy(buf, "int16", layout.shape).copy()
            return _torch.from_numpy(words).view(_torch.bfloat16)
        return _torch.from_numpy(numpy(buf, layout.dtype, layout.shape).copy())
    # A legacy capsule: what every torch version takes.
    return _torch.utils.dlpack.from_dlpack(buf._dlpack(dtype, shape))


def create_array(client: Any, name: str, shape: Any, dtype: Any, *,
                 attrs: Optional[dict] = None, **kwargs: Any):
    dt = _layout.parse_dtype(dtype)
    dims = _layout.parse_shape(shape)
    merged = dict(attrs or {})
    merged["dtype"] = dt.name
    merged["shape"] = ",".join(str(d) for d in dims)
    nbytes = _layout.Layout(dt, dims).nbytes
    return client.create(name, nbytes, attrs=merged, **kwargs)
