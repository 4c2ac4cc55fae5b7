"""File replay: an exported log (JSON lines, `streams.lines`) through the same pure fold the agents run.

Records are applied in file order; lines of topics tribunal does not read (an export of its own
outputs, say) are skipped and counted.

The replayer (`replayer`) folds each record; a replay on several processes (`parallel`) gives the same bytes;
the lines read and written are the export-line format (`streams.lines`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from streams.lines import output_line, records_of
from streams.replay.parallel import derive_all, encode_all
from streams.replay.replayer import Replayer


def replay_lines(lines: Iterable[bytes | str], replayer: Replayer | None = None, jobs: int = 1) -> Iterator[bytes]:
    """The output lines derived from a replay file's lines, on `jobs` processes (the same bytes whatever `jobs`)."""
    replayer = replayer or Replayer()
    for _, outputs in derive_all(records_of(lines), replayer, jobs):
        for out in outputs:
            yield output_line(out)


def replay_blocks(lines: Iterable[bytes | str], replayer: Replayer | None = None, jobs: int = 1) -> Iterator[bytes]:
    """`replay_lines`' bytes, newlines included, in blocks of many lines (what `tribunal audit replay` writes)."""
    return encode_all(lines, replayer or Replayer(), jobs)
