"""The seed's command envelope, exactly as its Go producers send it (SPEC §1)."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, field_validator


class CommandEnvelope(BaseModel):
    """`{"Command": "app-metrical", "Channel": "plugin_decider", "Body": "{...}"}`.

    Body is a JSON *string* (the seed marshals the body first, then the envelope). Extra fields
    are tolerated: they are the producer's business, and rejecting them would drop valid metrics.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    Command: str = Field(min_length=1)
    Channel: str = Field(min_length=1)
    Body: str


class MetricBody(BaseModel):
    """The body of an `app-metrical` command: an app's load score in [0, 100]."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    App: str = Field(min_length=1)
    Metrical: float = Field(ge=0, le=100)

    @field_validator("Metrical", mode="before")
    @classmethod
    def _finite_number(cls, value: object) -> object:
        # JSON booleans are ints to pydantic, and NaN compares false to both bounds.
        if isinstance(value, bool) or (isinstance(value, float) and math.isnan(value)):
            raise ValueError("Metrical must be a number in [0, 100]")
        return value
