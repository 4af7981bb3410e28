"""Fixtures for the memd Python package's tests: a real memd on a private
socket directory, started the way tests/support/daemon_process.h starts one
(the fixture plays systemd and returns on READY=1 instead of sleeping), and
clients of it.

ctest sets MEMD_BIN (build/bin/memd), MEMD_FAKE_CUDA and MEMD_FAKE_ZE (the fake
CUDA and Level Zero drivers)
and PYTHONPATH (build/python); by hand, from the repository root:
    PYTHONPATH=build/python /usr/bin/python3 -m pytest tests/python
"""

from __future__ import annotations

import itertools
import os
import re
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MEMD_BIN = os.environ.get("MEMD_BIN") or os.path.join(REPO, "build", "bin", "memd")
FAKE_CUDA = os.environ.get("MEMD_FAKE_CUDA") or os.path.join(
    REPO, "build", "lib", "libmemd_fake_cuda.so")
EXAMPLES = os.path.join(REPO, "client", "python", "examples")

from memd_daemon import Daemon  # noqa: E402,F401  (the tests import it from here)

try:
    import memd  # noqa: F401
except ImportError:  # By hand without PYTHONPATH: the build tree's package.
    sys.path.insert(0, os.path.join(REPO, "build", "python"))
    import memd  # noqa: F401


@pytest.fixture(scope="session")
def daemon():
    """A host-backend memd for the whole pytest run. MEMD_SOCKET_DIR points
    at it, so default clients (memd.connect(), unpickling) and child
    processes find it."""
    d = Daemon("--backend", "host")
    previous = os.environ.get("MEMD_SOCKET_DIR")
    os.environ["MEMD_SOCKET_DIR"] = d.socket_dir
    yield d
    if previous is None:
        os.environ.pop("MEMD_SOCKET_DIR", None)
    else:
        os.environ["MEMD_SOCKET_DIR"] = previous
    d.stop()


@pytest.fixture
def client(daemon):
    """A client that unmaps read-only mappings at their last release
    (mapping_cache_bytes=0), so that tests can watch mappings go."""
    c = memd.connect(daemon.socket_dir, mapping_cache_bytes=0)
    yield c
    c.close()


_names = itertools.count()


@pytest.fixture
def name(request, daemon):
    """A buffer name no other test uses. Whatever is left under it (sealed
    buffers: unsealed ones go with their last lease) is unlinked after the
    test."""
    test = re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:120]
    prefix = f"pytest/{os.getpid()}/{test}-{next(_names)}"
    yield prefix
    with memd.connect(daemon.socket_dir) as c:
        for info in c.list(prefix=prefix):
            try:
                c.unlink(info.name)
            except memd.NotFoundError:
                pass


@pytest.fixture
def write_from_file_calls(monkeypatch):
    """The arguments (after self) of each Buffer.write_from_file call the
    test makes, which still goes through."""
    calls = []
    write_from_file = memd.Buffer.write_from_file

    def counted(self, *args, **kwargs):
        calls.append(args)
        return write_from_file(self, *args, **kwargs)

    monkeypatch.setattr(memd.Buffer, "write_from_file", counted)
    return calls


def memd_mappings() -> list[tuple[int, int]]:
    """(start, end) of this process's mappings of memd host memory (the
    daemon's memfds are named memd:host and memd:pinned)."""
    ranges = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "memfd:memd:" in line:
                start, end = line.split()[0].split("-")
                ranges.append((int(start, 16), int(end, 16)))
    return ranges


def is_mapped(address: int) -> bool:
    """Whether `address` lies in a memd mapping of this process."""
    return any(start <= address < end for start, end in memd_mappings())


def address_of(view) -> int:
    """Where a buffer-protocol object's bytes start."""
    import numpy as np
    return np.asarray(memoryview(view)).__array_interface__["data"][0]
