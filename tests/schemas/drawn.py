"""Values of a JSON Schema as pydantic exports them, drawn edges first (the properties of tests/core/test_edges.py).

hypothesis-jsonschema would be the library for this, but its last release (0.23.1) reaches into Hypothesis
internals that current Hypothesis no longer has. This covers what tribunal's exported schemas use: `$ref` into
`$defs`, `anyOf`/`oneOf`, `const`, `enum`, the JSON types with their bounds, `prefixItems`, and objects with
`required` and `additionalProperties`. Where a schema gives an integer no bound, values past 64 bits are drawn
too: a record may carry them, and must be refused, not folded.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from schemas.common import INT64_MAX, INT64_MIN

LONGEST_LIST = 4  # lists are drawn short (a record's largest list is a test of its own)
TEXT = st.characters(codec="utf-8", exclude_categories=("Cs",))  # any character JSON can carry, é and 𝄞 too


def values(schema: dict[str, Any], root: dict[str, Any] | None = None) -> st.SearchStrategy[Any]:
    root = schema if root is None else root
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return st.deferred(lambda: values(root["$defs"][name], root))
    for combined in ("anyOf", "oneOf"):
        if combined in schema:
            return st.one_of([values(option, root) for option in schema[combined]])
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return values(schema["allOf"][0], root)
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([values({**schema, "type": k}, root) for k in kind])
    if kind == "integer":
        return _integers(schema)
    if kind == "number":
        low, high = schema.get("minimum"), schema.get("maximum")
        edges = [v for v in (low, high, 0, 0.5, 1e300) if v is not None and (low is None or v >= low)
                 and (high is None or v <= high)]
        return st.one_of(st.sampled_from(edges), st.floats(low, high, allow_nan=False, allow_infinity=False))
    if kind == "string":
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True).filter(
                lambda s: len(s) >= low and (high is None or len(s) <= high))
        longest = [st.just("é" * high)] if high is not None and high <= 10_000 else []
        return st.one_of(st.text(TEXT, min_size=low, max_size=min(high or 20, 20)), *longest)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        if "prefixItems" in schema:
            return st.tuples(*(values(item, root) for item in schema["prefixItems"])).map(list)
        low = schema.get("minItems", 0)
        high = max(low, min(schema.get("maxItems", LONGEST_LIST), LONGEST_LIST))
        return st.lists(values(schema.get("items", {}), root), min_size=low, max_size=high)
    if kind == "object" or "properties" in schema:
        return _objects(schema, root)
    return st.one_of(st.none(), st.booleans(), _integers({}), st.text(TEXT, max_size=5))  # any JSON value


def _integers(schema: dict[str, Any]) -> st.SearchStrategy[int]:
    low, high = schema.get("minimum"), schema.get("maximum")
    if "exclusiveMinimum" in schema:
        low = schema["exclusiveMinimum"] + 1
    if "exclusiveMaximum" in schema:
        high = schema["exclusiveMaximum"] - 1
    edges = [low, high, 0, 1, -1, INT64_MAX, INT64_MIN]
    if high is None:
        edges += [INT64_MAX + 1, 10**30]
    if low is None:
        edges += [INT64_MIN - 1]
    within = sorted({v for v in edges if v is not None and (low is None or v >= low) and (high is None or v <= high)})
    return st.one_of(st.sampled_from(within), st.integers(low, high))


@st.composite
def _objects(draw: st.DrawFn, schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties", {})
    required = set(schema.get("required", ()))
    drawn = {name: draw(values(sub, root)) for name, sub in sorted(properties.items())  # a tag (`const`) always:
             if name in required or "const" in sub or draw(st.booleans())}  # an untagged record is one drawn case
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict) and not properties:  # a mapping: names to values
        names = st.text(TEXT, min_size=1, max_size=8)
        drawn |= draw(st.dictionaries(names, values(extra, root), max_size=LONGEST_LIST))
    return drawn
