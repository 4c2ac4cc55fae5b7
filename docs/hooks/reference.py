"""MkDocs hook: the pages generated at build time, so they cannot drift: the home page from README.md, and the
reference from what the code itself declares (the CLI from the Typer app, the topics from the AsyncAPI document,
the records from their JSON Schemas, the REST API from its OpenAPI document, each file checked current by the
test suite)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"


def on_files(files: Files, config: Any) -> Files:
    for path, content in (("index.md", home()), ("reference/cli.md", cli()), ("reference/topics.md", topics()),
                          ("reference/records.md", records()), ("reference/rest-api.md", rest_api())):
        files.append(File.generated(config, path, content=content))
    return files


def home() -> str:
    """The site's home page is the README, its links into docs/ made relative to the site."""
    return (ROOT / "README.md").read_text().replace("](docs/", "](")


def cli() -> str:
    import typer
    import typer.cli
    import typer.main

    from streams.cli import cli as app  # importing the package registers every command family

    command = typer.main.get_command(app)
    docs = typer.cli.get_docs_for_click(obj=command, ctx=typer.Context(command), name="tribunal")
    return "# CLI\n\nEvery command of `.venv/bin/tribunal`, with its options (`--help` shows the same).\n\n" + \
        docs.replace("# `tribunal`", "## `tribunal`", 1).replace("\n# `", "\n## `")


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def topics() -> str:
    document = json.loads((SCHEMAS / "asyncapi.json").read_text())
    writers: dict[str, list[str]] = {}
    readers: dict[str, list[str]] = {}
    for operation in document["operations"].values():
        channel = operation["channel"]["$ref"].rsplit("/", 1)[-1]
        who = operation["summary"].split(" ", 1)[0]
        (writers if operation["action"] == "send" else readers).setdefault(channel, []).append(who)
    lines = ["# Topics", "", f"Every topic of tribunal {document['info']['version']}, from its AsyncAPI 3.0 document "
             "(`schemas/asyncapi.json`, `make schemas`). Names carry the deployment's prefix "
             "(`TRIBUNAL_TOPIC_PREFIX`). Records: [Records](records.md).", "",
             "| topic | records | written by | read by | compacted | what |", "|---|---|---|---|---|---|"]
    for cid, channel in document["channels"].items():
        config = channel["bindings"]["kafka"]["topicConfiguration"]
        messages = ", ".join(f"[{m}](records.md#{m.lower()})" if m not in ("RedriveMarker", "Forwarded") else m
                             for m in channel["messages"])
        lines.append(f"| `{channel['title']}` | {messages} | {', '.join(sorted(set(writers.get(cid, []))))} | "
                     f"{', '.join(sorted(set(readers.get(cid, []))))} | "
                     f"{'yes' if config['cleanup.policy'] == ['compact'] else ''} | {_cell(channel['description'])} |")
    return "\n".join(lines) + "\n"


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})" if (SCHEMAS / "json" / f"{name}.json").exists() else name
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " or ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        items = schema.get("prefixItems")
        return f"[{', '.join(_type(i) for i in items)}]" if items else f"list of {_type(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"map of {_type(schema['additionalProperties'])}"
    words = (("minimum", ">="), ("maximum", "<="), ("minLength", "length >="), ("maxLength", "length <="))
    bounds = [f"{word} {schema[key]}" for key, word in words if key in schema]
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def records() -> str:
    lines = ["# Records", "", "Every record tribunal reads or writes, from its JSON Schema (`schemas/json/`, exported "
             "from the pydantic models of `schemas/` by `make schemas`). Fields marked required must be present; "
             "no other field is allowed.", ""]
    for path in sorted((SCHEMAS / "json").glob("*.json")):
        schema = json.loads(path.read_text())
        required = set(schema.get("required", ()))
        lines += [f"## {path.stem}", "", _cell(schema.get("description", "")), "",
                  "| field | type | required | what |", "|---|---|---|---|"]
        for name, field in schema.get("properties", {}).items():
            lines.append(f"| `{name}` | {_cell(_type(field))} | {'yes' if name in required else ''} | "
                         f"{_cell(field.get('description', ''))} |")
        lines.append("")
    return "\n".join(lines)


def rest_api() -> str:
    document = json.loads((SCHEMAS / "openapi" / "dispatcher-api.json").read_text())
    lines = ["# REST API", "", _cell(document["info"]["description"]), "",
             "`tribunal dispatch api` serves this document at `/openapi.json` (checked in as "
             "`schemas/openapi/dispatcher-api.json`); the test suite fuzzes the live API against it with "
             "schemathesis.", ""]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            lines += [f"## {method.upper()} `{path}`", "", _cell(operation["summary"]), ""]
            if operation.get("description"):
                lines += [_cell(operation["description"]), ""]
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body:
                lines += [f"Body: `{body['$ref'].rsplit('/', 1)[-1]}` (below).", ""]
            lines += ["| status | meaning |", "|---|---|"]
            lines += [f"| {status} | {_cell(r['description'])} |" for status, r in operation["responses"].items()]
            lines.append("")
    lines += ["## Bodies", ""]
    for name, schema in document["components"]["schemas"].items():
        required = set(schema.get("required", ()))
        lines += [f"### {name}", "", "| field | type | required | what |", "|---|---|---|---|"]
        lines += [f"| `{f}` | {_cell(_type(s)).replace('(#', '(records.md#')} | {'yes' if f in required else ''} | "
                  f"{_cell(s.get('description', ''))} |" for f, s in schema.get("properties", {}).items()]
        lines.append("")
    return "\n".join(lines)
