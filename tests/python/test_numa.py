"""NUMA placement (issue 26 item 5): create(numa=) reaches memd, which binds
the pages and reports the node in info.numa_node. This machine has one node:
"0" is bound, "auto" does nothing, a node it lacks is InvalidArgumentError."""

import pytest

import memd


def test_node_zero_is_bound_and_reported(client, name):
    with client.create(name, 4096, numa="0") as buf:
        assert buf.info.numa_node == 0
        buf.seal()
    assert client.stat(name).numa_node == 0


def test_auto_and_the_default_do_nothing_on_one_node(client, name):
    with client.create(name, 4096, numa="auto") as buf:
        assert buf.info.numa_node == -1
    with client.open_or_create(name + "-2", 4096, numa="") as buf:
        assert buf.info.numa_node == -1


def test_a_node_the_machine_lacks_is_invalid_argument(client, name):
    with pytest.raises(memd.InvalidArgumentError, match="NUMA node 7 does not exist"):
        client.create(name, 4096, numa="7")
    with pytest.raises(memd.InvalidArgumentError, match="auto, off or a node number"):
        client.create(name, 4096, numa="-1")
