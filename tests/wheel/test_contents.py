"""The wheel as a file: its name and tags, its metadata, a RECORD that
lists every file with the right digest, the package and libmemd inside, and
shared objects that load on a target with nothing but a C library and a
C++ runtime (each NEEDED entry, read with readelf, is found in memd/.libs
or is a base library the target has). Rebuilt from the same tree it is the
same bytes."""

from __future__ import annotations

import base64
import csv
import email.parser
import hashlib
import io
import os
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from conftest import BUILD, build_wheel

# The libraries a target must have and the wheel must never carry
# (tools/build-wheel's BASE_LIBRARIES: glibc's objects, libstdc++, libgcc_s).
BASE = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0",
    "libutil.so.1", "libresolv.so.2", "libanl.so.1", "libnsl.so.1",
    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "libstdc++.so.6", "libgcc_s.so.1",
}
WHEEL_NAME = re.compile(
    r"(?P<name>memd)-(?P<version>[^-]+)-(?P<python>[^-]+)-(?P<abi>[^-]+)-(?P<platform>[^-]+)\.whl")


@pytest.fixture(scope="module")
def archive(wheel):
    with zipfile.ZipFile(wheel) as z:
        yield z


@pytest.fixture(scope="module")
def unpacked(archive, tmp_path_factory):
    where = tmp_path_factory.mktemp("unpacked")
    archive.extractall(where)
    return where


def dist_info(archive) -> str:
    (name,) = {n.split("/")[0] for n in archive.namelist() if ".dist-info/" in n}
    return name


def headers(archive, name: str):
    return email.parser.Parser().parsestr(archive.read(f"{dist_info(archive)}/{name}").decode())


def readelf(flag: str, path: Path) -> str:
    return subprocess.run(["readelf", flag, "--wide", str(path)], capture_output=True,
                          text=True, check=True, env=dict(os.environ, LC_ALL="C")).stdout


def dynamic(path: Path, tag: str) -> list[str]:
    return re.findall(rf"\({tag}\)\s+\S+ \S+: \[(.*)\]", readelf("-d", path))


def shared_objects(unpacked: Path) -> list[Path]:
    return sorted(p for p in unpacked.rglob("*.so*") if p.is_file())


def test_name_and_wheel_file_agree_on_the_tag(wheel, archive):
    parts = WHEEL_NAME.fullmatch(wheel.name)
    assert parts, wheel.name
    wheel_file = headers(archive, "WHEEL")
    assert wheel_file["Wheel-Version"] == "1.0"
    assert wheel_file["Root-Is-Purelib"] == "false"
    assert wheel_file.get_all("Tag") == [f"{parts['python']}-{parts['abi']}-{parts['platform']}"]
    assert dist_info(archive) == f"memd-{parts['version']}.dist-info"


def test_version_is_the_projects(wheel, archive):
    version = re.search(r'__version__ = "(.*)"',
                        archive.read("memd/_version.py").decode())[1]
    project = re.search(r"project\(memd VERSION (\S+)",
                        (Path(__file__).parents[2] / "CMakeLists.txt").read_text())[1]
    assert version == project
    assert headers(archive, "METADATA")["Version"] == version
    assert WHEEL_NAME.fullmatch(wheel.name)["version"] == version


def test_tag_is_cpython_39_stable_abi(wheel):
    """One wheel for every CPython >= 3.9: the extension uses the stable ABI."""
    parts = WHEEL_NAME.fullmatch(wheel.name)
    assert (parts["python"], parts["abi"]) == ("cp39", "abi3"), wheel.name


def test_platform_tag_states_the_glibc_the_binaries_need(wheel, unpacked):
    """manylinux_2_N: N is the highest GLIBC_2.N any shared object requires,
    and this machine's glibc has it (pip here accepts the wheel)."""
    needed = set()
    for path in shared_objects(unpacked):
        needed |= {tuple(map(int, v.split(".")))
                   for v in re.findall(r"Name: GLIBC_([0-9.]+)\s", readelf("-V", path))}
    glibc = max(needed)
    platform = WHEEL_NAME.fullmatch(wheel.name)["platform"]
    assert platform == f"manylinux_{glibc[0]}_{glibc[1]}_x86_64"
    here = tuple(map(int, os.confstr("CS_GNU_LIBC_VERSION").split()[1].split(".")))
    assert glibc <= here


def test_metadata_requires_python_39_and_nothing_else(archive):
    metadata = headers(archive, "METADATA")
    assert metadata["Metadata-Version"] in ("2.1", "2.2", "2.3")
    assert metadata["Name"] == "memd"
    assert metadata["Requires-Python"] == ">=3.9"
    # numpy and torch only as extras: a fresh venv installs memd alone.
    for requirement in metadata.get_all("Requires-Dist") or []:
        assert "extra ==" in requirement, requirement
    assert set(metadata.get_all("Provides-Extra") or []) <= {"numpy", "torch"}


def test_record_lists_every_file_with_its_digest_and_size(archive):
    info = dist_info(archive)
    rows = list(csv.reader(io.StringIO(archive.read(f"{info}/RECORD").decode())))
    names = [row[0] for row in rows]
    assert sorted(names) == sorted(archive.namelist())
    assert len(set(names)) == len(names)
    for path, digest, size in rows:
        if path == f"{info}/RECORD":
            assert (digest, size) == ("", "")
            continue
        data = archive.read(path)
        expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        assert digest == "sha256=" + expected.decode(), path
        assert int(size) == len(data), path


def test_package_is_the_build_trees(archive):
    """Every file of BUILD/python/memd (the extensions stripped and patched,
    so only present) is in the wheel, and nothing but it, .libs and
    dist-info; no bytecode."""
    package = BUILD / "python" / "memd"
    built = {p.relative_to(package).as_posix() for p in package.rglob("*")
             if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
             and ".libs" not in p.relative_to(package).parts}
    inside = {n[len("memd/"):] for n in archive.namelist()
              if n.startswith("memd/") and not n.startswith("memd/.libs/")}
    assert inside == built
    for name in built:
        if not name.endswith(".so"):
            assert archive.read(f"memd/{name}") == (package / name).read_bytes(), name
    assert {"py.typed", "__init__.pyi", "__init__.py"} <= inside
    assert all(n.startswith(("memd/", dist_info(archive) + "/")) for n in archive.namelist())
    assert not [n for n in archive.namelist() if n.endswith((".pyc", "/"))]


def test_only_the_stable_abi_extension(archive):
    extensions = [n for n in archive.namelist()
                  if n.endswith(".so") and not n.startswith("memd/.libs/")]
    assert not [n for n in extensions if re.search(r"\.cpython-3\d+-", n)], extensions
    assert extensions == ["memd/_native.abi3.so"]


def test_libmemd_is_inside_by_its_soname(unpacked):
    libs = unpacked / "memd" / ".libs"
    (libmemd,) = [p for p in libs.iterdir() if re.fullmatch(r"libmemd\.so\.\d+\.\d+", p.name)]
    assert dynamic(libmemd, "SONAME") == [libmemd.name]
    assert "memd_connect" in subprocess.run(["nm", "-D", "--defined-only", str(libmemd)],
                                            capture_output=True, text=True).stdout


def test_carried_libraries_find_each_other_and_nothing_else(unpacked):
    """Each carried library: its file name is its soname, its run path is
    $ORIGIN (no RPATH), and every NEEDED is another carried library or a
    base library; none is a base library itself."""
    libs = unpacked / "memd" / ".libs"
    carried = {p.name for p in libs.iterdir()}
    for name in sorted(carried):
        path = libs / name
        assert dynamic(path, "SONAME") == [name]
        assert dynamic(path, "RUNPATH") == ["$ORIGIN"], name
        assert dynamic(path, "RPATH") == [], name
        for needed in dynamic(path, "NEEDED"):
            assert needed in carried or needed in BASE, f"{name} needs {needed}"
    assert not carried & BASE
    assert not [n for n in carried if n.startswith(("libstdc++", "libgcc_s", "libc.", "libc-",
                                                    "libm.", "ld-linux", "libpthread"))]


def test_extension_needs_only_carried_or_base_libraries(unpacked):
    libs = unpacked / "memd" / ".libs"
    carried = {p.name for p in libs.iterdir()}
    extensions = [p for p in shared_objects(unpacked) if libs not in p.parents]
    assert extensions
    for extension in extensions:
        needed = dynamic(extension, "NEEDED")
        runpath = dynamic(extension, "RUNPATH")
        if set(needed) - BASE:
            assert runpath == ["$ORIGIN/.libs"], extension.name
        assert dynamic(extension, "RPATH") == []
        for name in needed:
            assert name in carried or name in BASE, f"{extension.name} needs {name}"
        # The stable ABI's promise: libpython is the interpreter's, never linked.
        assert not [n for n in needed if n.startswith("libpython")]


def test_rebuild_gives_the_same_bytes(wheel, tmp_path):
    again = build_wheel(tmp_path)
    assert again.name == wheel.name
    assert again.read_bytes() == wheel.read_bytes()


def test_entries_have_fixed_dates_and_modes(archive):
    for info in archive.infolist():
        assert info.date_time == (1980, 1, 1, 0, 0, 0) or "SOURCE_DATE_EPOCH" in os.environ
        mode = info.external_attr >> 16
        assert mode in (0o100644, 0o100755), (info.filename, oct(mode))
