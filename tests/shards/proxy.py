"""A TCP proxy a test can cut: the network between one process and ZooKeeper, dropped and restored.

Cut, it forwards nothing either way and answers no new connection, but closes nothing, so the
client sees silence, as behind a failed switch, not a reset; restored, bytes flow again.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading


class Proxy:
    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.open = threading.Event()
        self.open.set()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> None:
        self.open.clear()

    def restore(self) -> None:
        self.open.set()

    def close(self) -> None:
        self.closed = True
        self.open.set()
        self.server.close()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            self.open.wait()
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        peers = {a: b, b: a}
        try:
            while not self.closed:
                if not self.open.is_set():  # cut: leave the bytes in the kernel's buffers (a select on them would
                    self.open.wait(0.2)  # return at once, and spin a core for the whole cut)
                    continue
                ready, _, _ = select.select(list(peers), [], [], 0.2)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    peers[sock].sendall(data)
        except OSError:
            return
        finally:
            for sock in peers:
                with contextlib.suppress(OSError):
                    sock.close()
