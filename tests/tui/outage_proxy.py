"""A TCP proxy of the tests' own (asyncio, 127.0.0.1) between one console and the
Postgres test server, so that one console sees an outage while the shared server
keeps serving everything else.

``pause()`` holds every byte in both directions (a hung network: the connections
stay open, nothing answers) and ``resume()`` lets them through, held ones first.
``cut()`` closes every connection and refuses new ones (the server is gone);
``restore()`` accepts again.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit, urlunsplit


class OutageProxy:
    def __init__(self, dsn: str) -> None:
        parts = urlsplit(dsn)
        self.parts = parts
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.refusing = False
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        self.writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> str:
        """Listen; return the DSN that reaches the server through the proxy."""
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port = int(self.server.sockets[0].getsockname()[1])
        netloc = self.parts.netloc.rsplit("@", 1)
        host = f"127.0.0.1:{port}"
        where = f"{netloc[0]}@{host}" if len(netloc) == 2 else host
        return urlunsplit(self.parts._replace(netloc=where))

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            return
        self.writers.update((writer, up_writer))
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.ensure_future(self._pump(src, dst))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                await self.flowing.wait()  # paused: hold the bytes, answer nothing
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            dst.close()
            self.writers.discard(dst)

    def pause(self) -> None:
        self.flowing.clear()

    def resume(self) -> None:
        self.flowing.set()

    def cut(self) -> None:
        """Drop every connection at once (reset) and refuse new ones."""
        self.refusing = True
        for writer in list(self.writers):
            writer.transport.abort()
        self.writers.clear()

    def restore(self) -> None:
        self.refusing = False

    async def close(self) -> None:
        self.flowing.set()
        self.cut()
        for task in list(self.tasks):
            task.cancel()
        if self.server is not None:
            self.server.close()
