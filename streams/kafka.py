"""Every Kafka client tribunal makes outside Faust's own, made here.

One place for what every client shares (the bootstrap servers, and how it connects: TLS, SASL,
from `streams.settings`) and for tribunal's defaults: producers are idempotent, consumers read
committed records only and never commit offsets of their own (tribunal's readers follow topics,
they are not consumer groups). Faust's clients take their settings from `streams.worker.app`.
"""

from __future__ import annotations

import logging
import ssl
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from streams.errors import ConfigError
from streams.settings import Settings

if TYPE_CHECKING:
    from pydantic import BaseModel

    M = TypeVar("M", bound=BaseModel)

log = logging.getLogger(__name__)
FETCH_WAIT_MS = 100
"""How long the broker may hold a fetch for data, for a worker's side consumer and for its Faust consumer while
it recovers. A broker answers one connection's requests in order, so an offset lookup sent behind a held
fetch waits for it: with Faust's 1.5 s a restart's recovery spent seconds so (streams.worker.faust_private,
`fetch_briefly_while_recovering`)."""


class _LastError(logging.Handler):
    """aiokafka's last error message: why a connection failed (a wrong password, an untrusted certificate) is
    only logged, and the exception raised says no more than "Unable to bootstrap". Being a handler on aiokafka's
    logger, it also keeps commands that configure no logging from printing aiokafka's lines and tracebacks."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.last: str | None = None
        self.at = 0.0

    def emit(self, record: logging.LogRecord) -> None:
        self.last, self.at = record.getMessage().splitlines()[0], record.created

    def recent(self, seconds: float = 60.0) -> str | None:
        """The last error, if it was logged within `seconds` (a daemon's older one was about something else)."""
        import time

        return self.last if self.last is not None and time.time() - self.at <= seconds else None


_last_error = _LastError()
logging.getLogger("aiokafka").addHandler(_last_error)


def reason(e: BaseException) -> str:
    """One line on why a Kafka call failed, with the cause aiokafka only logged when it could not connect."""
    from aiokafka.errors import KafkaConnectionError

    text = str(e) if str(e).startswith("[Error") else f"{type(e).__name__}: {e}"
    logged = _last_error.recent()
    if isinstance(e, KafkaConnectionError) and logged:
        text += f" ({logged})"
    return text


def retriable(e: BaseException) -> bool:
    """Whether `e` is how a call fails while a broker is lost and the cluster still serves: a broker not ready or
    unreachable, a partition or the controller moving, a request that timed out. Trying again later may work."""
    from aiokafka.errors import KafkaError, KafkaTimeoutError

    if isinstance(e, KafkaError):
        return bool(e.retriable) or isinstance(e, KafkaTimeoutError)
    return isinstance(e, (TimeoutError, ConnectionError))


def error_for(code: int, message: str) -> Any:
    """The aiokafka error of a response's error `code` (its class says whether it is `retriable`)."""
    from aiokafka.errors import for_code

    return for_code(code)(message)


SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"  # Java clients' and brokers' JAAS modules
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def sasl_login(s: Settings, protocol_says: str) -> tuple[str, str]:
    """The SASL user name and password; `protocol_says` names what asks for them in the error if one is missing."""
    if not s.sasl_username or s.sasl_password is None:
        raise ConfigError(f"{protocol_says} needs TRIBUNAL_SASL_USERNAME and TRIBUNAL_SASL_PASSWORD")
    return s.sasl_username, s.sasl_password.get_secret_value()


def security(settings: Settings | None = None) -> dict[str, Any]:
    """aiokafka's keyword arguments for connecting as `settings` say (default: as the environment says)."""
    s = settings if settings is not None else Settings()
    options: dict[str, Any] = {"security_protocol": s.security_protocol}
    if s.security_protocol in ("SSL", "SASL_SSL"):
        options["ssl_context"] = tls_context(s)
    if s.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        user, password = sasl_login(s, f"security protocol {s.security_protocol}")
        options |= {"sasl_mechanism": s.sasl_mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
    return options


def tls_context(s: Settings) -> ssl.SSLContext:
    """The brokers must present a certificate that chains to `ssl_cafile` (else the system's CAs) and names the
    host connected to; a client certificate is offered if one is set."""
    from aiokafka.helpers import create_ssl_context

    def path(p: Any) -> str | None:
        return None if p is None else str(p)

    try:
        return create_ssl_context(cafile=path(s.ssl_cafile), certfile=path(s.ssl_certfile),
                                  keyfile=path(s.ssl_keyfile),
                                  password=s.ssl_key_password.get_secret_value() if s.ssl_key_password else None)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"cannot load the TLS files ({s.ssl_cafile}, {s.ssl_certfile}, {s.ssl_keyfile}): "
                          f"{e}") from None


def faust_credentials(settings: Settings) -> Any:
    """The same, as Faust's `broker_credentials` (None: plaintext), which Faust hands to every client it makes."""
    import faust

    options = security(settings)
    if settings.security_protocol == "SSL":
        return faust.SSLCredentials(options["ssl_context"])
    if "sasl_mechanism" in options:
        return faust.SASLCredentials(username=options["sasl_plain_username"],
                                     password=options["sasl_plain_password"], mechanism=options["sasl_mechanism"],
                                     ssl_context=options.get("ssl_context"))
    return None


@lru_cache(maxsize=1 << 16)
def partition_for(key: str, partitions: int) -> int:
    """The partition Kafka's default partitioner gives `key` (murmur2, as the Java client and aiokafka)."""
    from aiokafka.partitioner import murmur2

    return (murmur2(key.encode("utf-8")) & 0x7FFFFFFF) % partitions


def producer(bootstrap: str, **options: Any) -> Any:
    """An idempotent `AIOKafkaProducer` (not started)."""
    from aiokafka import AIOKafkaProducer

    return AIOKafkaProducer(bootstrap_servers=bootstrap, **{"enable_idempotence": True, **security(), **options})


def consumer(bootstrap: str, *topics: str, **options: Any) -> Any:
    """A read_committed `AIOKafkaConsumer` outside any group, committing nothing (not started)."""
    from aiokafka import AIOKafkaConsumer

    defaults = {"group_id": None, "isolation_level": "read_committed", "enable_auto_commit": False}
    return AIOKafkaConsumer(*topics, bootstrap_servers=bootstrap, **{**defaults, **security(), **options})


def admin(bootstrap: str, **options: Any) -> Any:
    """An `AIOKafkaAdminClient` (not started)."""
    from aiokafka.admin import AIOKafkaAdminClient

    return AIOKafkaAdminClient(bootstrap_servers=bootstrap, **{**security(), **options})


def object_of(raw: bytes | None) -> dict[str, Any] | None:
    """`raw` as a JSON object, or None (no value, not JSON, not an object), quietly: for readers that only look."""
    import orjson

    if not raw:
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def json_object(record: Any) -> dict[str, Any] | None:
    """A consumed record's value as a JSON object, or None, with a warning naming where it is, when it is not
    one. A client reads what other programs wrote: it skips what it cannot read and goes on past it (its offset
    is committed with the rest), rather than stop and read the same record again forever."""
    import orjson

    if not record.value:
        return None  # a tombstone, or nothing: nothing to read, and nothing wrong
    try:
        value = orjson.loads(record.value)
    except orjson.JSONDecodeError as e:
        _skipped(record, f"not JSON ({e})")
        return None
    if not isinstance(value, dict):
        _skipped(record, "not a JSON object")
        return None
    return value


def validated(record: Any, value: dict[str, Any], model: type[M]) -> M | None:
    """`value` (read from `record`) as `model`, or None, with a warning, when it is not one (see `json_object`)."""
    from pydantic import ValidationError

    try:
        return model.model_validate(value)
    except ValidationError as e:
        first = e.errors(include_url=False)[0]
        _skipped(record, f"not a {model.__name__}: {'.'.join(map(str, first['loc']))}: {first['msg']}")
        return None


def _skipped(record: Any, why: str) -> None:
    log.warning("skipped %s[%d]@%d: %s", record.topic, record.partition, record.offset, why)
