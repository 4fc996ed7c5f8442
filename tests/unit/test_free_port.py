"""``free_port`` picks below the kernel's ephemeral range, where no outgoing connection takes it."""

from __future__ import annotations

import socket

import pytest

from tests.helpers import free_port, free_port_range


def test_a_free_port_is_below_the_ephemeral_range_and_can_be_bound() -> None:
    if not free_port_range():
        pytest.skip("this machine's ephemeral range starts below the ports free_port picks from")
    ports = {free_port() for _ in range(20)}
    assert len(ports) > 1, "the pick is random: workers picking at once seldom meet"
    for port in ports:
        assert port in free_port_range()
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
