"""Raw WebSocket clients of the GPU stream for load tests: ones that never read, one that counts.

A browser that freezes (or a script that opens the stream and walks away) stops reading its
socket: the server's messages fill the operating system's buffers, then the server's own. These
clients do exactly that: the upgrade request, the answer's headers, then nothing, with a small
receive buffer so the server's side fills soon. The counting client reads every frame.
"""

from __future__ import annotations

import base64
import os
import socket
import struct

RECEIVE_BUFFER_BYTES = 4096


def upgrade_request(host: str, port: int, path: str, token: str) -> bytes:
    """The HTTP request that opens the stream (a WebSocket upgrade), with the server's token."""
    key = base64.b64encode(os.urandom(16)).decode()
    return (
        f"GET {path} HTTP/1.1\r\n"
        f"Host: {host}:{port}\r\n"
        "Upgrade: websocket\r\n"
        "Connection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\n"
        "Sec-WebSocket-Version: 13\r\n"
        f"Authorization: token {token}\r\n"
        "\r\n"
    ).encode()


def silent_socket() -> socket.socket:
    """A TCP socket with a small receive buffer (set before connecting, so the window is small)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)
    return sock


def read_headers(sock: socket.socket) -> tuple[int, bytes]:
    """Read the upgrade's answer up to its blank line: its status, and any bytes after it."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError(f"closed during the upgrade: {data[:200]!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), rest


class FrameReader:
    """Reads server frames (unmasked, as a server sends them) from a blocking socket."""

    def __init__(self, sock: socket.socket, pending: bytes = b"") -> None:
        self.sock = sock
        self.buffer = pending

    def _take(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def frame(self) -> tuple[int, bytes]:
        """The next frame's opcode and payload (1: text, 8: close, 9: ping).

        A ping is answered with its pong here, as a browser does.
        """
        opcode, payload = self._frame()
        if opcode == 9:
            self.sock.sendall(client_frame(0xA, payload))
        return opcode, payload

    def _frame(self) -> tuple[int, bytes]:
        first, second = self._take(2)
        length = second & 0x7F
        if length == 126:
            (length,) = struct.unpack("!H", self._take(2))
        elif length == 127:
            (length,) = struct.unpack("!Q", self._take(8))
        return first & 0x0F, self._take(length)


def client_frame(opcode: int, payload: bytes) -> bytes:
    """A frame from a client (RFC 6455 5.3: masked), of a payload under 126 bytes."""
    assert len(payload) < 126
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return struct.pack("!BB", 0x80 | opcode, 0x80 | len(payload)) + mask + masked
