"""Scheduler groups (SPEC §4): the rejection-limits fold, split by concern.

`state` (the group and its indexes), `events` (one change each), `snapshot` (reconciling with
ZooKeeper), `emission` (what is written after each event), `offers` (orphans to schedulers),
`fold` (the entry point), `codec` (the table entry), `view` (what operators read).
"""

from streams.core.groups.codec import dump, load
from streams.core.groups.emission import ALERTS, GROUP_HEALTH, JOB_OFFERS, OUTPUTS, REJECTION_LIMITS
from streams.core.groups.fold import INPUTS, JOB_EVENTS, SCHEDULER_EVENTS, apply, fold_event, key_of
from streams.core.groups.offers import offers
from streams.core.groups.state import Figures, GroupState, Member, limit

__all__ = ["ALERTS", "GROUP_HEALTH", "INPUTS", "JOB_EVENTS", "JOB_OFFERS", "OUTPUTS", "REJECTION_LIMITS",
           "SCHEDULER_EVENTS", "Figures", "GroupState", "Member", "apply", "dump", "fold_event", "key_of", "limit",
           "load", "offers"]
