"""MkDocs hook: the reference pages that must not drift from the code are rendered from it at build time.

A page holds a marker line `<!-- generated: NAME -->`; `on_page_markdown` replaces it with `GENERATORS[NAME]()`:
the command line from the parsers `bench` itself builds (every command, option, default, allowed values and help),
results.json from its JSON schema, the database schema from its SQLAlchemy models, the published-score reproduction and the claim verdicts from the JSON files the
benchmarks write (docs/results/), and the citations from the declarations `bench results --cite` reads.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
if str(ROOT) not in sys.path:  # the checkout's code, also when mkdocs runs from another environment's entry point
    sys.path.insert(0, str(ROOT))


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _ranges() -> dict[tuple[str, str], str]:
    """(command, --flag) -> the allowed values its declaration gives (bench.experiment.options)."""
    from bench.experiment import options

    out = {}
    for opt in options.OPTIONS:
        allowed = ", ".join(map(str, opt.choices)) if opt.choices else (str(opt.range) if opt.range else "")
        for command in opt.commands:
            out[(command, opt.flag)] = allowed
    return out


def cli() -> str:
    """Every `bench` command and option, from the parser `bench` builds (bench.cli.build_parser)."""
    from bench.cli import build_parser

    parser = build_parser()
    ranges = _ranges()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {c.dest: c.help for c in sub._choices_actions}
    lines = []
    for name, command in sub.choices.items():
        lines += [f"## `bench {name}`", "", _cell(helps.get(name) or command.description or ""), ""]
        if command.description and command.description != helps.get(name):
            lines += [command.description, ""]
        lines += ["```text", command.format_usage().strip(), "```", ""]
        rows = []
        nested = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        for action in command._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
                continue
            flag = ", ".join(action.option_strings) or action.dest
            default = "" if action.default in (None, False, argparse.SUPPRESS) or action.required else action.default
            allowed = ranges.get((name, action.option_strings[-1] if action.option_strings else action.dest), "")
            if not allowed and action.choices:
                allowed = ", ".join(map(str, action.choices))
            help_text = (action.help or "") % vars(action) if "%(" in (action.help or "") else (action.help or "")
            rows.append(f"| `{flag}` | {_cell(f'`{default}`' if default != '' else '')} | {_cell(allowed)} | "
                        f"{_cell(help_text)} |")  # fmt: skip
        if rows:
            lines += ["| option | default | allowed | what it does |", "|---|---|---|---|", *rows, ""]
        for inner in nested:
            for sub_name, sub_parser in inner.choices.items():
                lines += [f"### `bench {name} {sub_name}`", "", "```text", sub_parser.format_usage().strip(), "```", ""]
                sub_rows = []
                for action in sub_parser._actions:
                    if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
                        continue
                    flag = ", ".join(action.option_strings) or action.dest
                    default = "" if action.default in (None, False) else action.default
                    sub_rows.append(f"| `{flag}` | {_cell(default)} | {_cell(action.help or '')} |")
                if sub_rows:
                    lines += ["| option | default | what it does |", "|---|---|---|", *sub_rows, ""]
    return "\n".join(lines)


def _schema_rows(node: dict, path: str, required: set[str], rows: list[str]) -> None:
    for key, sub in node.get("properties", {}).items():
        here = f"{path}.{key}" if path else key
        kinds = sub.get("type") or ("const " + json.dumps(sub["const"]) if "const" in sub else "") or (
            "one of " + ", ".join(map(json.dumps, sub["enum"])) if "enum" in sub else "")
        if isinstance(kinds, list):
            kinds = " or ".join(kinds)
        if "oneOf" in sub:
            kinds = " or ".join(s.get("type", "object") for s in sub["oneOf"])
        rows.append(f"| `{here}` | {_cell(kinds)} | {'yes' if key in required else ''} | {_cell(sub.get('description', ''))} |")
        for child in [sub, *sub.get("oneOf", []), sub.get("items", {}) or {}]:
            if isinstance(child, dict) and "properties" in child:
                _schema_rows(child, here + ("[]" if child is sub.get("items") else ""), set(child.get("required", [])), rows)


def results_json() -> str:
    """Every field of results.json, from bench/report/results.schema.json (what tests validate each file against)."""
    schema = json.loads((ROOT / "bench" / "report" / "results.schema.json").read_text())
    rows: list[str] = []
    _schema_rows(schema, "", set(schema.get("required", [])), rows)
    return "\n".join([f"*{schema['title']}*", "", "| field | type | required | meaning |", "|---|---|---|---|", *rows])


def reproduction() -> str:
    """benchmarks/reproduce.py's output (docs/results/published.json) as a table."""
    data = json.loads((RESULTS / "published.json").read_text())
    rows = [f"| {r['dataset']} | {r['metric']} | {r['n']:,} | {r['published']:.2f} | {r['measured']:.2f} | "
            f"{r['difference']:+.2f} | {r['seconds']} |" for r in data["rows"]]  # fmt: skip
    return "\n".join([f"Model: {data['model']}; measured on {data['cores']} CPU cores ({data['machine']}).", "",
                      "| dataset | metric | items | published (MTEB) | measured | difference | seconds |",
                      "|---|---|---|---|---|---|---|", *rows])  # fmt: skip


def claims() -> str:
    """benchmarks/reproduce.py --claim's output (docs/results/claims.json): each claim's verdict rows."""
    path = RESULTS / "claims.json"
    if not path.exists():
        return "No claim verdicts recorded yet: `python benchmarks/reproduce.py --claim claims/laser3-length.toml` writes them."
    data = json.loads(path.read_text())
    out = []
    for claim in data["claims"]:
        out += [f"### {claim['file']} (scale {claim['scale']})", "", f"Measured on {claim['machine']}, code {claim.get('code', 'unknown')}: "
                f"{claim['seconds']} s.", "", "```text", claim["verdicts"].rstrip(), "```", ""]  # fmt: skip
    return "\n".join(out)


def database() -> str:
    """Each table of the results database and its columns, from the SQLAlchemy models (results_db/models.py)."""
    from results_db.models import SCHEMA_VERSION, Base

    out = [f"Schema version {SCHEMA_VERSION}.", ""]
    for table in Base.metadata.sorted_tables:
        out += [f"### `{table.name}`", "", "| column | type | null | key |", "|---|---|---|---|"]
        for col in table.columns:
            key = "primary" if col.primary_key else ", ".join(f"→ `{fk.target_fullname}`" for fk in col.foreign_keys)
            out.append(f"| `{col.name}` | {_cell(col.type)} | {'yes' if col.nullable else 'no'} | {key} |")
        for index in sorted(table.indexes, key=lambda i: i.name or ""):
            unique = "unique " if index.unique else ""
            out.append(f"\n{unique}index `{index.name}` on {', '.join(f'`{c.name}`' for c in index.columns)}")
        out.append("")
    return "\n".join(out)


def citations() -> str:
    """What each registered method, suite, attack and catalog dataset cites, then the whole bibliography."""
    from bench.data.catalog import CATALOG
    from bench.evaluate.attacks.registry import FAMILIES
    from bench.evaluate.suites.metadata import SUITES
    from bench.report.citations import bibliography, resolve
    from bench.train.registry import all_methods

    def keys(cites: tuple[str, ...]) -> str:
        return ", ".join(f"`{resolve(c)[0]}`" for c in cites)

    rows = [*(("method", s.name, s.cite) for s in all_methods()), *(("suite", m.name, m.cite) for m in SUITES.values()),
            *(("attack", f.name, f.cite) for f in FAMILIES.values()), *(("dataset", d.name, d.cite) for d in CATALOG.values())]  # fmt: skip
    table = ["| kind | name | cites |", "|---|---|---|", *(f"| {k} | `{n}` | {keys(c)} |" for k, n, c in rows)]
    bib = "\n\n".join(bibliography().values())
    return "\n".join([*table, "", "## The bibliography", "", "```bibtex", bib, "```"])


GENERATORS: dict[str, Callable[[], str]] = {"cli": cli, "results-json": results_json, "reproduction": reproduction,
                                            "claims": claims, "database": database, "citations": citations}  # fmt: skip


def render(markdown: str) -> str:
    """The page with each `<!-- generated: NAME -->` line replaced by its generator's Markdown."""
    out = []
    for line in markdown.splitlines():
        stripped = line.strip()
        if stripped.startswith("<!-- generated:") and stripped.endswith("-->"):
            name = stripped[len("<!-- generated:"):-3].strip()
            if name not in GENERATORS:
                raise KeyError(f"docs marker {stripped!r}: no generator {name!r} (known: {', '.join(GENERATORS)})")
            out.append(GENERATORS[name]())
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 - MkDocs' hook signature
    return render(markdown)
