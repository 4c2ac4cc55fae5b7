"""`versioned.Versioned`: every version keeps its items, whichever versions were read or changed in between."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.versioned import Versioned

KEYS = st.sampled_from([f"{b}{i}" for b in "abc" for i in range(4)])  # three buckets of four keys


def bucket_of(key: str) -> str:
    return key[0]


# An operation: (which version it starts from, as an index into the versions so far, modulo; what it does)
OPERATIONS = st.lists(st.tuples(st.integers(0, 10**6), st.one_of(
    st.tuples(st.just("set"), KEYS, st.integers(0, 9)),
    st.tuples(st.just("delete"), KEYS),
    st.tuples(st.just("added"), st.lists(st.tuples(KEYS, st.integers(0, 9)), max_size=5)),
    st.tuples(st.just("untouched")),
    st.tuples(st.just("read"), KEYS),
)), max_size=40)


def check(version: Versioned[int], model: dict[str, int]) -> None:
    """`version` holds exactly `model`'s items, by every way of reading it."""
    assert len(version) == len(model)
    assert dict(version.items()) == model
    assert sorted(version.keys()) == sorted(model)
    assert sorted(version.values()) == sorted(model.values())
    for name in "abc":
        assert version.bucket(name) == sorted((k, v) for k, v in model.items() if bucket_of(k) == name)
        assert sorted(version.in_bucket(name)) == sorted(v for k, v in model.items() if bucket_of(k) == name)
    assert version.names() == sorted({bucket_of(k) for k in model})
    for key in [f"{b}{i}" for b in "abc" for i in range(4)]:
        assert version.get(key) == model.get(key)
        assert (key in version) == (key in model)


@settings(max_examples=300, deadline=None)
@given(OPERATIONS, st.lists(st.integers(0, 10**6), max_size=30), st.booleans())
def test_every_version_keeps_its_items(operations: list[tuple[int, Any]], reads: list[int], start_full: bool) -> None:
    """Changes made to any version, newest or older, in any order, and reads of any version in any order: each
    version holds what a dict copied at each change would (so also what `touched` names), and an older version read
    again after a newer one was changed is unchanged."""
    first = {"a0": 1, "b1": 2} if start_full else {}
    versions: list[Versioned[int]] = [Versioned.of_items(bucket_of, first.items())]
    models: list[dict[str, int]] = [dict(first)]
    touched: list[frozenset[str]] = [frozenset()]
    for at, op in operations:
        index = at % len(versions)
        version, model = versions[index], dict(models[index])
        names = touched[index]
        if op[0] == "set":
            _, key, value = op
            after, model[key], names = version.set(key, value), value, names | {bucket_of(key)}
        elif op[0] == "delete":
            key = op[1]
            if key not in model:
                with pytest.raises(KeyError):
                    version.delete(key)
                check(version, model)
                continue
            after, names = version.delete(key), names | {bucket_of(key)}
            del model[key]
        elif op[0] == "added":
            after = version.added(op[1])
            for key, value in op[1]:
                model[key] = value
                names = names | {bucket_of(key)}
        elif op[0] == "untouched":
            after, names = version.untouched(), frozenset()
        else:
            assert version.get(op[1]) == model.get(op[1])
            continue
        assert after.touched == names
        check(after, model)
        versions.append(after)
        models.append(model)
        touched.append(names)
    for at in reads:  # the versions read back in any order: each rerooted in turn
        index = at % len(versions)
        check(versions[index], models[index])
    for version, model in zip(versions, models, strict=True):
        check(version, model)


def test_equal_by_items_and_empty_versions_apart() -> None:
    """Two versions are equal when they hold the same items, whatever their history; changes to the empty map (the
    start of every namespace) make maps that do not share a store, so two of them read independently."""
    empty: Versioned[int] = Versioned(bucket_of)
    one, other = empty.set("a0", 1), empty.set("b0", 2)
    assert one.store is not other.store
    assert one != other
    assert one.set("b0", 2) == other.set("a0", 1)
    assert one.delete("a0") == empty
    assert dict(one.items()) == {"a0": 1} and dict(other.items()) == {"b0": 2}
    assert empty.get("a0") is None and len(empty) == 0


def test_a_map_emptied_and_changed_again_names_every_bucket_touched_since_untouched() -> None:
    """An emptied map's next change starts a new store (`set`, `added`): what the record touched before still
    counts, as a timeout that ends a namespace's last job and an assign in the same record both do."""
    emptied = Versioned.of_items(bucket_of, [("a0", 1)]).untouched().delete("a0")
    assert emptied.touched == {"a"} and len(emptied) == 0
    assert emptied.set("b0", 2).touched == {"a", "b"}
    assert emptied.added([("c0", 3), ("b1", 4)]).touched == {"a", "b", "c"}
    assert dict(emptied.added([("c0", 3)]).items()) == {"c0": 3}


def test_items_added_are_taken_whole_before_the_store_changes() -> None:
    """`added`'s items may read another version of the same store, or fail half-way: neither leaves a version
    reading what it did not hold."""
    old = Versioned.of_items(bucket_of, [("a0", 1)])
    new = old.set("a1", 2)
    after = new.added((key, old.get("a0") or 0) for key in ("b0", "b1"))  # reads `old` while it is being added
    assert dict(after.items()) == {"a0": 1, "a1": 2, "b0": 1, "b1": 1}
    assert dict(old.items()) == {"a0": 1} and dict(new.items()) == {"a0": 1, "a1": 2}

    def failing() -> Iterator[tuple[str, int]]:
        yield "c0", 3
        raise ValueError("half-way")

    with pytest.raises(ValueError, match="half-way"):
        after.added(failing())
    assert dict(after.items()) == {"a0": 1, "a1": 2, "b0": 1, "b1": 1} and len(after) == 4
