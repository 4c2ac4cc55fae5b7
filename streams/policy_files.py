"""Loading policy documents from YAML or JSON files, including the seed's documents as written.

The seed's JSON has trailing commas; JSON with trailing commas is valid YAML flow syntax, so one
YAML parser reads both. A file may hold a full policy record (`kind`, `version`, ...), or a bare
seed document: a list of apps (a decider policy) or a driver object with `Spec`/`Sepc` (justice).
A bare document gets its version from `--version`, else from a hash of its content.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from schemas.policy import DeciderPolicy, JusticePolicy, PolicyRecord
from streams import pool_sizes
from streams.errors import ConfigError

_POLICY: TypeAdapter[DeciderPolicy | JusticePolicy] = TypeAdapter(PolicyRecord)


class PolicyInvalid(ConfigError):
    """A policy document that does not validate; `problems` lists every error found."""

    def __init__(self, source: str, problems: list[str]) -> None:
        super().__init__(f"{source}: {len(problems)} problem(s): " + " | ".join(problems))
        self.problems = problems


def content_version(document: Any) -> str:
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()[:12]


def as_record(document: Any, version: str | None = None, capacity: int | None = None) -> dict[str, Any]:
    """The policy record for a document: full records pass through, bare seed documents are wrapped."""
    if isinstance(document, dict) and "kind" in document:
        record = dict(document)
    elif isinstance(document, list):
        record = {"kind": "decider", "version": version or content_version(document), "apps": document}
    elif isinstance(document, dict) and "App" in document:
        record = {"kind": "justice", "version": version or content_version(document), "policy": document}
    else:
        raise PolicyInvalid("document", ["not a policy: expected a record with 'kind', a list of apps "
                                         "(decider), or an object with 'App' and 'Spec' (justice)"])
    if version:
        record["version"] = version
    if capacity is not None:
        record["capacity"] = capacity
    return record


def _where(loc: tuple[Any, ...], record: dict[str, Any]) -> str:
    """A readable location that names the app: `apps[1] (hadoop).Priority`."""
    parts: list[str] = []
    node: Any = record
    for step in loc:
        if isinstance(step, int):
            parts[-1:] = [f"{parts[-1] if parts else ''}[{step}]"]
            node = node[step] if isinstance(node, list) and step < len(node) else None
            if isinstance(node, dict) and "App" in node:
                parts[-1] += f" ({node['App']})"
        else:
            if step in ("decider", "justice") and not parts:
                continue  # the discriminator's branch, not a field
            parts.append(str(step))
            node = node.get(step) if isinstance(node, dict) else None
    return ".".join(parts) or "policy"


def validate(record: dict[str, Any], source: str = "policy") -> DeciderPolicy | JusticePolicy:
    try:
        policy = _POLICY.validate_python(record)
    except ValidationError as e:
        problems = [f"{_where(tuple(err['loc']), record)}: {err['msg'].removeprefix('Value error, ')}"
                    for err in e.errors()]
        raise PolicyInvalid(source, problems) from None
    if isinstance(policy, DeciderPolicy):
        try:
            pool_sizes.check(policy)
        except pool_sizes.RecordTooLarge as e:
            raise PolicyInvalid(source, [str(e)]) from None
    return policy


def load(path: Path, version: str | None = None, capacity: int | None = None) -> DeciderPolicy | JusticePolicy:
    """Read, wrap and validate a policy file; raise `PolicyInvalid` with every problem at once."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise PolicyInvalid(str(path), [f"not YAML or JSON: {e}"]) from None
    return validate(as_record(document, version, capacity), str(path))


def summary(policy: DeciderPolicy | JusticePolicy) -> str:
    """One line that says what a valid policy holds."""
    if isinstance(policy, DeciderPolicy):
        apps = ", ".join(f"{a.App} P{a.Priority} min {a.MinNum}" + (f" max {a.MaxNum}" if a.MaxNum is not None else "")
                         for a in policy.apps)
        start = policy.starting_instances()
        capacity = policy.capacity if policy.capacity is not None else sum(start.values())
        largest = max(pool_sizes.bounds(policy).values())
        return (f"valid decider policy {policy.version}: {len(policy.apps)} apps ({apps}); capacity {capacity}, "
                f"starting at " + ", ".join(f"{k} {v}" for k, v in start.items()) + _options(policy)
                + f"; its largest record at most {largest:,} bytes of {pool_sizes.RECORD_LIMIT:,}")
    rules = len(policy.policy.Spec)
    return (f"valid justice policy {policy.version}: driver {policy.policy.App}, {rules} rules"
            + (f", capacity {policy.capacity}" if policy.capacity is not None else ""))


def _options(policy: DeciderPolicy) -> str:
    """The optional behaviour a decider policy sets, as `; ...` clauses (nothing when it sets none)."""
    clauses = ["observe-only (decisions written, instances never changed)"] if policy.observe_only else []
    if policy.max_moves_per_decision is not None:
        clauses.append(f"at most {policy.max_moves_per_decision} instances move a decision")
    if policy.preempted_cooldown_s is not None:
        clauses.append(f"a preempted app is spared for {policy.preempted_cooldown_s:g} s")
    if policy.decisions == "changes":
        clauses.append("decisions carry what they changed, not the whole pool")
    for a in policy.apps:
        windows = [f"{d} {s:g} s" for d, s in (("up", a.scale_up_stabilization_s),
                                                 ("down", a.scale_down_stabilization_s)) if s]
        if windows:
            clauses.append(f"{a.App} stabilized " + ", ".join(windows))
        if a.stale_after_s:
            how, fallback = a.stale_handling()
            handled = how if fallback is None else f"as if it reported {fallback:g}"
            clauses.append(f"{a.App} stale after {a.stale_after_s:g} s: {handled}")
    return "".join(f"; {c}" for c in clauses)
