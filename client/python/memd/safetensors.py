"""Model weights by name: a safetensors file loaded once per node into ONE
memd buffer, and every caller's tensors zero-copy views of it.

    import memd.safetensors
    weights = memd.safetensors.load("model.safetensors", device="cuda:0")

The first caller on the node streams the file into the buffer (through the
daemon's transfer engine for a GPU, never holding the whole file in its own
memory); every later caller, in any process the buffer's mode admits,
attaches with one open. Concurrent first callers load it once: the others
wait for the seal. The buffer's name comes from a fingerprint of the file
(its identity, size, times and header), so a changed file is loaded again,
never served from an old buffer. `memctl put --format safetensors FILE`
makes the same buffer from the shell. docs/safetensors.md is the contract
(name, contents, attributes, what is refused) this module and memctl share.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from . import _pickle
from ._errors import (AbortedError, FailedPreconditionError, InvalidArgumentError, NotFoundError,
                      OutOfRangeError, PermissionDeniedError)

__all__ = ["load", "read_header", "Header", "Tensor", "fingerprint", "buffer_name"]

# The reference implementation's limit on the header.
MAX_HEADER_BYTES = 100_000_000
MAX_DIMS = 32
# Bytes per read where host memory is read in through its mapping.
CHUNK_BYTES = 64 << 20
# How many times a caller tries again when the loader it waited for died.
_ATTEMPTS = 3

# dtype: (bytes per element, torch attribute, numpy typestr or None)
DTYPES: Dict[str, Tuple[int, str, Optional[str]]] = {
    "BOOL": (1, "bool", "|b1"), "U8": (1, "uint8", "|u1"), "I8": (1, "int8", "|i1"),
    "I16": (2, "int16", "<i2"), "U16": (2, "uint16", "<u2"), "F16": (2, "float16", "<f2"),
    "BF16": (2, "bfloat16", None), "I32": (4, "int32", "<i4"), "U32": (4, "uint32", "<u4"),
    "F32": (4, "float32", "<f4"), "F64": (8, "float64", "<f8"), "I64": (8, "int64", "<i8"),
    "U64": (8, "uint64", "<u8"), "F8_E4M3": (1, "float8_e4m3fn", None),
    "F8_E5M2": (1, "float8_e5m2", None),
}


@dataclass(frozen=True)
class Tensor:
    name: str
    dtype: str               # "F16", ...
    shape: Tuple[int, ...]
    offset: int              # Of its first byte in the file (and the buffer).
    nbytes: int


@dataclass(frozen=True)
class Header:
    header_bytes: bytes      # The N bytes of JSON, as in the file.
    tensors: Tuple[Tensor, ...]  # In the header's order.
    metadata: Dict[str, str]

    @property
    def data_offset(self) -> int:
        return 8 + len(self.header_bytes)


def _refuse(message: str) -> None:
    raise ValueError(f"safetensors: {message}")


def _no_duplicates(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    seen: Dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            _refuse(f"the header repeats the key {key!r}")
        seen[key] = value
    return seen


def _no_constant(text: str) -> None:
    _refuse(f"the header holds {text}, which is not JSON")


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _strict_text(value: Any) -> None:
    """Every string is text UTF-8 can hold (JSON's \\ud800 escapes give
    lone surrogates that it cannot)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            _refuse(f"the header holds a lone surrogate in {value!r}")
    elif isinstance(value, dict):
        for key, item in value.items():
            _strict_text(key)
            _strict_text(item)
    elif isinstance(value, list):
        for item in value:
            _strict_text(item)


def parse_header(header: bytes, file_size: int) -> Header:
    """Validates the N header bytes of a file of `file_size` bytes (see
    docs/safetensors.md "What a reader refuses"); ValueError naming the
    tensor and the numbers."""
    if b"\0" in header:
        _refuse("the header holds a NUL byte")
    try:
        text = header.decode("utf-8")
        parsed = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except RecursionError:
        _refuse("the header nests too deeply")
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        _refuse(f"the header is not UTF-8 JSON: {error}")
    if not isinstance(parsed, dict):
        _refuse("the header is not a JSON object")
    _strict_text(parsed)
    data_bytes = file_size - 8 - len(header)
    metadata = parsed.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        _refuse("__metadata__ is not an object of strings")
    tensors = []
    for name, entry in parsed.items():
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            _refuse(f"tensor {name!r}: an entry has exactly the keys dtype, shape and "
                    f"data_offsets, not {sorted(entry) if isinstance(entry, dict) else entry!r}")
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dtype not in DTYPES:
            _refuse(f"tensor {name!r}: dtype {dtype!r} is none of {', '.join(DTYPES)}")
        if (not isinstance(shape, list) or len(shape) > MAX_DIMS
                or not all(_integer(d) and d >= 0 for d in shape)):
            _refuse(f"tensor {name!r}: shape {shape!r} is not a list of at most {MAX_DIMS} "
                    "non-negative integers")
        elements = 1
        for dim in shape:
            elements *= dim
        nbytes = elements * DTYPES[dtype][0]
        if nbytes >= 2**64:
            _refuse(f"tensor {name!r}: shape {shape} of {dtype} overflows 64 bits")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(_integer(o) and o >= 0 for o in offsets)
                or offsets[0] > offsets[1]):
            _refuse(f"tensor {name!r}: data_offsets {offsets!r} are not two integers "
                    "begin <= end")
        begin, end = offsets
        if end > data_bytes:
            _refuse(f"tensor {name!r}: data_offsets end {end} is past the data "
                    f"({data_bytes} bytes)")
        if end - begin != nbytes:
            _refuse(f"tensor {name!r}: {end - begin} bytes for shape {shape} of {dtype}, "
                    f"which needs {nbytes}")
        tensors.append(Tensor(name, dtype, tuple(shape), 8 + len(header) + begin, nbytes))
    ordered = sorted((t for t in tensors if t.nbytes), key=lambda t: t.offset)
    for before, after in zip(ordered, ordered[1:]):
        if after.offset < before.offset + before.nbytes:
            _refuse(f"tensors {before.name!r} and {after.name!r} overlap")
    return Header(header, tuple(tensors), dict(metadata))


def read_header(file: Any, file_size: int) -> Header:
    """Reads and validates the header of an open binary file."""
    if file_size < 8:
        _refuse(f"the file has {file_size} bytes, fewer than the 8 of the header's length")
    file.seek(0)
    (length,) = struct.unpack("<Q", _read_exactly(file, 8))
    if length == 0 or length > MAX_HEADER_BYTES or length > file_size - 8:
        _refuse(f"header length {length} is 0, over the {MAX_HEADER_BYTES}-byte limit or past "
                f"the end of the {file_size}-byte file")
    return parse_header(_read_exactly(file, length), file_size)


def _read_exactly(file: Any, n: int) -> bytes:
    data = file.read(n)
    if len(data) != n:
        raise AbortedError(f"safetensors: the file ended after {len(data)} of {n} bytes")
    return data


def _identity(st: os.stat_result) -> Tuple[int, int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def fingerprint(st: os.stat_result, header_bytes: bytes) -> str:
    """SHA-256 (hex) of the file's identity, size, times and header."""
    digest = hashlib.sha256(b"memd-safetensors-v1\n")
    digest.update(("%d:%d:%d:%d:%d\n" % _identity(st)).encode())
    digest.update(header_bytes)
    return digest.hexdigest()


def place(location: str) -> str:
    """The name's last part for a memd location."""
    if location in ("host", "pinned"):
        return location
    if location.startswith("device:") and location[7:].isdigit():
        return f"device-{int(location[7:])}"
    raise ValueError(f"safetensors: {location!r} is not host, pinned or device:N")


def buffer_name(fingerprint_hex: str, location: str) -> str:
    return f"safetensors/{fingerprint_hex[:32]}/{place(location)}"


def attributes(st: os.stat_result, header: Header, fingerprint_hex: str,
               path: str) -> Dict[str, str]:
    base = os.fsencode(os.path.basename(path))
    shown = bytes(b if 0x20 <= b <= 0x7E else ord("?") for b in base)[:128].decode("ascii")
    return {"format": "safetensors", "safetensors.fingerprint": fingerprint_hex,
            "safetensors.file_size": str(st.st_size),
            "safetensors.mtime_ns": str(st.st_mtime_ns),
            "safetensors.header_bytes": str(len(header.header_bytes)),
            "safetensors.file": shown}


# ---- Loading ----

def _location(client: Any, device: str, framework: str) -> str:
    """memd's location for a torch-style device ("cpu", "cuda", "cuda:N")
    or a memd location ("host", "pinned", "device:N")."""
    if device in ("cpu", "host", "pinned"):
        return "host" if device == "cpu" else device
    if device.startswith("device:"):
        return device
    if device == "cuda" or device.startswith("cuda:"):
        if device == "cuda":
            import torch
            ordinal = torch.cuda.current_device()
        else:
            ordinal = int(device[5:])
        # memd numbers GPUs its own way; CUDA_VISIBLE_DEVICES renumbers them
        # for this process.
        return client.device_location(ordinal)
    raise ValueError(f"device {device!r} is none of cpu, cuda, cuda:N, host, pinned, device:N")


def _stream_in(file: Any, buf: Any, size: int) -> None:
    """The whole file into `buf` (a writable lease)."""
    try:
        # libmemd reads the file on several threads: into host memory
        # through the buffer's descriptor (no page of the mapping faults), or
        # into pinned staging of its own that memd copies to the GPU while
        # the next slices are read, as memctl put does (docs/benchmarks.md,
        # "A file into a buffer", "A file into a device buffer").
        buf.write_from_file(file, 0, size)
        return
    except OutOfRangeError as e:
        raise AbortedError(f"safetensors: the file ended early ({e})") from None
    except (FailedPreconditionError, InvalidArgumentError):
        # A GPU has no other way in: what libmemd refused, Python cannot do.
        if buf.is_device:
            raise
        # Host memory without a kept descriptor, or a file sendfile cannot
        # read: read it in through the mapping.
    file.seek(0)
    with memoryview(buf) as view:
        done = 0
        while done < size:
            n = file.readinto(view[done:min(size, done + CHUNK_BYTES)])
            if not n:
                raise AbortedError(f"safetensors: the file ended at byte {done} of {size}")
            done += n


def _check(buf: Any, header: Header, fingerprint_hex: str, file_size: int) -> None:
    attrs = buf.attrs
    if buf.size != file_size or attrs.get("safetensors.fingerprint") != fingerprint_hex:
        raise PermissionDeniedError(
            f"safetensors: buffer {buf.name!r} ({buf.size} bytes, fingerprint "
            f"{attrs.get('safetensors.fingerprint')!r}) does not hold this file ({file_size} "
            f"bytes, fingerprint {fingerprint_hex}); not serving weights from it")
    if not buf.is_device:
        with memoryview(buf) as view:
            if view[8:header.data_offset] != header.header_bytes:
                raise PermissionDeniedError(
                    f"safetensors: buffer {buf.name!r} holds another header than the file")


def _attach_or_load(client: Any, path: str, file: Any, location: str, mode: int,
                    timeout: float) -> Tuple[Any, Header]:
    st = os.fstat(file.fileno())
    header = read_header(file, st.st_size)
    fingerprint_hex = fingerprint(st, header.header_bytes)
    name = buffer_name(fingerprint_hex, location)
    me = os.geteuid()
    for attempt in range(_ATTEMPTS):
        try:
            buf = client.open_or_create(name, st.st_size, timeout=timeout, owner=me,
                                        location=location, mode=mode, persistent=True,
                                        attrs=attributes(st, header, fingerprint_hex, path),
                                        keep_descriptor=not location.startswith("device:"))
        except PermissionDeniedError:
            # Taken by another uid: root's (a pre-load at node boot) is
            # trusted; anyone else could have put other bytes there.
            owner = client.stat(name).owner_uid
            if owner != 0:
                raise PermissionDeniedError(
                    f"safetensors: buffer {name!r} for {path} is owned by uid {owner}, not "
                    f"by you (uid {me}) or root: memd will not serve weights from it") from None
            buf = client.open(name, timeout=timeout, owner=0)
        except NotFoundError:
            if attempt + 1 == _ATTEMPTS:
                raise
            continue  # The loader we waited for died: its buffer went.
        if buf.created:
            try:
                _stream_in(file, buf, st.st_size)
                now, named = os.fstat(file.fileno()), os.stat(path)
                if _identity(now) != _identity(st) or _identity(named) != _identity(st):
                    raise AbortedError(f"safetensors: {path} changed while loading")
                buf.seal()
            except BaseException:
                buf.release()  # Unsealed: the buffer goes with its last lease.
                raise
        _check(buf, header, fingerprint_hex, st.st_size)
        return buf, header
    raise AssertionError("unreachable")


def _torch_views(buf: Any, header: Header) -> Dict[str, Any]:
    import torch
    base = buf.torch(dtype="uint8", shape=(buf.size,))
    views = {}
    for t in header.tensors:
        itemsize, attr, _ = DTYPES[t.dtype]
        dtype = getattr(torch, attr, None)
        if dtype is None:
            _refuse(f"tensor {t.name!r}: this torch ({torch.__version__}) has no {attr} for "
                    f"{t.dtype}")
        if t.offset % itemsize:
            _refuse(f"tensor {t.name!r}: offset {t.offset} in the file is not a multiple of its "
                    f"{itemsize}-byte elements; torch cannot view it without a copy")
        views[t.name] = base[t.offset:t.offset + t.nbytes].view(dtype).view(t.shape)
    return views


def _numpy_views(buf: Any, header: Header) -> Dict[str, Any]:
    import numpy as np
    whole = np.asarray(buf)  # One view of the mapping; every array below shares it.
    views = {}
    for t in header.tensors:
        typestr = DTYPES[t.dtype][2]
        if typestr is None:
            _refuse(f"tensor {t.name!r}: numpy has no {t.dtype}; use framework='torch'")
        views[t.name] = whole[t.offset:t.offset + t.nbytes].view(np.dtype(typestr)).reshape(
            t.shape)
    return views


def load(path: str, device: str = "cpu", framework: str = "torch", *, client: Any = None,
         mode: int = 0o600, timeout: float = 600.0) -> Dict[str, Any]:
    """{name: tensor} of a safetensors file, every tensor a zero-copy view of
    the node's one memd buffer of that file (loaded by this call if no
    process has yet).

    device: "cpu" (memd host memory), "cuda", "cuda:N", or a memd location
    ("host", "pinned", "device:N"). framework: "torch" or "numpy" (host
    memory only). client: a memd.Client (default: the process's own,
    memd.default_client()). mode: who else may attach, if this call makes
    the buffer (0o600 owner only, 0o640 group, 0o644 everyone). timeout:
    seconds to wait for another process's load.

    The tensors are read-only by contract: torch has no read-only tensors,
    and a write faults this process (SIGSEGV in host memory, a CUDA error
    on a GPU), never the buffer; clone() for a private copy.

    Raises ValueError for a file this refuses (naming the tensor and the
    numbers), memd.AbortedError when the file changes while loading,
    memd.PermissionDeniedError when the buffer of that name is owned by
    someone other than this user or root, and memd errors from the daemon
    (ResourceExhaustedError: no room for it)."""
    if framework not in ("torch", "numpy"):
        raise ValueError(f"framework {framework!r} is not 'torch' or 'numpy'")
    client = client if client is not None else _pickle.default_client()
    location = _location(client, device, framework)
    if framework == "numpy" and location.startswith("device:"):
        raise ValueError(f"framework='numpy' takes host memory only, not {device!r}")
    with open(path, "rb", buffering=0) as file:
        buf, header = _attach_or_load(client, path, file, location, mode, timeout)
    try:
        return _torch_views(buf, header) if framework == "torch" else _numpy_views(buf, header)
    finally:
        # The views hold the lease now; the Buffer object is not needed.
        buf.release()
