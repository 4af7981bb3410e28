"""A memd for the Python benchmarks: started on a private socket directory,
ready once it says READY=1 (as systemd hears it), stopped with SIGTERM."""

import os
import signal
import socket
import subprocess


class BenchDaemon:
    def __init__(self, memd_bin: str, directory: str, backend: str) -> None:
        notify_path = os.path.join(directory, "notify")
        self._notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._notify.bind(notify_path)
        self.socket_dir = os.path.join(directory, "run")
        self._log = open(os.path.join(directory, "memd.log"), "wb")
        self._process = subprocess.Popen(
            [memd_bin, "--socket-dir", self.socket_dir, "--backend", backend,
             "--metrics-address", ""], stdin=subprocess.DEVNULL, stderr=self._log,
            env=dict(os.environ, NOTIFY_SOCKET=notify_path))
        self._notify.settimeout(60)
        while b"READY=1" not in self._notify.recv(4096):
            pass

    def stop(self) -> None:
        self._process.send_signal(signal.SIGTERM)
        self._process.wait(timeout=60)
        self._notify.close()
        self._log.close()
