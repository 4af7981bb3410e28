"""The same wheel in a fresh venv of every other CPython on this machine
(pyenv's, or python3.X on PATH): from 3.9 it installs, imports and runs the
quickstart; before 3.9 pip must refuse it. An interpreter that is not here
skips, saying so: CI machines may have none.

MEMD_WHEEL_PYTHONS="3.9 3.12" limits the versions (ctest runs one each)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import venvs

OLDEST = (3, 9)  # Requires-Python: >=3.9
VERSIONS = os.environ.get("MEMD_WHEEL_PYTHONS", "3.8 3.9 3.10 3.11 3.12 3.13 3.14").split()
PYENV = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"


def version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def find_python(wanted: str) -> str | None:
    """A CPython `wanted` (3.X): pyenv's newest 3.X.*, else python3.X on
    PATH; one that reports another version or is not CPython is ignored."""
    candidates = sorted(PYENV.glob(f"{wanted}.*/bin/python3"),
                        key=lambda p: [int(n) for n in p.parent.parent.name.split(".")
                                       if n.isdigit()], reverse=True)
    on_path = shutil.which(f"python{wanted}", path="/usr/local/bin:/usr/bin:/bin")
    for candidate in [*map(str, candidates), on_path]:
        if not candidate:
            continue
        result = subprocess.run(
            [candidate, "-c", "import sys, platform; "
             "print('%d.%d' % sys.version_info[:2], platform.python_implementation())"],
            capture_output=True, text=True, timeout=60)
        if result.stdout.split() == [wanted, "CPython"]:
            return candidate
    return None


def interpreter(wanted: str) -> str:
    python = find_python(wanted)
    if python is None:
        pytest.skip(f"no CPython {wanted} here (looked in {PYENV} and for python{wanted} "
                    "on /usr/local/bin:/usr/bin:/bin)")
    return python


SUPPORTED = [v for v in VERSIONS if version(v) >= OLDEST]
OLDER = [v for v in VERSIONS if version(v) < OLDEST]


@pytest.mark.parametrize("wanted", SUPPORTED)
def test_installs_imports_and_runs_quickstart(wanted, wheel, tmp_path, request):
    venv = venvs.Venv(interpreter(wanted), tmp_path / "venv")
    daemon = request.getfixturevalue("daemon")  # Only once there is an interpreter.
    venvs.check_installed(venv, wheel)
    venvs.check_import_from_elsewhere(venv)
    venvs.check_libraries_from_wheel(venv, daemon.socket_dir)
    venvs.check_quickstart(venv, daemon.socket_dir)


@pytest.mark.parametrize("wanted", OLDER)
def test_pip_refuses_older_python(wanted, wheel, tmp_path):
    venv = venvs.Venv(interpreter(wanted), tmp_path / "venv")
    result = venv.pip_install(wheel)
    assert result.returncode != 0, f"pip of {wanted} installed the wheel:\n{result.stdout}"
    output = result.stdout + result.stderr
    # An abi3 or cp3X tag is refused as "not a supported wheel", a py3 one by
    # Requires-Python.
    assert ("is not a supported wheel on this platform" in output
            or "requires a different Python" in output), output
    assert venv.run(["-c", "import memd"]).returncode != 0


# A test with an empty parameter list reports a skip that says nothing: only
# the tests that have versions to run are collected.
if not SUPPORTED:
    del test_installs_imports_and_runs_quickstart
if not OLDER:
    del test_pip_refuses_older_python
