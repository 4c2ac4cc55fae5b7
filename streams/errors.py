"""The one exception base class of tribunal.

Every error tribunal raises on purpose derives from `TribunalError`, so the CLI can turn any of
them into a one-line reason and a non-zero exit without swallowing programming errors.
"""

from __future__ import annotations


class TribunalError(Exception):
    """Base of every error tribunal raises deliberately."""


class InfraError(TribunalError):
    """A local Kafka or ZooKeeper server could not be installed, started, or stopped."""


class ConfigError(TribunalError):
    """Settings or a document given by the operator are not usable."""


class NotFound(TribunalError):
    """What was asked for is not there: a decision or input in the log, a key or item in the worker."""
