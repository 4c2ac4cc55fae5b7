"""What the dispatcher API's authentication costs a request: identifying a bearer token (the auth file's status
checked, the token hashed, every identity's hash compared in constant time) at 10, 100 and 1,000 identities,
beside its floor, one SHA-256 of the token alone, in the same run.

Run: `.venv/bin/python bench/api_auth.py [--calls 20000]`.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from pathlib import Path

from machine import describe  # type: ignore[import-not-found]

from streams.dispatcher.auth import AuthFile, Keyring
from streams.dispatcher.guard import identify


def per_call(fn: object, calls: int) -> float:
    """Microseconds a call, the best of three runs."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            fn()  # type: ignore[operator]
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20_000)
    args = parser.parse_args()
    print(describe())
    with tempfile.TemporaryDirectory() as tmp:
        for size in (10, 100, 1_000):
            path = Path(tmp) / f"auth-{size}.json"
            auth = AuthFile(path)
            tokens = [auth.create(f"id-{i}", "reader", ("ns",), None) for i in range(size)]
            keyring, token = Keyring(path), tokens[-1]
            floor = per_call(lambda t=token: hashlib.sha256(t.encode()).hexdigest(), args.calls)
            spent = per_call(lambda k=keyring, h=f"Bearer {token}": identify(k, h, None), args.calls)
            print(f"identities {size:>5}: identify {spent:8.1f} us a request; SHA-256 alone {floor:.2f} us "
                  f"({spent / floor:.0f}x)")


if __name__ == "__main__":
    main()
