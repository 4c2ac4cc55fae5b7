"""The API's identities without a broker: the auth file keeps hashes only, names are never reused, a revocation is
seen on the next request, each role may do what its page says and no more, and the rate is a bucket per identity."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.dispatcher.auth import AuthError, AuthFile, Identity, Keyring, digest, may
from streams.dispatcher.guard import Rates, Unauthenticated, check_exposure, common_name, identify, loopback
from streams.errors import ConfigError
from tests.helpers import TRIBUNAL


def test_the_file_keeps_a_hash_never_the_token_and_is_private(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    token = AuthFile(path).create("alice", "tenant", ("ns",), "w1")
    text = path.read_text()
    assert token.startswith("trb_") and len(token) > 40
    assert token not in text and digest(token) in text
    assert path.stat().st_mode & 0o777 == 0o600
    [alice] = AuthFile(path).read()
    assert (alice.name, alice.role, alice.namespaces, alice.worker, alice.revoked) == ("alice", "tenant", ("ns",),
                                                                                      "w1", None)
    assert "hash" not in alice.public()


def test_names_are_never_reused_and_entries_are_checked(tmp_path: Path) -> None:
    auth = AuthFile(tmp_path / "auth.json")
    auth.create("bob", "admin", ("*",), None)
    auth.revoke("bob")
    with pytest.raises(ConfigError, match="never reused"):
        auth.create("bob", "admin", ("ns",), None)
    for bad in (("t", "tenant", ("ns",), None), ("a", "admin", ("ns",), "w1"), ("r", "root", ("ns",), None),
                ("n", "reader", (), None), ("\nx", "reader", ("ns",), None), ("x" * 201, "reader", ("ns",), None)):
        with pytest.raises(ConfigError):
            auth.create(*bad)
    with pytest.raises(ConfigError, match="no identity"):
        auth.revoke("nobody")


def test_a_revocation_holds_from_the_next_lookup_and_a_file_open_to_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    auth = AuthFile(path)
    token = auth.create("carol", "reader", ("ns",), None)
    keyring = Keyring(path)
    assert keyring.by_token(token) is not None and keyring.by_name("carol") is not None
    assert keyring.by_token(token + "x") is None and keyring.by_token("") is None
    auth.revoke("carol")
    assert keyring.by_token(token) is None and keyring.by_name("carol") is None  # no restart, no wait
    os.chmod(path, 0o644)
    with pytest.raises(AuthError, match="open to others"):
        keyring.by_token(token)
    with pytest.raises(AuthError, match="open to others"):
        Keyring(path)


def identity(role: str, namespaces: tuple[str, ...] = ("ns",), worker: str | None = None) -> Identity:
    return Identity(name=role, role=role, namespaces=namespaces, worker=worker)  # type: ignore[arg-type]


@given(st.sampled_from(["read", "cap", "assign", "report", "stream"]), st.sampled_from(["ns", "other"]),
       st.sampled_from([None, "w1", "w2"]), st.sampled_from(["admin", "tenant", "reader"]),
       st.sampled_from([("ns",), ("*",), ("other",)]))
def test_each_role_may_do_what_it_says_and_no_more(verb: str, namespace: str, worker: str | None, role: str,
                                                   namespaces: tuple[str, ...]) -> None:
    who = identity(role, namespaces, "w1" if role == "tenant" else None)
    allowed = may(who, verb, namespace, worker) is None  # type: ignore[arg-type]
    in_namespace = "*" in namespaces or namespace in namespaces
    expected = in_namespace and (role == "admin" or (role == "reader" and verb in ("read", "stream"))
                                 or (role == "tenant" and verb != "cap" and worker in (None, "w1")))
    assert allowed == expected


def test_a_request_is_identified_by_its_token_else_its_certificate(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    token = AuthFile(path).create("dave", "admin", ("ns",), None)
    AuthFile(path).create("erin.example", "tenant", ("ns",), "w1")
    keyring = Keyring(path)
    cert = {"subject": ((("countryName", "DE"),), (("commonName", "erin.example"),))}
    assert common_name(cert) == "erin.example" and common_name(None) is None
    assert identify(keyring, f"Bearer {token}", cert).name == "dave"
    assert identify(keyring, f"bearer  {token} ", None).name == "dave"
    assert identify(keyring, None, cert).name == "erin.example"
    for header, peer in ((None, None), ("Basic abc", None), ("Bearer ", None), (f"Bearer {token}x", cert),
                         (None, {"subject": ((("commonName", "mallory"),),)})):
        with pytest.raises(Unauthenticated) as refused:
            identify(keyring, header, peer)
        assert token not in str(refused.value)


def test_the_rate_is_a_bucket_per_identity() -> None:
    rates = Rates(rate=2.0, burst=3.0)
    assert [rates.wait("a", 100.0) for _ in range(3)] == [0, 0, 0]
    assert rates.wait("a", 100.0) == 1  # empty: half a second to the next token, said as 1 s
    assert rates.wait("b", 100.0) == 0  # another identity's bucket is its own
    assert rates.wait("a", 100.6) == 0  # refilled at 2 a second


def test_serving_others_without_authentication_is_refused_unless_said_out_loud(tmp_path: Path) -> None:
    assert loopback("127.0.0.1") and loopback("::1") and loopback("localhost") and not loopback("0.0.0.0")
    with pytest.raises(ConfigError, match="--auth-file"):
        check_exposure("0.0.0.0", None, False)
    check_exposure("0.0.0.0", None, True)
    check_exposure("0.0.0.0", tmp_path / "auth.json", False)
    check_exposure("127.0.0.1", None, False)
    done = subprocess.run([TRIBUNAL, "dispatch", "api", "--host", "0.0.0.0", "--port", "1"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1 and "refusing to serve" in done.stderr and "--insecure" in done.stderr


def test_the_token_commands_print_a_token_once_and_list_no_secret(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    made = subprocess.run([TRIBUNAL, "dispatch", "api", "token", "create", "--auth-file", str(path), "--name", "ops",
                           "--role", "admin", "--namespace", "ns", "--namespace", "ns2"],
                          capture_output=True, text=True, timeout=60, check=True)
    token = made.stdout.strip().splitlines()[-1]
    assert Keyring(path).by_token(token) is not None
    listed = subprocess.run([TRIBUNAL, "dispatch", "api", "token", "list", "--auth-file", str(path), "--json"],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    assert json.loads(listed)["namespaces"] == ["ns", "ns2"] and token not in listed and "sha256" not in listed
    subprocess.run([TRIBUNAL, "dispatch", "api", "token", "revoke", "ops", "--auth-file", str(path)], check=True,
                   capture_output=True, timeout=60)
    assert Keyring(path).by_token(token) is None
    os.chmod(path, 0o640)
    refused = subprocess.run([TRIBUNAL, "dispatch", "api", "--auth-file", str(path), "--port", "1"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "open to others" in refused.stderr
