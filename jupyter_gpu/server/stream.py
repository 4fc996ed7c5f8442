"""``WS stream``: pushes every new sample to every connected client.

On connect the client gets the latest sample, then each new one, as
``{"type": "sample", "age_s": seconds since it was sampled, "sample": Sample}``. The text of
each message is built once and written to every socket. A client that stops reading has
samples dropped for it rather than buffered without bound (``dropped`` counts them); it catches
up with the next sample it reads. Clients send nothing: a socket that does is closed (1008;
1009 for a frame over 1 KiB), and only that one.
"""

from __future__ import annotations

from typing import Any

from jupyter_core.utils import ensure_async
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from tornado import web
from tornado.websocket import WebSocketClosedError, WebSocketHandler

from jupyter_gpu.server.handlers import AUTH_RESOURCE, SERVICE_KEY
from jupyter_gpu.server.serialize import stream_message
from jupyter_gpu.server.service import GpuService

MAX_PENDING_WRITES = 64
"""Writes a client may have in flight before further samples are dropped for it."""
MAX_CLIENT_MESSAGE_BYTES = 1024
"""Largest frame a client may send (it should send none; Tornado's default is 10 MiB)."""


class StreamHandler(WebSocketMixin, WebSocketHandler, JupyterHandler):
    """The sample stream. Authenticated and authorized like the REST routes (403 otherwise).

    The base classes are the combination jupyter_server's own kernel socket uses.
    """

    auth_resource = AUTH_RESOURCE
    _pending = 0
    _sent_seq = 0
    dropped = 0

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
        service.add_client(self)
        entry = service.sampler.latest()
        if entry is not None:
            self.push(stream_message(entry.json, service.age_s(entry)), entry.sample.seq)

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
        self.service.remove_client(self)

    def push(self, message: str, seq: int) -> None:
        """Write sample ``seq``'s message; drop it if the client is this far behind or gone.

        A sample not newer than the last one sent is skipped: ``open`` sends the latest sample,
        and the hand-off of an older one may still be queued on the loop (the soak benchmark
        saw ``seq`` go down, which a client takes for a restarted server).
        """
        if seq <= self._sent_seq:
            return
        if self.ws_connection is None or self.ws_connection.is_closing():
            return
        if self._pending >= MAX_PENDING_WRITES:
            self.dropped += 1
            return
        try:
            future = self.write_message(message)
        except WebSocketClosedError:
            return
        self._pending += 1
        self._sent_seq = seq
        future.add_done_callback(self._written)

    def _written(self, future: Any) -> None:
        self._pending -= 1
        if not future.cancelled():
            future.exception()  # mark it retrieved: a closed socket is not an error here
