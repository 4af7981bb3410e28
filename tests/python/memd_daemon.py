"""A real memd as a child process, for the Python tests (tests/python,
tests/wheel) and benchmarks (tests/bench): started on a private socket
directory, ready when it reports READY=1 (the test plays systemd, as
tests/support/daemon_process.h does, instead of sleeping).

MEMD_BIN names the daemon (ctest sets it); else build/bin/memd."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MEMD_BIN = os.environ.get("MEMD_BIN") or os.path.join(REPO, "build", "bin", "memd")


class Daemon:
    """build/bin/memd as a child process on a private socket directory,
    without metrics unless metrics_address is given (a benchmark that reads
    counters only /metrics has: "127.0.0.1:0", and Client.stats() says
    which port). stop() ends it (SIGTERM) and removes its files."""

    def __init__(self, *args: str, env: dict | None = None, timeout: float = 20.0,
                 memd_bin: str | None = None, metrics_address: str = ""):
        self.dir = tempfile.mkdtemp(prefix="memd-py-")
        self.socket_dir = os.path.join(self.dir, "run")
        self.log_path = os.path.join(self.dir, "memd.log")
        notify_path = os.path.join(self.dir, "notify")
        self._notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._draining = False
        self._drainer: threading.Thread | None = None
        self._notify.bind(notify_path)
        child_env = dict(os.environ)
        child_env.update(env or {})
        child_env["NOTIFY_SOCKET"] = notify_path
        # Metrics off: nothing here reads them, and the metrics server alone
        # makes memd's stop take 2 s (per daemon, per test file).
        command = [memd_bin or MEMD_BIN, "--socket-dir", self.socket_dir,
                   "--metrics-address", metrics_address, *args]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, stderr=log,
                                            env=child_env)
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
                self._draining = True
                self._drainer = threading.Thread(target=self._drain, daemon=True)
                self._drainer.start()
                return
            if self.process.poll() is not None:
                log = self.log()
                self.stop()
                raise RuntimeError(f"memd exited during start-up:\n{log}")

    def _drain(self) -> None:
        """Reads the notify socket for as long as memd runs, as systemd
        does: memd sends FDSTORE=1 for each segment it reserves, and a queue
        left full (net.unix.max_dgram_qlen, often 10) would hold each later
        send for memd's 5 s timeout, inside a create or an open. The
        descriptors are dropped (the kernel closes what recv leaves)."""
        self._notify.settimeout(0.1)
        while self._draining:
            try:
                self._notify.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self) -> int | None:
        code = self.process.poll()
        if code is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                code = self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                code = self.process.wait()
        self._draining = False
        if self._drainer is not None:
            self._drainer.join()
        self._notify.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return code
