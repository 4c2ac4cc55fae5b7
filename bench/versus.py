"""One bench run from two trees in turn, several rounds in one sitting: each figure before, after, and their ratio.

This machine's speed drifts by a factor of two within minutes (a neighbour's load), so a figure measured
alone, or before and after at different times, says little: the first sitting of issue 38's second part
reported a gain that was noise. Here the trees take turns (the order flips every round), and each figure
is reported as the median of each tree's runs and the median of the per-round ratios after / before (above
1 is faster for a rate, slower for a time: read the line). A number that is the same in every run (a pool
size, the machine line) is a label, not a figure.

`--before` is a commit (checked out to a temporary worktree, its core compiled as `make setup` would) or a
tree's path; `--after` is a tree's path, this one by default. Each run is `bench/<script>` from its tree,
with that tree's `streams` first on the path (a module an older tree lacks would still be found in this one,
through the editable install: each tree runs its own bench script, which imports only what its tree has). The
header says which core each tree runs (an edit since the build runs pure).
Run: `.venv/bin/python bench/versus.py --before REV [--rounds 3] core_fold.py [-- --repeat 1]`.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from machine import describe  # type: ignore[import-not-found]

HERE = Path(__file__).resolve().parent.parent
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def tree_of(before: str, scratch: Path) -> Path:
    """A tree for `before`: its path, or a worktree of the commit with its core compiled (pure if it has none)."""
    if Path(before).is_dir():
        return Path(before).resolve()
    tree = scratch / "before"
    subprocess.run(["git", "-C", str(HERE), "worktree", "add", "--detach", str(tree), before], check=True,
                   capture_output=True)
    if (tree / "infra" / "compile_core.py").exists():
        subprocess.run([sys.executable, "infra/compile_core.py"], cwd=tree, env=_env(tree), check=True,
                       capture_output=True)
    return tree


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def run(tree: Path, script: str, args: list[str]) -> list[str]:
    done = subprocess.run([sys.executable, f"bench/{script}", *args], cwd=tree, env=_env(tree),
                          capture_output=True, text=True)
    if done.returncode:  # a tree's bench may not take the other's arguments: say which and why
        raise SystemExit(f"bench/{script} in {tree} exited with {done.returncode}:\n{done.stderr[-2000:]}")
    return done.stdout.splitlines()


def core_of(tree: Path) -> str:
    """Which core a tree's benches run (a source edited since the build runs pure: worth seeing before reading)."""
    if not (tree / "streams" / "compiled.py").exists():  # asked anyway, the editable install would answer for this one
        return "pure Python (no compiled core in this tree)"
    done = subprocess.run([sys.executable, "-c", "from streams.compiled import running; print(running())"], cwd=tree,
                          env=_env(tree), capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else "pure Python (no compiled core in this tree)"


def figures(lines: list[str]) -> dict[tuple[int, int], float]:
    """Every number of the output, by (line, place in the line)."""
    return {(i, j): float(m.group().replace(",", "")) for i, line in enumerate(lines)
            for j, m in enumerate(NUMBER.finditer(line))}


def report(template: list[str], before: list[dict[tuple[int, int], float]],
           after: list[dict[tuple[int, int], float]]) -> list[str]:
    """Per line that holds figures: the line, then each figure's before, after and ratio."""
    rows = []
    for i, line in enumerate(template):
        places = [key for key in sorted(after[0]) if key[0] == i and all(key in run for run in (*before, *after))]
        varying = [key for key in places if len({run[key] for run in (*before, *after)}) > 1]
        if not varying:
            continue
        rows.append(line.strip())
        header = template[i - 1].split() if i else []  # a table's column names, when the line above has one each
        named = len(header) == len(NUMBER.findall(line)) and not NUMBER.search(template[i - 1])
        for key in varying:
            ratios = [a[key] / b[key] for a, b in zip(after, before, strict=True) if b[key]]
            name = header[key[1]] if named else f"#{key[1] + 1}"
            rows.append(f"    {name}: before {statistics.median(r[key] for r in before):,.6g}, after "
                        f"{statistics.median(r[key] for r in after):,.6g}, after / before "
                        f"{statistics.median(ratios):.2f} (rounds {', '.join(f'{r:.2f}' for r in ratios)})")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="a commit or a tree's path")
    parser.add_argument("--after", type=Path, default=HERE, help="a tree's path (this one)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("script", help="a bench script, e.g. core_fold.py")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="after --: the script's own arguments")
    options = parser.parse_args()
    args = options.args[1:] if options.args[:1] == ["--"] else options.args
    with tempfile.TemporaryDirectory(prefix="tribunal-versus-") as scratch:
        before_tree = tree_of(options.before, Path(scratch))
        try:
            befores: list[dict[tuple[int, int], float]] = []
            afters: list[dict[tuple[int, int], float]] = []
            template: list[str] = []
            for round_ in range(options.rounds):
                order = [("before", before_tree), ("after", options.after.resolve())]
                for name, tree in order if round_ % 2 == 0 else order[::-1]:
                    lines = run(tree, options.script, args)
                    (befores if name == "before" else afters).append(figures(lines))
                    template = lines if name == "after" else template
            print(describe())
            print(f"bench/{options.script} {' '.join(args)}: before {options.before} ({core_of(before_tree)}), "
                  f"after {options.after} ({core_of(options.after.resolve())}), {options.rounds} rounds alternated")
            print("\n".join(report(template, befores, afters)))
        finally:
            if not Path(options.before).is_dir():
                subprocess.run(["git", "-C", str(HERE), "worktree", "remove", "--force", str(before_tree)],
                               capture_output=True)


if __name__ == "__main__":
    main()
