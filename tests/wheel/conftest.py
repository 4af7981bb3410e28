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
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
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


class Daemon:
    """build/bin/memd as a child process on a private socket directory, host
    backend, no metrics; returns once it reports READY=1 on NOTIFY_SOCKET
    (the test plays systemd, as tests/support/daemon_process.h does)."""

    def __init__(self, timeout: float = 20.0):
        self.dir = tempfile.mkdtemp(prefix="memd-wheel-")
        self.socket_dir = os.path.join(self.dir, "run")
        self.log_path = os.path.join(self.dir, "memd.log")
        notify_path = os.path.join(self.dir, "notify")
        self._notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._notify.bind(notify_path)
        command = [MEMD_BIN, "--socket-dir", self.socket_dir, "--metrics-address", "",
                   "--backend", "host"]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, stderr=log,
                                            env=dict(os.environ, NOTIFY_SOCKET=notify_path))
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.stop()
                raise RuntimeError(f"memd did not report READY=1 in time:\n{self.log()}")
            self._notify.settimeout(min(remaining, 0.05))
            try:
                note = self._notify.recv(4096)
            except socket.timeout:
                note = b""
            if b"READY=1" in note:
                return
            if self.process.poll() is not None:
                log = self.log()
                self.stop()
                raise RuntimeError(f"memd exited during start-up:\n{log}")

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._notify.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon():
    if not os.access(MEMD_BIN, os.X_OK):
        pytest.fail(f"{MEMD_BIN} is missing: build memd first (tools/dev build)")
    d = Daemon()
    yield d
    d.stop()
