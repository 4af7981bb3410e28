"""What a user does with the wheel, step by step, in a clean environment:
a fresh venv (no system site-packages), `pip install --no-index WHEEL`, then
programs run with only PATH, HOME and MEMD_SOCKET_DIR set: no PYTHONPATH,
no LD_LIBRARY_PATH, and a working directory outside the repository."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
QUICKSTART = REPO / "client" / "python" / "examples" / "quickstart.py"

# Prints, as JSON, where memd was imported from and every shared object the
# process has mapped once it has a client of the daemon.
MAPS_PROBE = """
import json, memd
with memd.connect() as client:
    client.list()
    maps = sorted({line.split()[-1] for line in open("/proc/self/maps") if ".so" in line})
print(json.dumps({"file": memd.__file__, "maps": maps}))
"""


class Venv:
    def __init__(self, python: str, where: Path):
        self.dir = where
        self.home = where.parent / (where.name + "-home")
        self.home.mkdir(exist_ok=True)
        self.python = where / "bin" / "python"
        result = self.run_host([python, "-m", "venv", str(where)])
        assert result.returncode == 0, f"{python} -m venv failed:\n{result.stderr}"

    def env(self, socket_dir: str | None = None) -> dict[str, str]:
        """env -i PATH=... HOME=... [MEMD_SOCKET_DIR=...]"""
        env = {"PATH": f"{self.dir}/bin:/usr/bin:/bin", "HOME": str(self.home)}
        if socket_dir:
            env["MEMD_SOCKET_DIR"] = socket_dir
        return env

    def run_host(self, command: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(command, env={"PATH": "/usr/bin:/bin", "HOME": str(self.home)},
                              capture_output=True, text=True, timeout=180, cwd=self.home)

    def pip_install(self, wheel: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.python), "-m", "pip", "install", "--no-index", "--no-cache-dir",
             "--disable-pip-version-check", "--no-input", str(wheel)],
            env=self.env(), capture_output=True, text=True, timeout=180, cwd=self.home)

    def run(self, args: list[str], socket_dir: str | None = None,
            cwd: Path | str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.python), *args], env=self.env(socket_dir),
                              capture_output=True, text=True, timeout=120,
                              cwd=cwd or self.home)

    def site_packages(self) -> Path:
        (path,) = self.dir.glob("lib/python3*/site-packages")
        return path


def check_installed(venv: Venv, wheel: Path) -> None:
    result = venv.pip_install(wheel)
    assert result.returncode == 0, f"pip refused the wheel:\n{result.stdout}\n{result.stderr}"


def check_import_from_elsewhere(venv: Venv) -> None:
    """memd comes from the venv's site-packages whatever the working
    directory (none of them holds a memd package)."""
    package = venv.site_packages() / "memd"
    for cwd in (venv.home, "/"):
        result = venv.run(["-c", "import memd; print(memd.__file__)"], cwd=cwd)
        assert result.returncode == 0, f"import memd from {cwd} failed:\n{result.stderr}"
        assert Path(result.stdout.strip()).resolve().parent == package.resolve(), result.stdout


def check_libraries_from_wheel(venv: Venv, socket_dir: str) -> None:
    """A process with a client of the daemon runs libmemd and every library
    the wheel carries from the installed memd/.libs; none of them (gRPC,
    Abseil, protobuf...) comes from the system."""
    libs = (venv.site_packages() / "memd" / ".libs").resolve()
    carried = sorted(p.name for p in libs.iterdir())
    result = venv.run(["-c", MAPS_PROBE], socket_dir=socket_dir)
    assert result.returncode == 0, result.stderr
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    mapped = [Path(p) for p in probe["maps"]]
    from_wheel = sorted(p.name for p in mapped if p.parent == libs)
    assert any(re.fullmatch(r"libmemd\.so\..*", n) for n in from_wheel), mapped
    assert from_wheel == carried, f"carried but not loaded: {set(carried) - set(from_wheel)}"
    # Carried names are NAME-HASH.so.N; the system's copy of one would be NAME.so.N.
    stems = {re.sub(r"-[0-9a-f]{8}$", "", n.split(".so")[0]) for n in carried}
    stems -= {"libssl", "libcrypto", "libz"}  # The interpreter's own _ssl, zlib may load these.
    strays = [str(p) for p in mapped if p.parent != libs and p.name.split(".so")[0] in stems]
    assert not strays, f"loaded from the system instead of the wheel: {strays}"


def check_quickstart(venv: Venv, socket_dir: str) -> None:
    result = venv.run([str(QUICKSTART)], socket_dir=socket_dir)
    assert result.returncode == 0, f"quickstart failed:\n{result.stdout}\n{result.stderr}"
    assert "consumer read 307200 floats" in result.stdout, result.stdout
