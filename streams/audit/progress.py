"""A progress bar (rich, on stderr) that appears only once a run has taken more than a second."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any


class LazyProgress:
    def __init__(self, description: str, total: int | None = None, delay: float = 1.0) -> None:
        self.description, self.total, self.delay = description, total, delay
        self.started = time.monotonic()
        self.done = 0
        self.bar: Any = None
        self.task: Any = None

    def __enter__(self) -> LazyProgress:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self.bar is not None:
            self.bar.stop()

    def phase(self, description: str, total: int | None = None) -> None:
        self.description, self.total, self.done = description, total, 0
        if self.bar is not None:
            self.bar.update(self.task, description=description, total=total, completed=0)

    def advance(self, count: int = 1) -> None:
        self.done += count
        if self.bar is None:
            if time.monotonic() - self.started < self.delay:
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=Console(stderr=True))
            self.bar.start()
            self.task = self.bar.add_task(self.description, total=self.total, completed=self.done)
        else:
            self.bar.update(self.task, completed=self.done)
