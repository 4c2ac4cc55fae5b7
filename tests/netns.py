"""Real network partitions for the tests (issue 47): processes in network namespaces of their own, joined to a
bridge of the test's own by veth pairs; a namespace's link is cut and healed.

Cut, a namespace's packets go nowhere: its end of the pair loses its carrier, nothing answers, nothing is reset,
as behind a failed switch, and that holds for ZooKeeper and every broker at once (the proxy of
`tests/shards/proxy.py` cuts one connection to one server; a broker's advertised address sends a client around
any proxy). The stack listens on the bridge's address (`Network.host`, `Topology.host`), which this machine's
own processes reach as well as the namespaces' do.

Every interface, namespace and address used is made here and removed by `close`: names `tn<token>...`, addresses
in a 10.x.y.0/24 no interface of this machine has. Needs Linux, root and iproute2; `unavailable` says why not.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def unavailable() -> str | None:
    """Why namespaces cannot be made here, or None if they can (asked by making and removing one)."""
    if not sys.platform.startswith("linux"):
        return "not Linux"
    if os.geteuid() != 0:
        return "not root (ip netns and ip link need CAP_NET_ADMIN)"
    if shutil.which("ip") is None:
        return "iproute2's ip is not installed"
    probe = f"tn{secrets.token_hex(3)}x"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _free_subnet() -> ipaddress.IPv4Network:
    """A 10.x.y.0/24 that no address of this machine is in (nor any route to it)."""
    taken = [ipaddress.ip_interface(word).network for line in _ip("-4", "-o", "addr").stdout.splitlines()
             for word in line.split() if "/" in word and word[0].isdigit()]
    taken += [ipaddress.ip_network(line.split()[0]) for line in _ip("-4", "route").stdout.splitlines()
              if line.split() and "/" in line.split()[0]]
    for _ in range(200):
        net = ipaddress.IPv4Network(f"10.{secrets.randbelow(50) + 200}.{secrets.randbelow(256)}.0/24")
        if not any(net.overlaps(other) for other in taken):
            return net
    raise RuntimeError("no free 10.x.y.0/24 for a test network")


@dataclass(frozen=True)
class Namespace:
    """One network namespace: a process run in it (`wrap`) reaches the stack through one link, `cut` and `heal`."""

    name: str
    address: str  # its own, on the bridge's subnet
    link: str  # the bridge's end of its veth pair: set down, the namespace is cut off

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside the namespace (`ip netns exec` execs it: the process is the one started)."""
        return ["ip", "netns", "exec", self.name, *argv]

    def cut(self) -> None:
        _ip("link", "set", self.link, "down")

    def heal(self) -> None:
        _ip("link", "set", self.link, "up")


class Network:
    """A bridge on this machine, at `host`, and the namespaces joined to it."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(3)
        self.subnet = _free_subnet()
        addresses = self.subnet.hosts()
        self.host = str(next(addresses))
        self._addresses = addresses
        self.bridge = f"tn{self.token}b"
        self.namespaces: list[Namespace] = []
        self._numbers = itertools.count(1)
        _ip("link", "add", self.bridge, "type", "bridge")
        try:
            _ip("addr", "add", f"{self.host}/{self.subnet.prefixlen}", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
        except Exception:
            self.close()
            raise

    def namespace(self) -> Namespace:
        """A new namespace with its loopback up and a link to the bridge, up."""
        number = next(self._numbers)
        name, link, peer = f"tn{self.token}n{number}", f"tn{self.token}h{number}", f"tn{self.token}p{number}"
        address = str(next(self._addresses))
        _ip("netns", "add", name)
        space = Namespace(name, address, link)
        self.namespaces.append(space)
        _ip("link", "add", link, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", name)
        _ip("link", "set", link, "master", self.bridge)
        _ip("link", "set", link, "up")
        _ip("-n", name, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", peer)
        _ip("-n", name, "link", "set", peer, "up")
        _ip("-n", name, "link", "set", "lo", "up")
        return space

    def close(self) -> None:
        """Remove every link and namespace made here (a veth pair goes with either end)."""
        for space in self.namespaces:
            _ip("link", "del", space.link, check=False)
            _ip("netns", "del", space.name, check=False)
        self.namespaces.clear()
        with contextlib.suppress(Exception):
            _ip("link", "del", self.bridge, check=False)
