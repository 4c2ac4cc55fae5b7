"""The command line's nouns: every old flat name still runs its command and says the new one, and every command a
document, an example or a deployment names is one the CLI has (issue 58)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from streams.cli import cli
from streams.cli.renamed import RENAMED, STRICT_ENV
from tests.helpers import TRIBUNAL

ROOT = Path(__file__).resolve().parents[2]
ROOT_COMMAND = typer.main.get_command(cli)
NOUNS = ("pools", "groups", "dispatch", "shards", "audit", "topics", "infra")


def _old_line(old: str) -> list[str]:
    return {"dlq": ["dlq", "redrive"], "jobs": ["jobs", "show"], "policy": ["policy", "apply"],
            "acl": ["acl", "apply"]}.get(old, [old])


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_an_old_name_runs_the_new_command_and_says_what_to_type(old: str) -> None:
    line = _old_line(old)
    new = [*RENAMED[old], *line[1:]]
    runner = CliRunner()
    said = runner.invoke(cli, [*line, "--help"], env={STRICT_ENV: ""})
    today = runner.invoke(cli, [*new, "--help"], env={STRICT_ENV: ""})
    assert said.exit_code == 0 and today.exit_code == 0, (said.output, today.output)
    told = "tribunal topics redrive" if old == "dlq" else f"tribunal {' '.join(RENAMED[old])}"
    assert f"is now `{told}`" in said.stderr and "until tribunal 0.3.0" in said.stderr
    assert today.stderr == ""  # the new name says nothing more
    assert said.stdout.split("\n", 1)[1] == today.stdout.split("\n", 1)[1]  # the same command's help, usage aside
    refused = runner.invoke(cli, [*line, "--help"], env={STRICT_ENV: "error"})
    assert refused.exit_code == 2 and "refused" in refused.stderr and "Usage" not in refused.stdout


def test_an_old_family_keeps_its_own_verbs_only() -> None:
    runner = CliRunner()
    moved = runner.invoke(cli, ["dlq", "redrive", "--help"], env={STRICT_ENV: ""})
    assert moved.exit_code == 0 and "`tribunal topics redrive`" in moved.stderr
    never = runner.invoke(cli, ["dlq", "create", "--help"], env={STRICT_ENV: ""})  # `dlq` never had it
    assert never.exit_code == 2 and "No such command 'create'" in never.output


@pytest.mark.parametrize(("flag", "noun"), [("--group", "groups"), ("--namespace", "dispatch"),
                                            ("--job-set", "shards")])
def test_the_old_state_of_another_fold_says_that_folds_state(flag: str, noun: str) -> None:
    runner = CliRunner()
    said = runner.invoke(cli, ["pools", "state", flag, "k", "--web", "127.0.0.1:1"], env={STRICT_ENV: ""})
    assert f"`tribunal state {flag}` is now `tribunal {noun} state {flag}`" in said.stderr
    refused = runner.invoke(cli, ["pools", "state", flag, "k", "--web", "127.0.0.1:1"], env={STRICT_ENV: "error"})
    assert refused.exit_code == 2 and "refused" in refused.stderr
    assert f"{noun} state" in runner.invoke(cli, [noun, "state", "--help"]).stdout  # which exists


def test_an_old_name_in_a_script_works_and_keeps_its_stdout_clean() -> None:
    done = subprocess.run([TRIBUNAL, "task-processes", "--state-dir", "/nonexistent"], capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", STRICT_ENV: ""}, timeout=60)
    new = subprocess.run([TRIBUNAL, "shards", "processes", "--state-dir", "/nonexistent"],
                         capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, timeout=60)
    assert done.returncode == new.returncode == 0, (done.stderr, new.stderr)
    assert done.stdout == new.stdout  # what a script reads is the same
    assert "`tribunal task-processes` is now `tribunal shards processes`" in done.stderr


def test_help_lists_the_nouns_and_the_first_commands_and_no_old_name() -> None:
    listed = [name for name in ROOT_COMMAND.list_commands(typer.Context(ROOT_COMMAND))]  # type: ignore[attr-defined]
    assert listed == ["worker", "run", "demo", "console", *NOUNS]
    assert not set(listed) & set(RENAMED)


def _walk(words: list[str]) -> str | None:
    """Why `tribunal <words...>` is not a command (None: it is one, or a family of them)."""
    command: Any = ROOT_COMMAND
    path = ["tribunal"]
    for word in words:
        if not hasattr(command, "commands"):
            return None  # a command's own arguments follow
        if word not in command.commands:
            return f"`{' '.join([*path, word])}`: {' '.join(path)} has {', '.join(sorted(command.commands))}"
        command = command.commands[word]
        path.append(word)
    return None


def test_a_name_the_cli_lacks_is_told() -> None:
    assert _walk(["pools", "metric", "ats"]) is None and _walk(["dispatch"]) is None
    assert _walk(["metric", "ats"]) == "`tribunal metric`: tribunal has " + ", ".join(sorted(ROOT_COMMAND.commands))
    assert (_walk(["dispatch", "jobs", "assgin"]) or "").startswith("`tribunal dispatch jobs assgin`: ")


CODE = re.compile(r"```.*?```|`[^`\n]+`", re.S)
COMMAND = re.compile(r"(?:^|[\s`\"'(=/])tribunal((?:[ \t]+[a-z][a-z-]*)+)", re.M)


def _documents() -> Iterator[tuple[Path, str]]:
    """Where users read commands: the README, the docs, the examples, the deployments, the Makefile, and the
    strings of the code (help, errors, docstrings), in their code spans."""
    for path in [ROOT / "README.md", ROOT / "Makefile", ROOT / "docker-compose.yml", ROOT / ".ci" / "run",
                 *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "examples").iterdir()),
                 *sorted(p for p in (ROOT / "deploy").rglob("*.yaml") if "vendor" not in p.parts),
                 *sorted((ROOT / "streams").rglob("*.py")), *sorted((ROOT / "streams").rglob("*.html")),
                 *sorted((ROOT / "schemas").glob("*.py")), *sorted((ROOT / "infra").glob("*.sh")),
                 *sorted((ROOT / "bench").glob("*.py"))]:
        text = path.read_text()
        if path.name in ("renamed.py", "changelog.md"):  # the old names are their subject
            continue
        if path.suffix in (".md", ".py", ".html"):
            text = "\n".join(m.group(0).strip("`") for m in CODE.finditer(text))
        else:  # a command in a script or a container's command line, not a comment's prose
            text = re.sub(r'",\s*"', " ", text)  # a YAML list `["tribunal", "pools", "actuate"]` as a line
            text = "\n".join(m.group(0) for m in re.finditer(r'(?:bin/|"|compose exec \w+ )tribunal[ \t][^\n]*', text))
        yield path, text


def test_every_command_a_document_names_exists() -> None:
    wrong, seen = [], 0
    for path, text in _documents():
        for match in COMMAND.finditer(text):
            seen += 1
            words = match.group(1).split()
            if (why := _walk(words)) is not None:
                wrong.append(f"{path.relative_to(ROOT)}: {why}")
    assert seen > 200  # the documents were read
    assert not wrong, "\n".join(sorted(set(wrong)))
