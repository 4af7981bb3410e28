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

    # Zero-copy for every buffer, read-only ones included: torch has no
    # read-only tensors, and a write to memd's read-only mapping faults this
    # process, never the buffer (Buffer.torch's docstring). A legacy capsule,
    # because every torch version takes one.
    tensor = _torch.utils.dlpack.from_dlpack(
        buf._dlpack(dtype, shape, allow_read_only=True))
    # copy=True: the caller asked for a private copy, on the buffer's device.
    return tensor.clone() if copy else tensor


def create_array(client: Any, name: str, shape: Any, dtype: Any, *,
                 attrs: Optional[dict] = None, **kwargs: Any):
    dt = _layout.parse_dtype(dtype)
    dims = _layout.parse_shape(shape)
    merged = dict(attrs or {})
    merged["dtype"] = dt.name
    merged["shape"] = ",".join(str(d) for d in dims)
    nbytes = _layout.Layout(dt, dims).nbytes
    return client.create(name, nbytes, attrs=merged, **kwargs)
