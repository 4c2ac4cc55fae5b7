"""A replay on several processes: keys are independent, so each process folds the keys it owns, and the outputs
are merged back into input order, the same bytes as on one process."""

from __future__ import annotations

import io
import multiprocessing
import os
import pickle
import queue
import stat
import zlib
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from itertools import chain, islice
from typing import Any

import orjson

from streams.core.folds import route, scope
from streams.core.source import SourceRecord
from streams.lines import BLANK, Output, ReplayInputError, record_in, records_of, row_of
from streams.replay.replayer import Derived, Replayer

CHUNK = 5_000  # records (or lines) per round trip to the processes
AHEAD = 3  # chunks handed out before the oldest one's results are awaited


def derive_all(records: Iterable[SourceRecord], replayer: Replayer, jobs: int = 1,
               chunk_size: int = CHUNK) -> Iterator[tuple[SourceRecord, list[Output]]]:
    """Each record with the outputs `replayer.feed` derives for it, in input order, folded on `jobs` processes.

    Keys are independent (a record changes one pool's or one group's state), so with `jobs > 1`
    each record goes to the process that owns its scope (a hash of fold and key), which folds its
    keys in input order; this process merges their outputs back into input order and numbers output
    offsets as `feed` does, so the bytes are the same as on one process.
    `replayer.counts` receives the processes' counts at the end.
    """
    if jobs <= 1:
        for record in records:
            yield record, replayer.feed(record)
        return
    for (chunk, shards), results in _in_parallel(_chunks(records, chunk_size), replayer, jobs, _derive_shard,
                                                 _by_scope(replayer.topic_prefix, jobs)):
        yield from _merge(replayer, chunk, shards, results)


def encode_all(lines: Iterable[bytes | str], replayer: Replayer, jobs: int = 1,
               chunk_size: int = CHUNK) -> Iterator[bytes]:
    """The output lines of a replay file's `lines`, in blocks of many (each line ends with a newline), folded on
    `jobs` processes: the bytes of `output_line` for each output of `derive_all`, whatever `jobs`.

    Each output is encoded once, by the process that folds it, as its line less the offset
    (`Replayer.encode`). With `jobs > 1` this process neither parses nor routes: every process is given every
    line, each parses every line to find which are its own (`_LineRouting`: by the key the line names, where
    that alone decides, without building the record) and builds, folds and encodes only those, and this process
    numbers their outputs in input order and joins the pieces (`_stitched`). Where `lines` is a regular file,
    each process reads it itself from where it stands (`_FileChunks`), and this process reads none of it;
    otherwise this process hands each chunk of lines whole to every process.
    """
    offsets: dict[bytes, int] = {}  # line_head (a topic and partition) -> the next output's offset
    if jobs <= 1:
        yield from _encode_alone(records_of(lines), replayer, chunk_size, offsets)
        return
    if jobs >= SKIP:
        raise ValueError(f"at most {SKIP - 1} processes replay lines (a line's shard is an unsigned short)")
    file = _FileChunks.of(lines, chunk_size)
    chunks: Iterable[Any] = file if file is not None else _line_chunks(lines, chunk_size)
    deal = _to_each(jobs) if file is not None else _whole_to_each(jobs)
    worker = partial(_encode_lines_shard, file=None if file is None else (file.path, file.position))
    for base, results in _in_parallel(chunks, replayer, jobs, worker, deal):
        shards = array("H", results[0][0])  # the first process's routing of every line: each routes alike
        if file is not None and len(shards) < chunk_size:
            file.ended = True  # the processes came to the file's end: no more chunks (those handed out: empty)
        stop = min((error[0] for *_, error in results if error is not None), default=None)
        if stop is not None:
            del shards[stop - base - 1:]  # lines are numbered from 1
        yield _stitched(shards, [result[1:4] for result in results], offsets)
        if stop is not None:
            raise ReplayInputError(next(error[1] for *_, error in results if error is not None and error[0] == stop))


class _FileChunks:
    """The chunks of a regular file as the processes read it themselves: each chunk the number of the line
    before it, until a process's answer shows the file ended (the processes, not this one, read it)."""

    def __init__(self, path: str, position: int, size: int) -> None:
        self.path, self.position, self.size = path, position, size
        self.ended = False

    @classmethod
    def of(cls, lines: Iterable[bytes | str], size: int) -> _FileChunks | None:
        """The chunks of `lines` if it is a regular file opened by its name in binary mode, read from where it
        stands; None for anything else (a pipe, standard input, a list)."""
        name = getattr(lines, "name", None)
        if not isinstance(name, str) or not isinstance(lines, io.BufferedReader):
            return None
        try:
            if not stat.S_ISREG(os.fstat(lines.fileno()).st_mode) or not os.path.samefile(name, lines.fileno()):
                return None
            return cls(name, lines.tell(), size)
        except (OSError, ValueError):
            return None

    def __iter__(self) -> Iterator[tuple[int, int]]:
        base = 0
        while not self.ended:
            yield base, self.size
            base += self.size


def _encode_alone(records: Iterable[SourceRecord], replayer: Replayer, chunk_size: int,
                  offsets: dict[bytes, int]) -> Iterator[bytes]:
    """`encode_all` on this process. Each record is folded as soon as it is read, and an input error
    (a bad line) comes after the lines of every record before it, as `replay_lines` writes them."""
    encode = replayer.encode
    heads: list[bytes] = []
    tails: list[bytes] = []
    read = 0
    try:
        for record in records:
            encode(record, heads, tails)
            read += 1
            if read == chunk_size:
                yield _numbered(heads, tails, offsets)
                heads, tails, read = [], [], 0
    except Exception:  # a bad line: the lines before it still go out, before the error
        if heads:
            yield _numbered(heads, tails, offsets)
        raise
    if heads:
        yield _numbered(heads, tails, offsets)


def _numbered(heads: list[bytes], tails: list[bytes], offsets: dict[bytes, int]) -> bytes:
    pieces: list[bytes | memoryview] = []
    _number(heads, tails, 0, len(heads), offsets, pieces)
    return b"".join(pieces)


Worker = Callable[[Any, Any, str, int, int], None]  # (inbox, outbox, topic prefix, its index, processes)
Dealer = Callable[[Any], tuple[list[Any], Any]]  # a chunk -> each process's part of it, and what the merge keeps


def _in_parallel(chunks: Iterable[Any], replayer: Replayer, jobs: int, worker: Worker, deal: Dealer
                 ) -> Iterator[tuple[Any, list[Any]]]:
    """For each chunk, in chunk order, what `deal` kept of it and every process's result for its part; `jobs`
    processes run `worker`.

    Queues, not pipes: a queue's put never blocks on a reader that is itself blocked writing (a pipe
    deadlocks there). `replayer.counts` receives the processes' counts at the end.
    """
    context = (multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods()
               else multiprocessing.get_context("spawn"))
    inboxes = [context.Queue() for _ in range(jobs)]
    outboxes = [context.Queue() for _ in range(jobs)]
    procs = [context.Process(target=worker, args=(inbox, outbox, replayer.topic_prefix, index, jobs), daemon=True)
             for index, (inbox, outbox) in enumerate(zip(inboxes, outboxes, strict=True))]
    for proc in procs:
        proc.start()
    handed: deque[Any] = deque()  # what was kept of the chunks whose results are not yet merged

    def oldest() -> tuple[Any, list[Any]]:
        return handed.popleft(), [_get(outbox, proc) for outbox, proc in zip(outboxes, procs, strict=True)]

    failed: ReplayInputError | None = None
    finished = False
    try:
        try:
            for chunk in chunks:
                parts, kept = deal(chunk)
                for inbox, part in zip(inboxes, parts, strict=True):
                    inbox.put(part)
                handed.append(kept)
                if len(handed) == AHEAD:
                    yield oldest()
        except ReplayInputError as e:  # a bad line: the outputs of every record before it first, as on one process
            failed = e
        while handed:
            yield oldest()
        if failed is not None:
            raise failed
        for inbox in inboxes:
            inbox.put(None)
        for outbox, proc in zip(outboxes, procs, strict=True):
            for name, count in _get(outbox, proc).items():
                replayer.counts[name] = replayer.counts.get(name, 0) + count
        finished = True
    finally:
        for proc in procs:
            if finished:
                proc.join(timeout=10)
            if proc.is_alive():  # stopped early (a bad line, the reader gone): the processes wait on their inbox
                proc.kill()
            proc.join()
        if not finished:  # what is still queued for them will never be read: exit without waiting to send it
            for inbox in inboxes:
                inbox.cancel_join_thread()


def _by_scope(prefix: str, jobs: int) -> Dealer:
    """Records dealt by this process: each to the process of its scope, as plain tuples (they cross a process
    boundary cheaply: a named tuple pickles its class); the chunk and its shards kept for the merge."""
    shard_of = _Sharding(prefix, jobs)

    def deal(chunk: list[SourceRecord]) -> tuple[list[Any], Any]:
        shards = [shard_of(record) for record in chunk]
        parts: list[list[tuple[Any, ...]]] = [[] for _ in range(jobs)]
        for record, shard in zip(chunk, shards, strict=True):
            parts[shard].append(tuple(record))
        return parts, (chunk, shards)

    return deal


def _whole_to_each(jobs: int) -> Dealer:
    """Lines handed whole to every process (each takes its own: `_LineRouting`), with the number of the line
    before them, pickled once for all (a queue pickles what it is given, for each process); that number kept for
    the merge."""
    def deal(chunk: tuple[int, list[bytes]]) -> tuple[list[Any], Any]:
        return [pickle.dumps(chunk, pickle.HIGHEST_PROTOCOL)] * jobs, chunk[0]

    return deal


def _to_each(jobs: int) -> Dealer:
    """The same small chunk (which lines to read from the file) to every process; the number of the line before
    them kept for the merge."""
    def deal(chunk: tuple[int, int]) -> tuple[list[Any], Any]:
        return [chunk] * jobs, chunk[0]

    return deal


def _line_chunks(lines: Iterable[bytes | str], size: int) -> Iterator[tuple[int, list[bytes]]]:
    """`lines` as bytes in lists of `size`, each with the number of the line before it."""
    chunk: list[bytes] = []
    base = 0
    for line in lines:
        chunk.append(line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass"))  # bad: refused there
        if len(chunk) == size:
            yield base, chunk
            base += size
            chunk = []
    if chunk:
        yield base, chunk


def _chunks(records: Iterable[SourceRecord], size: int) -> Iterator[list[SourceRecord]]:
    """`records` in lists of `size`; at a bad line, the records before it, then its error."""
    chunk: list[SourceRecord] = []
    try:
        for record in records:
            chunk.append(record)
            if len(chunk) == size:
                yield chunk
                chunk = []
    except ReplayInputError:
        if chunk:
            yield chunk
        raise
    if chunk:
        yield chunk


class _Sharding:
    """The process that folds a record's scope (a hash of fold and key; records of topics no fold reads:
    the first), remembered per scope, as a log has far fewer keys than records."""

    def __init__(self, prefix: str, jobs: int) -> None:
        self.prefix = prefix
        self.jobs = jobs
        self.known: dict[tuple[str, str], int] = {}

    def __call__(self, record: SourceRecord) -> int:
        found = scope(record, self.prefix)
        return 0 if found is None else self.of(found)

    def of(self, found: tuple[str, str]) -> int:
        shard = self.known.get(found)
        if shard is None:
            shard = self.known[found] = zlib.crc32(f"{found[0]}/{found[1]}".encode()) % self.jobs
        return shard


SKIP = 0xFFFF  # the shard of a blank line: nobody's (shards are unsigned shorts: `--jobs` is below it)


class _LineRouting(_Sharding):
    """The process a line goes to, found by every process alike from the line parsed (orjson: cheaper than any
    reading of its head; a raw-form line's head alone), without building its record where the record's own key
    decides (`Fold.keyed`)."""

    def __init__(self, prefix: str, jobs: int) -> None:
        super().__init__(prefix, jobs)
        self.keyed: dict[tuple[str, str | None], int] = {}  # (topic, key as the line says it) -> shard

    def line(self, line: bytes, number: int) -> tuple[int, Any, SourceRecord | None]:
        """The line's shard, the line parsed, and its record if it was built to route it (`ReplayInputError` if
        the line is no record)."""
        if line[:1] == b"[":  # the raw form: its head alone parsed and, where its key is known, nothing else
            tab = line.find(b"\t")
            try:
                head = orjson.loads(line[:tab]) if tab > 0 else None
                shard = self.keyed.get((head[0], head[4])) if type(head) is list and len(head) == 5 else None
            except (ValueError, TypeError):  # no head, or a key that is no key: `row_of` or `record_in` says so
                shard = None
            if shard is not None:
                return shard, (head, line, tab), None
        row = row_of(line, number)
        if row is BLANK:
            return SKIP, None, None
        topic: Any = None
        key: Any = None
        if type(row) is tuple:  # RawRow
            head = row[0]
            if type(head) is list and len(head) == 5:  # no sixth element: the key is as the line names it
                topic, key = head[0], head[4]
        elif isinstance(row, dict) and "key_b64" not in row:
            topic, key = row.get("topic"), row.get("key")
        if isinstance(topic, str) and (key is None or isinstance(key, str)):
            shard = self.keyed.get((topic, key))
            if shard is not None:
                return shard, row, None
            routed = route(topic, self.prefix)
            if routed is not None and routed[0] in routed[1].keyed:  # the key alone decides: a record of it will do
                shard = self.keyed[(topic, key)] = self(SourceRecord(topic, 0, 0, 0, None if key is None
                                                                     else key.encode(), None))
                return shard, row, None
        record = record_in(row, number)
        return self(record), row, record


def _get(outbox: Any, proc: Any) -> Any:
    """The next result of a process; an error if it died (rather than waiting for ever)."""
    while True:
        try:
            return outbox.get(timeout=5)
        except queue.Empty:
            if not proc.is_alive():
                raise ReplayInputError(f"a replay process exited with code {proc.exitcode}") from None


def _merge(replayer: Replayer, chunk: list[SourceRecord], shards: list[int],
           parts: list[Shipped]) -> Iterator[tuple[SourceRecord, list[Output]]]:
    """One chunk's outputs from every process, back in input order, numbered as `Replayer.feed` does."""
    cursors = [_unpacked(part) for part in parts]
    number = replayer.number
    for record, shard in zip(chunk, shards, strict=True):
        partition, timestamp = record.partition, record.timestamp
        yield record, number([(topic, partition, timestamp, key, value) for topic, key, value in next(cursors[shard])])


Shipped = tuple[bytes, list[str], bytes, bytes]  # a chunk's outputs from one process, as `_shipped` packs them


def _shipped(derived: list[list[Derived]]) -> Shipped:
    """A process's outputs for its records, packed to cross the process boundary as four objects: per
    record its output count, per output its topic and key, every value in one block, and where each
    ends. (Pickled as lists of tuples they cost a fifth of each process; an output's partition and
    timestamp are its record's, which the merging side has.)"""
    counts = array("I")
    names: list[str] = []
    values: list[bytes] = []
    for outputs in derived:
        counts.append(len(outputs))
        for topic, _, _, key, value in outputs:
            names += (topic, key)
            values.append(value)
    block, ends = _joined(values)
    return counts.tobytes(), names, ends, block


def _unpacked(shipped: Shipped) -> Iterator[list[tuple[str, str, bytes]]]:
    """Per record, in order, the (topic, key, value) of each output `_shipped` packed."""
    raw_counts, names, raw_ends, block = shipped
    values = _cut(block, raw_ends)
    at = 0
    for count in array("I", raw_counts):
        yield [(names[2 * i], names[2 * i + 1], bytes(values[i])) for i in range(at, at + count)]
        at += count


def _number(heads: list[bytes], tails: Sequence[bytes | memoryview], start: int, end: int, offsets: dict[bytes, int],
            pieces: list[bytes | memoryview]) -> None:
    """Outputs `start` to `end` of `heads` and `tails` as whole lines onto `pieces`, numbered on from `offsets`."""
    for at in range(start, end):
        head = heads[at]
        offset = offsets.get(head, 0)
        offsets[head] = offset + 1
        pieces += (head, b"%d" % offset, tails[at])


def _stitched(shards: Sequence[int], results: list[Encoded], offsets: dict[bytes, int]) -> bytes:
    """One chunk's lines from every process's `Encoded` share, back in input order, numbered."""
    counts = [array("I", raw) for raw, _, _ in results]
    heads = [h for _, h, _ in results]
    tails = [_cut(*tail) for _, _, tail in results]
    taken = [0] * len(results)  # records of each process merged so far
    at = [0] * len(results)  # outputs of each process merged so far
    pieces: list[bytes | memoryview] = []
    for shard in shards:
        if shard == SKIP:
            continue
        count = counts[shard][taken[shard]]
        taken[shard] += 1
        if count:
            start = at[shard]
            at[shard] = start + count
            _number(heads[shard], tails[shard], start, start + count, offsets, pieces)
    return b"".join(pieces)


Encoded = tuple[bytes, list[bytes], tuple[bytes, bytes]]  # one process's share of a chunk: per record its output
# count, per output its line head (`Replayer.encode`), and their tails (`_joined`)


def _joined(pieces: list[bytes]) -> tuple[bytes, bytes]:
    """Byte strings as one block and where each ends (`_cut` takes them apart): to cross a process boundary they
    cost a pickled object each (for line tails, a third of what the parent does per output) where one block costs
    a copy."""
    ends = array("Q")
    end = 0
    for piece in pieces:
        end += len(piece)
        ends.append(end)
    return b"".join(pieces), ends.tobytes()


def _cut(block: bytes, raw_ends: bytes) -> list[memoryview]:
    """The pieces `_joined` put in one block, each a view of it (copied only once, where it is used)."""
    ends = array("Q", raw_ends)
    view = memoryview(block)
    return [view[start:end] for start, end in zip(chain((0,), ends), ends, strict=False)]  # one start more


def _encode_lines_shard(inbox: Any, outbox: Any, topic_prefix: str, index: int, jobs: int,
                        file: tuple[str, int] | None = None) -> None:
    """One process's share of a parallel replay of lines: every line routed (`_LineRouting`), its own read, folded
    in order and encoded. Per chunk: the shard of each line (the first process's alone: every process routes
    alike), per own record its output count, per output its line head and tail, and the first bad line (its number
    and error) if it came to one, where it stopped. Its chunks are lines handed over, or with `file` (a path and
    where to start) how many lines to read next from that file."""
    replayer = Replayer(topic_prefix=topic_prefix)
    encode = replayer.encode
    routing = _LineRouting(topic_prefix, jobs)
    source = None
    if file is not None:
        source = open(file[0], "rb")  # noqa: SIM115 (read until the process ends)
        source.seek(file[1])
    while (part := inbox.get()) is not None:
        if source is not None:
            base, count = part
            lines: list[bytes] = list(islice(source, count))
        else:
            base, lines = pickle.loads(part)
        shards = array("H")
        counts = array("I")
        heads: list[bytes] = []
        tails: list[bytes] = []
        error: tuple[int, str] | None = None
        number = base
        try:
            for line in lines:
                number += 1
                shard, row, record = routing.line(line, number)
                if index == 0:  # the merge reads the first process's routing alone
                    shards.append(shard)
                if shard == index:
                    counts.append(encode(record or record_in(row, number), heads, tails))
        except ReplayInputError as e:
            error = (number, str(e))
        outbox.put((shards.tobytes(), counts.tobytes(), heads, _joined(tails), error))
    outbox.put(replayer.counts)


def _derive_shard(inbox: Any, outbox: Any, topic_prefix: str, _index: int, _jobs: int) -> None:
    """One process's share of a parallel replay: the keys sent to it, folded in the order received."""
    replayer = Replayer(topic_prefix=topic_prefix)
    while (part := inbox.get()) is not None:
        outbox.put(_shipped([replayer.derive(SourceRecord(*fields)) for fields in part]))
    outbox.put(replayer.counts)
