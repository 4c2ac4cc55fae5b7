"""The dispatcher (SPEC §5, seed 002): timed jobs under global and per-worker caps, split by concern.

`heap` (persistent queues), `state` (jobs, workers, queues), `fold` (the entry point), `commands` (what
each command does), `rules` (the clock, starts under the caps, the ends of attempts, health), `emission`
(the outputs, numbered), `reports` (a job's finish, failure or cancel, read fast), `codec` (the table
entry), `view` (what operators read).
"""

from streams.core.dispatch.codec import buckets, dump, load
from streams.core.dispatch.fold import (
    DISPATCH_COMMANDS,
    DISPATCHER_HEALTH,
    INPUTS,
    JOB_OUTCOMES,
    JOB_STARTS,
    OUTPUTS,
    TICKS,
    acceptable_starts,
    apply,
    job_uuid,
    key_of,
)
from streams.core.dispatch.state import DispatchState

__all__ = ["DISPATCHER_HEALTH", "DISPATCH_COMMANDS", "INPUTS", "JOB_OUTCOMES", "JOB_STARTS", "OUTPUTS", "TICKS",
           "DispatchState", "acceptable_starts", "apply", "buckets", "dump", "job_uuid", "key_of", "load"]
