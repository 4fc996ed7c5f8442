"""``free_port`` picks below the kernel's ephemeral range, where no outgoing connection takes it."""

from __future__ import annotations

import socket

import pytest

from tests.helpers import _FREE_PORTS, _ephemeral_ports_start, free_port


def test_a_free_port_is_below_the_ephemeral_range_and_can_be_bound() -> None:
    if _ephemeral_ports_start() <= _FREE_PORTS.start:
        pytest.skip("this machine's ephemeral range starts below the ports free_port picks from")
    ports = {free_port() for _ in range(20)}
    assert len(ports) > 1, "the pick is random: workers picking at once seldom meet"
    for port in ports:
        assert _FREE_PORTS.start <= port < min(_FREE_PORTS.stop, _ephemeral_ports_start())
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
