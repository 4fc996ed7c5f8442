"""``WS stream``: pushes every new sample to every connected client.

On connect the client gets the latest sample, then each new one, as
``{"type": "sample", "age_s": seconds since it was sampled, "sample": Sample}``. The text of
each message, and its WebSocket frame, is built once and written to every socket, whose
buffers share it. Clients send nothing: a socket that does is closed (1008; 1009 for a frame
over 1 KiB), and only that one.

What the stream may hold is bounded, so that tabs that never read cannot take the server's
memory: at most ``max_stream_clients`` sockets (one more is closed at once, code 1013 "try
again later", with a reason the panel shows), and per socket at most
``stream_send_budget_kib`` of unsent messages (what Tornado holds once the operating system's
socket buffer is full). A socket whose next message would pass its budget is dropped at once,
its buffer with it (the client cannot read a close frame queued behind what it does not read);
it reconnects and fills the gap from the history. The socket's own send buffer is fixed at
``SOCKET_SEND_BUFFER_BYTES``: Linux would otherwise grow it up to 4 MiB (``tcp_wmem``) for a
client that reads nothing, which a test measured as 30 s of 100 KB/s before the budget counted.
"""

from __future__ import annotations

import contextlib
import socket
from typing import Any

from jupyter_core.utils import ensure_async
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from tornado import web
from tornado.iostream import StreamClosedError
from tornado.websocket import WebSocketHandler

from jupyter_gpu.server.handlers import AUTH_RESOURCE, SERVICE_KEY
from jupyter_gpu.server.serialize import stream_frame, stream_message
from jupyter_gpu.server.service import GpuService

SOCKET_SEND_BUFFER_BYTES = 128 * 1024
"""Each stream socket's send buffer (Linux doubles it): room for a second of 100 KB samples
and a fast link's bandwidth-delay product, not for minutes of a client that stopped reading."""
CLOSE_TOO_MANY_CLIENTS = 1013
"""The close code of a client over ``max_stream_clients`` (RFC 6455's "try again later")."""
MAX_CLIENT_MESSAGE_BYTES = 1024
"""Largest frame a client may send (it should send none; Tornado's default is 10 MiB)."""


class StreamHandler(WebSocketMixin, WebSocketHandler, JupyterHandler):
    """The sample stream. Authenticated and authorized like the REST routes (403 otherwise).

    The base classes are the combination jupyter_server's own kernel socket uses.
    """

    auth_resource = AUTH_RESOURCE
    _unsent_bytes = 0  # of the messages whose write has not reached the socket yet
    _sent_seq = 0
    _counted = False  # one of the service's clients (not refused)

    @property
    def service(self) -> GpuService:
        """The extension's ``GpuService``."""
        service: GpuService = self.settings[SERVICE_KEY]
        return service

    def set_default_headers(self) -> None:
        """No HTML headers on a WebSocket upgrade (as jupyter_server's kernel socket)."""

    async def pre_get(self) -> None:
        """Authenticate and authorize before the upgrade: 403 otherwise."""
        user = self.current_user
        if user is None:
            self.log.warning("jupyter_gpu: refusing an unauthenticated stream connection")
            raise web.HTTPError(403)
        allowed = await ensure_async(
            self.authorizer.is_authorized(self, user, "read", AUTH_RESOURCE)
        )
        if not allowed:
            raise web.HTTPError(403)

    async def get(self, *args: Any, **kwargs: Any) -> None:
        await self.pre_get()
        await self.service.wait_ready()
        result = super().get(*args, **kwargs)
        if result is not None:
            await result

    def open(self, *args: Any, **kwargs: Any) -> None:
        super().open(*args, **kwargs)
        service = self.service
        limit = service.config.max_stream_clients
        if not service.add_client(self, limit):
            # A browser shows the close code and reason, never an HTTP status of the upgrade:
            # so the socket is accepted, then closed with both (the reason fits a close frame).
            self.close(CLOSE_TOO_MANY_CLIENTS, too_many_clients_reason(limit))
            self._end_once_sent()
            return
        self._counted = True
        self._fix_send_buffer()
        entry = service.sampler.latest()
        if entry is not None:
            message = stream_message(entry.json, service.age_s(entry))
            self.push(stream_frame(message), entry.sample.seq)

    def _end_once_sent(self) -> None:
        """End the connection as soon as the close frame has left, not 5 s later.

        Tornado waits that long for the client's own close frame; a refused client that reads
        nothing (a flood) would keep its connection, and a thousand of them their memory,
        meanwhile. A browser has read the frame by the time it answers, so it keeps its code
        and reason.
        """
        stream = getattr(self.ws_connection, "stream", None)
        if stream is None or stream.closed():
            return
        try:
            sent = stream.write(b"")  # done once everything queued (the close frame) is sent
        except StreamClosedError:
            return
        sent.add_done_callback(lambda _done: stream.close())

    def _fix_send_buffer(self) -> None:
        """Fix the socket's send buffer (no autotuning up to megabytes for a silent client)."""
        stream = getattr(self.ws_connection, "stream", None)
        sock = getattr(stream, "socket", None)
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):  # best effort: the budget still bounds memory
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_SEND_BUFFER_BYTES)

    def get_compression_options(self) -> dict[str, Any] | None:
        """No per-message compression: the frames are built once, for every socket alike."""
        return None

    @property
    def max_message_size(self) -> int:
        """Clients send nothing: Tornado closes a socket that sends more than this (1009)."""
        return MAX_CLIENT_MESSAGE_BYTES

    def on_message(self, message: str | bytes) -> None:
        """Clients send nothing: a message is a client's bug or an attack; close that socket.

        Code 1008 (policy violation); the other sockets and the server carry on.
        """
        self.close(1008, "this stream accepts no messages from clients")

    def on_close(self) -> None:
        # jupyter_server's mixin stops its ping timer only at the next ping (30 s), and the
        # timer holds this handler: a thousand refused sockets would all be held meanwhile.
        pinging = getattr(self, "ping_callback", None)  # typed None on the mixin
        if pinging is not None:
            pinging.stop()
            self.ping_callback = None
        if self._counted:
            self._counted = False
            self.service.remove_client(self)

    def push(self, frame: bytes, seq: int) -> None:
        """Write sample ``seq``'s frame; drop the client if it would pass its send budget.

        ``frame`` is the message's WebSocket frame, built once for every socket
        (``serialize.stream_frame``): written to the connection's stream as it is, so the
        buffers of slow clients share it. A sample not newer than the last one sent is
        skipped: ``open`` sends the latest sample, and the hand-off of an older one may still
        be queued on the loop (the soak benchmark saw ``seq`` go down, which a client takes
        for a restarted server).
        """
        if seq <= self._sent_seq:
            return
        connection = self.ws_connection
        stream = getattr(connection, "stream", None)
        if connection is None or connection.is_closing() or stream is None or stream.closed():
            return
        size = len(frame)
        budget = self.service.config.stream_send_budget_kib * 1024
        if self._unsent_bytes + size > budget:
            self._drop(stream, budget)
            return
        try:
            future = stream.write(frame)
        except StreamClosedError:
            return
        self._unsent_bytes += size
        self._sent_seq = seq
        future.add_done_callback(lambda done: self._written(done, size))

    def _drop(self, stream: Any, budget: int) -> None:
        """Close the client's TCP connection now: what it did not read is freed with it."""
        self.log.info(
            "jupyter_gpu: dropped a stream client that left %d KiB unread "
            "(stream_send_budget_kib is %d)",
            self._unsent_bytes // 1024,
            budget // 1024,
        )
        stream.close()  # Tornado then calls on_close, which counts the client out

    def _written(self, future: Any, size: int) -> None:
        self._unsent_bytes -= size
        if not future.cancelled():
            future.exception()  # mark it retrieved: a closed socket is not an error here


def too_many_clients_reason(limit: int) -> str:
    """The close reason of a client over the bound (at most 123 bytes, as a close frame allows)."""
    clients = "1 client" if limit == 1 else f"{limit} clients"
    return f"this server streams to {clients} at most (JupyterGpu.max_stream_clients)"
