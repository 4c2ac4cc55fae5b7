"""The secured local stack's credentials: a private CA, the brokers' certificate and the SCRAM users.

`tribunal infra up --secure` makes them once into `<home>/credentials/` (files readable by their owner
only) and formats the brokers' storage with the users' SCRAM credentials (KIP-900), so the stack
authenticates from its first start:

* `ca.pem`: the CA every client trusts (`TRIBUNAL_SSL_CAFILE`); `broker-keystore.pem`: the brokers' key
  and certificate (for 127.0.0.1), signed by it; Kafka reads PEM directly (KIP-651).
* `users.json`: a random password per principal. `admin` (the operator: topics, ACLs), `broker`
  (brokers among themselves) and `controller` (the KRaft controller listener, PLAIN) are super users;
  `worker`, `producer` and `auditor` get only what `tribunal infra acl apply` grants them.
* `<principal>.env`: the `TRIBUNAL_*` settings that connect as that principal (`set -a; . worker.env`).

Why the controller listener authenticates too: with a PLAINTEXT controller listener the broker
registers as `User:ANONYMOUS`, which must then be a super user, and anyone reaching that port could
change ACLs or delete topics without a password (tried on this stack).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from streams.kafka import PLAIN_LOGIN, SCRAM_LOGIN

SUPER_USERS = ("admin", "broker", "controller")
CLIENTS = ("worker", "producer", "auditor")
SCRAM = "SCRAM-SHA-512"
ZOOKEEPER_USER = "tribunal"  # the digest identity of tribunal's services in ZooKeeper (streams.zk.client)


@dataclass(frozen=True)
class Credentials:
    """The files of one secured stack, under `directory`."""

    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def keystore(self) -> Path:
        return self.directory / "broker-keystore.pem"

    @property
    def users_file(self) -> Path:
        return self.directory / "users.json"

    def passwords(self) -> dict[str, str]:
        return dict(json.loads(self.users_file.read_text()))

    def make(self) -> None:
        """Create whatever is missing (idempotent: a running stack's credentials are never replaced)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.directory.chmod(0o700)
        if not self.users_file.exists():
            names = (*SUPER_USERS, *CLIENTS, ZOOKEEPER_USER)
            write_private(self.users_file, json.dumps({n: secrets.token_urlsafe(18) for n in names}, indent=2))
        if not (self.ca.exists() and self.keystore.exists()):
            ca_pem, keystore_pem = _certificates()
            write_private(self.ca, ca_pem)
            write_private(self.keystore, keystore_pem)
        for user in (*CLIENTS, "admin"):
            write_private(self.env_file(user), "".join(f"{k}={v}\n" for k, v in self.env(user).items()))

    def env_file(self, user: str) -> Path:
        return self.directory / f"{user}.env"

    def settings(self, user: str) -> dict[str, str]:
        """The `streams.settings.Settings` fields of a tribunal client connecting as `user` (the worker and the
        administrator also sign in to ZooKeeper)."""
        passwords = self.passwords()
        fields = {"security_protocol": "SASL_SSL", "sasl_mechanism": SCRAM, "sasl_username": user,
                  "sasl_password": passwords[user], "ssl_cafile": str(self.ca)}
        if user in ("worker", "admin"):
            fields["zookeeper_auth"] = f"{ZOOKEEPER_USER}:{passwords[ZOOKEEPER_USER]}"
        return fields

    def env(self, user: str) -> dict[str, str]:
        """The same as `TRIBUNAL_*` environment variables."""
        return {f"TRIBUNAL_{name.upper()}": value for name, value in self.settings(user).items()}

    def broker_properties(self) -> dict[str, str]:
        """What a broker of the secured stack adds to its server.properties (listeners aside)."""
        p = self.passwords()
        return {
            "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config":
                f'{PLAIN_LOGIN} required username="controller" password="{p["controller"]}" '
                f'user_controller="{p["controller"]}";',
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": f"{SCRAM},SCRAM-SHA-256",
            "sasl.mechanism.inter.broker.protocol": SCRAM,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                f'{SCRAM_LOGIN} required username="broker" password="{p["broker"]}";',
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": f"{SCRAM_LOGIN} required;",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": ";".join(f"User:{u}" for u in SUPER_USERS),
            "allow.everyone.if.no.acl.found": "false",
        }

    def scram_arguments(self) -> list[str]:
        """`kafka.tools.StorageTool format` arguments that store every SCRAM user with the brokers' metadata. The
        tool takes them on its command line only: for the second or two it runs (once, when the stack is first
        made) another local user could read them with `ps`. A local stack's price; a production cluster's users
        are made by its operators' own means."""
        return [arg for user, password in self.passwords().items() if user not in ("controller", ZOOKEEPER_USER)
                for arg in ("--add-scram", f"{SCRAM}=[name={user},password={password}]")]


def write_private(path: Path, text: str) -> None:
    """Written readable by its owner only from the start (never briefly readable by others), also a file an
    earlier version wrote with a wider mode."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


CERTIFICATE_DAYS = 825  # the longest validity browsers and Java accept for a server certificate


def _certificates(expired: bool = False) -> tuple[str, str]:
    """A self-signed CA, and a key and certificate for 127.0.0.1 and localhost signed by it (PEM: the CA's
    certificate; the broker's unencrypted PKCS#8 key followed by its certificate, as Kafka's PEM keystore
    reads it). `expired`: the broker's certificate ran out yesterday (what clients must refuse; a test's)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tribunal local CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=CERTIFICATE_DAYS))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=CERTIFICATE_DAYS if expired else 0, minutes=5))
            .not_valid_after(now + datetime.timedelta(days=-1 if expired else CERTIFICATE_DAYS))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                        x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    return ca.public_bytes(pem).decode(), key_pem + cert.public_bytes(pem).decode()
