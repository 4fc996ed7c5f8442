"""The rendezvous endpoint of a ``%%torchrun`` job: parsing it, and checking it before a launch.

On one machine without ``--rdzv-endpoint`` torchrun runs ``--standalone``: its c10d store takes
a free port itself, so two notebooks never clash. With an endpoint, node 0 hosts the store on
it, so that port must be free there; the check says who holds it, before torchrun waits on it.
"""

from __future__ import annotations

import contextlib
import socket
from dataclasses import dataclass

import psutil

DEFAULT_PORT = 29400  # torchrun's default for c10d rendezvous


class EndpointError(ValueError):
    """An endpoint that cannot work; the message says what to do."""


@dataclass(frozen=True)
class Endpoint:
    """``HOST:PORT`` of the c10d rendezvous store."""

    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_endpoint(text: str) -> Endpoint:
    """``"node0:29500"``, ``"10.0.0.1"`` (port 29400), ``"[::1]:29500"``.

    Raises:
        EndpointError: not ``HOST[:PORT]`` with a port from 1 to 65535.
    """
    value = text.strip()
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        port_text = rest.removeprefix(":")
    elif value.count(":") == 1:
        host, port_text = value.split(":")
    else:
        host, port_text = value, ""
    if not host:
        raise EndpointError(f"--rdzv-endpoint {text!r}: give HOST:PORT, e.g. node0:29500")
    try:
        port = int(port_text) if port_text else DEFAULT_PORT
    except ValueError:
        raise EndpointError(
            f"--rdzv-endpoint {text!r}: the port must be a number, e.g. {host}:29500"
        ) from None
    if not 0 < port < 65536:
        raise EndpointError(f"--rdzv-endpoint {text!r}: the port must be from 1 to 65535")
    return Endpoint(host, port)


def _local_addresses() -> set[str]:
    addresses = {"localhost", socket.gethostname(), socket.getfqdn()}
    with contextlib.suppress(OSError):
        for family_addrs in psutil.net_if_addrs().values():
            for addr in family_addrs:
                addresses.add(addr.address.split("%")[0])
    return addresses


def is_this_machine(host: str) -> bool:
    """Whether ``host`` names this machine (a loopback or one of its interfaces' addresses)."""
    local = _local_addresses()
    if host in local:
        return True
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    for info in infos:
        address = str(info[4][0])
        if address in local or address.startswith("127.") or address == "::1":
            return True
    return False


def port_holder(port: int) -> str | None:
    """``"pid 123 (python)"`` of the process listening on ``port``, if this user may see it."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return None
    for conn in connections:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
            if conn.pid is None:
                return None
            try:
                name = psutil.Process(conn.pid).name()
            except psutil.Error:
                name = "?"
            return f"pid {conn.pid} ({name})"
    return None


def port_is_free(port: int) -> bool:
    """Whether a TCP server could listen on ``port`` on every interface now."""
    for family, address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):  # noqa: S104  # the store listens on all interfaces
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError:  # no IPv6 here
            continue
        with sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the store does
            try:
                sock.bind((address, port))
            except OSError:
                return False
    return True


def check_host_endpoint(endpoint: Endpoint) -> None:
    """Check that this machine can host the rendezvous store at ``endpoint`` (node 0 does).

    Raises:
        EndpointError: the host is another machine, or the port is taken; says what to do.
    """
    if not is_this_machine(endpoint.host):
        raise EndpointError(
            f"--node-rank 0 hosts the rendezvous at {endpoint}, but {endpoint.host} is not "
            "this machine: run node 0 on that machine, or give this machine's address"
        )
    if not port_is_free(endpoint.port):
        holder = port_holder(endpoint.port)
        by = f" by {holder}" if holder else ""
        raise EndpointError(
            f"port {endpoint.port} is already in use on this machine{by}, so the rendezvous "
            f"cannot listen on {endpoint}. On one machine leave --rdzv-endpoint out (a free "
            "port is picked); across machines pick another port, the same on every node."
        )
