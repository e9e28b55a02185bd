"""A fault-injecting TCP proxy between the nodes of an mqr cluster, on 127.0.0.1.

Every node reaches node j through j's proxy (the address its peers have for j), which
forwards to j's own port. A connection between nodes begins with raft_uv's TCP
handshake (u64 protocol, u64 the connecting node's id, u64 address length, address,
little-endian), so the proxy knows which link (from, to) each connection carries, and
the nemesis can act on one direction of one link:

  cut(a, b)       no traffic from a to b: its connections are closed, new ones refused
  delay(a, b, s)  each chunk from a to b waits s seconds
  heal()          every link as it was

A node's messages to another travel on its own connections (replies come back on the
other node's), so partitioning a from b is cut(a, b) and cut(b, a).

It runs its own asyncio loop in a thread of the test; stop() ends it."""

import asyncio
import struct
import threading


class FaultProxy:
    def __init__(self, targets):
        """targets: {node id: its own port}; listen() gives each a proxy port."""
        self.targets = dict(targets)
        self.ports = {}
        self.cut_links = set()
        self.delays = {}
        self.conns = {}  # (from, to) -> set of writers
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.servers = []
        self.forwarded = 0

    def start(self):
        self.thread.start()
        for node, port in self.targets.items():
            fut = asyncio.run_coroutine_threadsafe(self._listen(node, port), self.loop)
            self.ports[node] = fut.result(10)
        return self.ports

    def stop(self):
        def close():
            for s in self.servers:
                s.close()
            for ws in self.conns.values():
                for w in list(ws):
                    w.close()
            self.loop.stop()
        self.loop.call_soon_threadsafe(close)
        self.thread.join(10)

    # ---- the nemesis's controls (any thread) ----

    def cut(self, a, b):
        self.loop.call_soon_threadsafe(self._cut, a, b)

    def delay(self, a, b, seconds):
        self.loop.call_soon_threadsafe(self.delays.__setitem__, (a, b), seconds)

    def isolate(self, node):
        for other in self.targets:
            if other != node:
                self.cut(node, other)
                self.cut(other, node)

    def heal(self):
        def do():
            self.cut_links.clear()
            self.delays.clear()
        self.loop.call_soon_threadsafe(do)

    # ---- the proxy ----

    def _cut(self, a, b):
        self.cut_links.add((a, b))
        for w in list(self.conns.get((a, b), ())):
            w.close()

    async def _listen(self, node, port):
        server = await asyncio.start_server(lambda r, w: self._accept(node, port, r, w), "127.0.0.1", 0)
        self.servers.append(server)
        return server.sockets[0].getsockname()[1]

    async def _accept(self, to, port, reader, writer):
        try:
            head = await reader.readexactly(24)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        _, src, _ = struct.unpack("<QQQ", head)
        link = (src, to)
        if link in self.cut_links:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            writer.close()
            return
        up_writer.write(head)
        self.conns.setdefault(link, set()).update((writer, up_writer))
        await asyncio.gather(self._pipe(link, reader, up_writer), self._pipe(link, up_reader, writer),
                             return_exceptions=True)
        self.conns[link].discard(writer)
        self.conns[link].discard(up_writer)

    async def _pipe(self, link, reader, writer):
        try:
            while True:
                data = await reader.read(65536)
                if not data or link in self.cut_links:
                    break
                wait = self.delays.get(link)
                if wait:
                    await asyncio.sleep(wait)
                writer.write(data)
                self.forwarded += len(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()
