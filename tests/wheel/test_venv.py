"""The wheel in a fresh venv of Debian's /usr/bin/python3, as a user
installs it: pip from the venv (ensurepip's, offline), then import and the
quickstart example against a real memd, with a clean environment."""

from __future__ import annotations

import pytest

import venvs


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheel):
    v = venvs.Venv("/usr/bin/python3", tmp_path_factory.mktemp("venv") / "venv")
    venvs.check_installed(v, wheel)
    return v


def test_pip_installs_wheel_offline(venv):
    result = venv.run(["-m", "pip", "show", "memd"])
    assert result.returncode == 0 and "Name: memd" in result.stdout, result.stderr


def test_import_finds_the_venv_package_from_any_directory(venv):
    venvs.check_import_from_elsewhere(venv)


def test_libmemd_and_its_libraries_load_from_the_wheel(venv, daemon):
    venvs.check_libraries_from_wheel(venv, daemon.socket_dir)


def test_quickstart_runs_without_numpy(venv, daemon):
    result = venv.run(["-c", "import numpy"])
    assert result.returncode != 0, "a fresh venv without system site-packages has no numpy"
    venvs.check_quickstart(venv, daemon.socket_dir)
