"""Pydantic v2 models of every record tribunal reads or writes.

These are the wire formats (SPEC §1); `schemas/json/` holds their exported JSON Schema, kept
current by a test, so producers and consumers in other languages can validate against it.
"""

from schemas.common import Cause
from schemas.envelope import CommandEnvelope, MetricBody
from schemas.records import DeadLetter

__all__ = ["Cause", "CommandEnvelope", "DeadLetter", "MetricBody"]
