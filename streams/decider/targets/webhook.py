"""The `webhook` target: a POST of the pool's desired state, signed, with an idempotency key.

The body is the whole desired state as of a decision, `{"pool", "seq", "instances": {app: count}}` (compact
JSON, keys sorted): the same bytes however often it is sent, so a receiver may apply it again or answer from
its idempotency cache. `Idempotency-Key: <pool>:<seq>`; with a secret file, `X-Tribunal-Signature:
sha256=<hex HMAC-SHA256 of the body under the file's bytes>` (GitHub's webhook form). Any 2xx is success; any
other answer, or none within the timeout, fails the change, which the actuator retries with backoff (a newer
decision replaces it: an older seq is never sent after a newer one). It cannot see what runs.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import orjson

from streams.decider.targets import ActuationFailed, Change

SIGNATURE = "X-Tribunal-Signature"


def body(change: Change) -> bytes:
    return orjson.dumps({"pool": change.pool, "seq": change.seq, "instances": dict(change.desired)},
                        option=orjson.OPT_SORT_KEYS)


def signature(secret: bytes, payload: bytes) -> str:
    return "sha256=" + hmac.new(secret, payload, hashlib.sha256).hexdigest()


class WebhookTarget:
    name = "webhook"

    def __init__(self, url: str, secret_file: Path | None = None, timeout: float = 30.0) -> None:
        self.url, self.timeout = url, timeout
        self.secret = secret_file.read_bytes().strip() if secret_file is not None else None
        self._session: Any = None

    async def observe(self, pool: str, apps: Collection[str]) -> Mapping[str, int]:
        return {}

    async def apply(self, change: Change) -> None:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        payload = body(change)
        headers = {"Content-Type": "application/json", "Idempotency-Key": change.key}
        if self.secret is not None:
            headers[SIGNATURE] = signature(self.secret, payload)
        try:
            async with self._session.post(self.url, data=payload, headers=headers) as response:
                if 200 <= response.status < 300:
                    return
                why = f"{response.status} {(await response.text())[:200]}"
        except (aiohttp.ClientError, TimeoutError) as e:
            why = f"{type(e).__name__}: {e}"
        raise ActuationFailed(f"POST {self.url}: {why}", list(change.instances))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
