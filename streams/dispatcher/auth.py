"""Who may call the dispatcher's API: identities kept in an auth file, and what each role may do in a namespace.

The auth file (JSON, readable by its owner only) holds one entry per identity: its name, role, namespaces,
worker and the SHA-256 of its token, never the token. Tokens are 256 random bits, so a plain hash is as
strong as a slow one (what GitHub and Hatchet keep); a presented token is hashed, looked up by its hash and
compared with the entry found in constant time. An entry also stands for a client certificate whose subject's
common name is the entry's name (`--tls-client-ca`), so revoking a name revokes both.

Names are never reused, revoked ones included: a `principal` in the log names one identity for good.
The API reads the file again whenever it changed (its inode, size or modification time), checked on
every request: a revocation holds from the first request after the file is written.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from streams.errors import ConfigError, TribunalError

Role = Literal["admin", "tenant", "reader"]
ROLES: tuple[Role, ...] = ("admin", "tenant", "reader")
EVERY_NAMESPACE = "*"
TOKEN_PREFIX = "trb_"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@:=, -]{0,199}")  # a certificate's common name fits it too
VERSION = 1


class AuthError(TribunalError):
    """The auth file cannot be used: missing, malformed or readable by others."""


def digest(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Identity:
    """One entry of the auth file: who, in which role, where."""

    name: str
    role: Role
    namespaces: tuple[str, ...]
    worker: str | None = None
    hash: str = ""
    created: int = 0
    revoked: int | None = None

    def covers(self, namespace: str) -> bool:
        return EVERY_NAMESPACE in self.namespaces or namespace in self.namespaces

    def public(self) -> dict[str, Any]:
        """The entry without its hash (what `token list` prints)."""
        shown = asdict(self)
        del shown["hash"]
        shown["namespaces"] = list(self.namespaces)
        return shown


def check_entry(name: str, role: str, namespaces: tuple[str, ...], worker: str | None) -> None:
    if not NAME.fullmatch(name):
        raise ConfigError(f"a name is 1 to 200 letters, digits and . _ @ : = , - or spaces, beginning with a letter "
                          f"or digit: {name!r} is not")
    if role not in ROLES:
        raise ConfigError(f"a role is one of {', '.join(ROLES)}, not {role!r}")
    if not namespaces or any(not 0 < len(ns) <= 200 for ns in namespaces):
        raise ConfigError("an identity needs at least one --namespace (1 to 200 characters; '*' for every one)")
    if (role == "tenant") != (worker is not None):
        raise ConfigError("a tenant acts for one worker (--worker W); an admin or a reader for none")
    if worker is not None and not 0 < len(worker) <= 200:
        raise ConfigError("a worker's name is 1 to 200 characters")


def _parse(path: Path, text: str) -> tuple[Identity, ...]:
    try:
        data = json.loads(text)
        if data.get("version") != VERSION:
            raise ValueError(f"version {data.get('version')!r}, not {VERSION}")
        return tuple(Identity(name=e["name"], role=e["role"], namespaces=tuple(e["namespaces"]),
                              worker=e.get("worker"), hash=e["hash"], created=int(e.get("created", 0)),
                              revoked=e.get("revoked")) for e in data["identities"])
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise AuthError(f"{path} is not an auth file tribunal wrote: {e}") from None


def private(path: Path, what: str = "the auth file") -> os.stat_result:
    """`path`'s status, if only its owner may read or write it; else an error saying so (`what` it is)."""
    try:
        st = path.stat()
    except OSError as e:
        raise AuthError(f"cannot read {what} {path}: {e.strerror}") from None
    if st.st_mode & 0o077:
        raise AuthError(f"{what} {path} is open to others (mode {st.st_mode & 0o777:o}), and what it holds is a "
                        f"secret: chmod 600 {path}")
    return st


class AuthFile:
    """The file `tribunal dispatch api token ...` keeps. Changes are written whole to a new file, renamed over
    the old one (a reader never sees half of one), under a lock beside it (two changes at once are taken in turn)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> tuple[Identity, ...]:
        if not self.path.exists():
            return ()
        private(self.path)
        return _parse(self.path, self.path.read_text())

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _write(self, identities: tuple[Identity, ...]) -> None:
        entries = [{k: v for k, v in asdict(i).items() if v is not None} for i in identities]
        text = json.dumps({"version": VERSION, "identities": entries}, indent=2) + "\n"
        new = self.path.with_name(f".{self.path.name}.{os.getpid()}.new")
        fd = os.open(new, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(new, self.path)

    def create(self, name: str, role: str, namespaces: tuple[str, ...], worker: str | None) -> str:
        """A new identity; its token, which exists nowhere else once returned."""
        check_entry(name, role, namespaces, worker)
        with self._locked():
            identities = self.read()
            if any(i.name == name for i in identities):
                raise ConfigError(f"{name!r} names an identity already (revoked or not): a name is never reused, so "
                                  "that the log's principals each name one identity")
            token = TOKEN_PREFIX + secrets.token_urlsafe(32)
            entry = Identity(name=name, role=role, namespaces=tuple(sorted(set(namespaces))),  # type: ignore[arg-type]
                             worker=worker, hash=digest(token), created=int(time.time() * 1000))
            self._write((*identities, entry))
        return token

    def revoke(self, name: str) -> Identity:
        with self._locked():
            identities = self.read()
            found = next((i for i in identities if i.name == name), None)
            if found is None:
                raise ConfigError(f"no identity {name!r} in {self.path}")
            if found.revoked is not None:
                return found
            revoked = replace(found, revoked=int(time.time() * 1000))
            self._write(tuple(revoked if i.name == name else i for i in identities))
        return revoked


class Keyring:
    """The identities the API serves, read again from the auth file whenever it changed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, int, int] | None = None
        self._identities: tuple[Identity, ...] = ()
        self._by_name: dict[str, Identity] = {}
        self._by_hash: dict[str, Identity] = {}
        self.current()  # refused at start: missing, malformed or open to others

    def current(self) -> tuple[Identity, ...]:
        st = private(self.path)
        seen = (st.st_ino, st.st_size, st.st_mtime_ns)
        if seen != self._seen:
            self._identities = _parse(self.path, self.path.read_text())
            self._by_name = {i.name: i for i in self._identities}
            self._by_hash = {i.hash: i for i in self._identities}
            self._seen = seen
        return self._identities

    def by_token(self, token: str) -> Identity | None:
        """The live identity whose token this is, looked up by the token's hash (as GitHub looks tokens up): what
        a lookup's time could tell is about the hash of a token the caller chose, which gives no way to another
        token; the entry found is compared in constant time all the same."""
        self.current()
        presented = digest(token)
        found = self._by_hash.get(presented)
        if found is None or not hmac.compare_digest(presented.encode(), found.hash.encode()):
            return None
        return found if found.revoked is None else None

    def by_name(self, name: str) -> Identity | None:
        """The live identity a client certificate's common name names."""
        self.current()
        found = self._by_name.get(name)
        return found if found is not None and found.revoked is None else None


Verb = Literal["read", "cap", "assign", "report", "stream"]


def may(identity: Identity, verb: Verb, namespace: str, worker: str | None = None) -> str | None:
    """None if `identity` may do `verb` in `namespace` (for `worker`, where the request names one); else why not.
    A tenant's reports on a job are checked against the job's worker by the caller, which alone can look it up."""
    if not identity.covers(namespace):
        return f"{identity.name} has no role in namespace {namespace!r}"
    if identity.role == "admin":
        return None
    if identity.role == "reader":
        return None if verb in ("read", "stream") else f"{identity.name} is a reader: it may only read"
    if verb == "cap":
        return f"{identity.name} is a tenant: only an admin sets caps"
    if worker is not None and worker != identity.worker:
        return f"{identity.name} acts for worker {identity.worker!r} only, not {worker!r}"
    return None
