"""Fixtures for the wheel's tests: the wheel itself, and a real memd on a
private socket directory for the programs run from a venv.

ctest builds the wheel once (the fixture test wheel.build) and sets
MEMD_WHEEL_DIR to where it lies, MEMD_BUILD_DIR and MEMD_BIN; by hand, from
the repository root, after a build (the wheel is then built into a
temporary directory):
    /usr/bin/python3 -m pytest tests/wheel
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BUILD = Path(os.environ.get("MEMD_BUILD_DIR") or REPO / "build")
MEMD_BIN = os.environ.get("MEMD_BIN") or str(BUILD / "bin" / "memd")
BUILD_WHEEL = REPO / "tools" / "build-wheel"


def build_wheel(out: Path) -> Path:
    """Runs tools/build-wheel on the build tree; the wheel's path."""
    result = subprocess.run([sys.executable, str(BUILD_WHEEL), "--build-dir", str(BUILD),
                             "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return Path(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """The wheel under test: the one in MEMD_WHEEL_DIR (ctest's fixture
    built it), else one built now."""
    where = os.environ.get("MEMD_WHEEL_DIR")
    if not where:
        return build_wheel(tmp_path_factory.mktemp("dist"))
    wheels = sorted(Path(where).glob("memd-*.whl"))
    assert len(wheels) == 1, f"{where} should hold exactly one memd wheel: {wheels}"
    return wheels[0]


# The memd starter the Python tests use.
sys.path.insert(0, str(REPO / "tests" / "python"))
from memd_daemon import Daemon  # noqa: E402


@pytest.fixture(scope="session")
def daemon():
    if not os.access(MEMD_BIN, os.X_OK):
        pytest.fail(f"{MEMD_BIN} is missing: build memd first (tools/dev build)")
    d = Daemon("--backend", "host", memd_bin=MEMD_BIN)
    yield d
    d.stop()
