"""The package itself: stubs that match the module, documentation, the
layout rules, the install-free pieces, and the README's quickstart, run
verbatim against the test daemon."""

import ast
import os
import pydoc
import subprocess
import sys

import pytest

import memd
from memd import _layout
from conftest import EXAMPLES

STUB = os.path.join(os.path.dirname(memd.__file__), "__init__.pyi")


def _stub_classes():
    tree = ast.parse(open(STUB).read())
    classes = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            classes[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
    return tree, classes


def test_stub_matches_the_module():
    tree, classes = _stub_classes()
    for cls_name, members in classes.items():
        cls = getattr(memd, cls_name)
        for member in members - {"__buffer__"}:  # The C buffer slot has no attribute.
            assert hasattr(cls, member), f"{cls_name}.{member} is in the stub only"
        real = {m for m in vars(cls) if not m.startswith("_")}
        assert real <= members, f"{cls_name}: {sorted(real - members)} missing from the stub"
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert functions == {"connect", "default_client", "reopen"}
    for name in memd.__all__:
        assert name in open(STUB).read(), f"{name} is not in the stub"


def test_py_typed_ships_with_the_package():
    assert os.path.exists(os.path.join(os.path.dirname(memd.__file__), "py.typed"))


def test_help_is_useful():
    text = pydoc.render_doc(memd.Client, renderer=pydoc.plaintext)
    assert "Creates a buffer and returns a writable lease" in text
    assert "open(self, name: 'str', *, timeout" in text
    text = pydoc.render_doc(memd.Buffer, renderer=pydoc.plaintext)
    assert "no view ever dangles" in text
    assert "DLPACK_FLAG_BITMASK_READ_ONLY" in text


def test_version_is_the_project_version():
    assert memd.__version__.count(".") == 2


def test_one_package_for_every_python():
    # No extension built for one CPython: libmemd through ctypes, and
    # memd._native on the stable ABI.
    package = os.path.dirname(memd.__file__)
    extensions = sorted(f for f in os.listdir(package) if ".so" in f)
    assert extensions == ["_native.abi3.so"]
    assert memd._native.__file__.endswith("_native.abi3.so")
    assert "libmemd.so" in open("/proc/self/maps").read()
    assert memd._capi.library_path.split("/")[-1].startswith("libmemd.so.")


@pytest.mark.parametrize("spec, name, bits", [
    ("float32", "float32", 32), ("<f4", "float32", 32), ("f2", "float16", 16),
    ("|u1", "uint8", 8), ("bfloat16", "bfloat16", 16), ("bool", "bool", 8),
    ("double", "float64", 64), ("torch.int64", "int64", 64), ("complex64", "complex64", 64),
])
def test_parse_dtype(spec, name, bits):
    dtype = _layout.parse_dtype(spec)
    assert (dtype.name, dtype.bits) == (name, bits)


@pytest.mark.parametrize("spec, shape", [
    ("4096,4096", (4096, 4096)), (" 2 , 3 ", (2, 3)), ("", ()), (7, (7,)), ([1, 2], (1, 2)),
])
def test_parse_shape(spec, shape):
    assert _layout.parse_shape(spec) == shape


@pytest.mark.parametrize("spec", ["4,-1", "a,b", "1.5", [1, "x"]])
def test_parse_shape_refuses(spec):
    with pytest.raises(ValueError):
        _layout.parse_shape(spec)


def test_resolve_rules():
    attrs = {"dtype": "float32", "shape": "2,3"}
    assert _layout.resolve(attrs, 24).shape == (2, 3)
    assert _layout.resolve(attrs, 24, dtype="uint8").shape == (24,)
    assert _layout.resolve({}, 10).shape == (10,)
    assert _layout.resolve({"shape": "2,5"}, 10).dtype.name == "uint8"
    assert _layout.resolve({"dtype": "float32"}, 10).shape == (2,)
    with pytest.raises(ValueError, match="row-major"):
        _layout.resolve({"layout": "col-major"}, 10)


def test_quickstart_example_runs(daemon):
    env = dict(os.environ, MEMD_SOCKET_DIR=daemon.socket_dir)
    result = subprocess.run([sys.executable, os.path.join(EXAMPLES, "quickstart.py")],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "consumer read 307200 floats, sum 307200.0, zero-copy: True" in result.stdout
