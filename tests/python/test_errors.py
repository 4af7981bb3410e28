"""Every status code maps to its memd.Error subclass, and the daemon's
refusals arrive as those classes."""

import os
import pickle
import tempfile

import pytest

import memd
from memd import _errors

# code -> (class, the builtin it must also be, or None)
EXPECTED = {
    1: (memd.CancelledError, None),
    2: (memd.UnknownError, None),
    3: (memd.InvalidArgumentError, ValueError),
    4: (memd.DeadlineExceededError, TimeoutError),
    5: (memd.NotFoundError, FileNotFoundError),
    6: (memd.AlreadyExistsError, FileExistsError),
    7: (memd.PermissionDeniedError, PermissionError),
    8: (memd.ResourceExhaustedError, MemoryError),
    9: (memd.FailedPreconditionError, None),
    10: (memd.AbortedError, None),
    11: (memd.OutOfRangeError, None),
    12: (memd.UnimplementedError, NotImplementedError),
    13: (memd.InternalError, None),
    14: (memd.UnavailableError, ConnectionError),
    15: (memd.DataLossError, None),
    16: (memd.UnauthenticatedError, None),
}


@pytest.mark.parametrize("code", sorted(EXPECTED))
def test_every_code_has_its_class(code):
    cls, builtin = EXPECTED[code]
    error = _errors.error_for_code(code, "the daemon's words")
    assert type(error) is cls
    assert isinstance(error, memd.Error)
    if builtin is not None:
        assert isinstance(error, builtin)
    assert error.code == code
    assert error.code_name == _errors._CODE_NAMES[code]
    # OSError's (errno, strerror) handling must not leak into the message.
    assert str(error) == "the daemon's words"
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is cls and str(again) == str(error) and again.code == code


def test_unknown_code_is_a_plain_error():
    error = _errors.error_for_code(99, "from the future")
    assert type(error) is memd.Error and error.code == 99 and error.code_name == "CODE_99"
    again = pickle.loads(pickle.dumps(error))
    assert again.code == 99


def test_open_of_a_missing_name_is_not_found(client, name):
    with pytest.raises(memd.NotFoundError) as caught:
        client.open(name)
    assert isinstance(caught.value, FileNotFoundError)
    assert caught.value.code == 5 and caught.value.code_name == "NOT_FOUND"
    assert name in str(caught.value)
    assert not str(caught.value).startswith("[Errno")


def test_second_create_is_already_exists(client, name):
    with client.create(name, 4096):
        with pytest.raises(memd.AlreadyExistsError) as caught:
            client.create(name, 4096)
        assert isinstance(caught.value, FileExistsError)


@pytest.mark.parametrize("bad_name", ["", "a//b", "../x", "bad name", "x" * 300])
def test_bad_names_are_invalid_argument(client, bad_name):
    with pytest.raises(memd.InvalidArgumentError) as caught:
        client.create(bad_name, 4096)
    assert isinstance(caught.value, ValueError)


def test_bad_attrs_are_invalid_argument(client, name):
    with pytest.raises(memd.InvalidArgumentError, match="bad key"):
        client.create(name, 4096, attrs={"bad key": "x"})
    with pytest.raises(memd.InvalidArgumentError):
        client.create(name, 4096, attrs={f"k{i}": "v" for i in range(17)})
    with pytest.raises(memd.NotFoundError):
        client.stat(name)  # Nothing was created.


def test_attrs_must_be_strings(client, name):
    with pytest.raises(TypeError):
        client.create(name, 4096, attrs={"dtype": 4})


def test_negative_size_is_invalid_argument(client, name):
    with pytest.raises(memd.InvalidArgumentError, match="negative"):
        client.create(name, -1)


def test_another_owner_is_permission_denied(client, name):
    with client.create(name, 4096) as buf:
        buf.seal()
    with pytest.raises(memd.PermissionDeniedError) as caught:
        client.open(name, owner=os.getuid() + 4242)
    assert isinstance(caught.value, PermissionError)
    with client.open(name, owner=os.getuid()) as mine:  # The right owner opens.
        assert mine.info.owner_uid == os.getuid()


def test_timed_open_is_deadline_exceeded(client, name):
    with pytest.raises(memd.DeadlineExceededError) as caught:
        client.open(name, timeout=0.2)
    assert isinstance(caught.value, TimeoutError)


def test_seal_twice_and_seal_of_read_lease_are_failed_precondition(client, name):
    with client.create(name, 4096) as buf:
        buf.seal()
        with pytest.raises(memd.FailedPreconditionError):
            buf.seal()
    with client.open(name) as reader:
        with pytest.raises(memd.FailedPreconditionError):
            reader.seal()


def test_no_daemon_is_unavailable():
    with tempfile.TemporaryDirectory() as empty:
        with pytest.raises(memd.UnavailableError) as caught:
            memd.connect(empty)
    assert isinstance(caught.value, ConnectionError)


def test_bad_timeouts_are_value_errors(client, name):
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="timeout"):
            client.open(name, timeout=bad)


def test_closed_client_raises_value_error(daemon):
    c = memd.connect(daemon.socket_dir)
    c.ping()
    c.close()
    c.close()  # Idempotent.
    assert c.closed
    with pytest.raises(ValueError, match="closed"):
        c.ping()
