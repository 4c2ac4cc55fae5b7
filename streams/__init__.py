"""tribunal: an event-sourced control plane for elastic scheduling.

`streams.core` holds the pure folds; everything else in this package is the imperative shell
around them (Faust agents, the CLI, the local infrastructure).
"""

__version__ = "0.1.0"

from streams.compiled import running

running()  # before anything imports the core: its compiled extensions, or its sources (streams/compiled.py)
