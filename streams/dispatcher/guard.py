"""What stands before the dispatcher's API: who is calling (a bearer token, or a client certificate), how fast
they may call, and how a server that anyone else may reach is refused without either.

The rate is a token bucket per identity (its name: a revoked and re-made credential is a new name); requests
without a valid identity are answered 401 before they cost anything but a hash, and are not rate limited.
"""

from __future__ import annotations

import ipaddress
import math
import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streams.dispatcher.auth import Identity, Keyring
from streams.errors import ConfigError


def loopback(host: str) -> bool:
    """Whether `host` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: it may resolve anywhere
        return False


def check_exposure(host: str, auth_file: Path | None, insecure: bool, what: str = "the dispatcher's API") -> None:
    """Refuse to serve others without authentication, unless the operator said so out loud."""
    if auth_file is None and not loopback(host) and not insecure:
        raise ConfigError(f"refusing to serve {what} on {host} without --auth-file: anyone reaching it could set "
                          "caps and cancel any tenant's jobs. Give --auth-file (tokens: tribunal dispatch api "
                          "token create), or --insecure to serve it open anyway")


def server_tls(cert: Path, key: Path, client_ca: Path | None) -> ssl.SSLContext:
    """TLS 1.2 or later; with `client_ca`, a client may present a certificate it signed (one it did not sign is
    refused in the handshake), which then stands for the identity its common name names. A client without one
    may still present a token: certificates are optional, a valid identity is not."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(cert), str(key))
        if client_ca is not None:
            context.load_verify_locations(str(client_ca))
            context.verify_mode = ssl.CERT_OPTIONAL
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"cannot load the API's TLS files ({cert}, {key}, {client_ca}): {e}") from None
    return context


def common_name(peercert: dict[str, Any] | None) -> str | None:
    """The subject's common name of a verified client certificate (`SSLSocket.getpeercert()`'s form)."""
    if not peercert:
        return None
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


@dataclass
class Rates:
    """A token bucket per identity: `rate` requests a second, `burst` at once."""

    rate: float
    burst: float
    buckets: dict[str, tuple[float, float]] = field(default_factory=dict)  # name -> (tokens, when)

    def wait(self, name: str, now: float | None = None) -> int:
        """0 if `name` may call now (and it is counted), else the whole seconds until it may (Retry-After)."""
        now = time.monotonic() if now is None else now
        tokens, then = self.buckets.get(name, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.rate)
        if tokens >= 1:
            self.buckets[name] = (tokens - 1, now)
            return 0
        self.buckets[name] = (tokens, now)
        return max(1, math.ceil((1 - tokens) / self.rate))


class Unauthenticated(Exception):
    """No valid identity: why, for the 401's detail (never the token itself)."""


def identify(keyring: Keyring, authorization: str | None, peercert: dict[str, Any] | None) -> Identity:
    """The identity a request carries: its bearer token if it has an Authorization header, else its client
    certificate's common name."""
    if authorization is not None:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("the Authorization header is not 'Bearer <token>'")
        found = keyring.by_token(token.strip())
        if found is None:
            raise Unauthenticated("the token is unknown or revoked")
        return found
    name = common_name(peercert)
    if name is not None:
        found = keyring.by_name(name)
        if found is None:
            raise Unauthenticated("the client certificate names no live identity")
        return found
    raise Unauthenticated("a request needs 'Authorization: Bearer <token>' or a client certificate")
