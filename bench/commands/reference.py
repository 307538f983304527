"""The CLI reference as Markdown, read from the parsers themselves (`bench.cli.cli_reference` passes the one
`bench` builds): every command, its options (flags, default, allowed values, help), and for a declared option
(bench.experiment.options) whether it is part of a result's identity. Nothing here restates an option: a new one
appears because its parser has it; its range is the one checked (bench.experiment.option_ranges.ranges, the
owners' ranges for options filling TrainConfig or EncoderOptions fields)."""

from __future__ import annotations

import argparse
from typing import Any

from bench.commands.common import registry_names


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").replace("%%", "%")


def _default(action: argparse.Action, declared: Any) -> str:
    if declared is not None and declared.env_default is not None:
        return "off, or its environment variable"
    if isinstance(action, (argparse._StoreTrueAction, argparse._VersionAction, argparse._HelpAction)):
        return ""
    if action.required or action.default in (None, "", [], argparse.SUPPRESS):
        return ""
    return f"`{action.default}`"


def _allowed(action: argparse.Action, rule: Any) -> str:
    if action.choices:  # a command's actions too (`bench db ACTION`)
        return ", ".join(f"`{c}`" for c in action.choices)
    return rule.describe() if rule is not None else ""


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        name = action.metavar or action.dest or "|".join(map(str, action.choices or ()))
        return f"`{_cell(name)}`"
    words = [f"`{flag}`" for flag in action.option_strings]
    if action.nargs != 0 and not isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        words[-1] = f"`{action.option_strings[-1]} {action.metavar or action.dest.upper()}`"
    if isinstance(action, argparse._AppendAction):
        words[-1] += " (repeatable)"
    return ", ".join(words)


def command_reference(name: str, parser: argparse.ArgumentParser, summary: str | None = None,
                      heading: str = "## `bench {name}`") -> str:  # fmt: skip
    """One command's section: its one-line summary (`bench --help`'s; else the description's first paragraph) and a
    table of its options; then a subsection per action of a command that has them (`bench db upgrade`)."""
    if summary is None and parser.description:
        summary = parser.description.strip().split("\n\n", 1)[0]
    from bench.experiment.option_ranges import ranges
    from bench.experiment.options import COMMANDS, options_of

    declared = options_of(name) if name in COMMANDS else {}
    checked = ranges(name)
    lines = [heading.format(name=name), ""]
    if summary:
        lines += [_cell(registry_names(summary)), ""]
    lines += ["| option | default | allowed | identity | what it does |", "|---|---|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        option = declared.get(action.dest)
        identity = "yes" if option is not None and option.identity else ""
        text = registry_names(option.help if option is not None else action.help or "")  # the default has its column
        lines.append(f"| {_flags(action)} | {_default(action, option)} | {_allowed(action, checked.get(action.dest))} "
                     f"| {identity} | {_cell(text)} |")  # fmt: skip
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for sub, subparser in action.choices.items():
                lines += ["", command_reference(f"{name} {sub}", subparser, helps.get(sub), "### bench {name}")]
    return "\n".join(lines)


def cli_reference(parser: argparse.ArgumentParser) -> str:
    """The whole reference: `bench`'s own options, then one section per command, in the order `bench --help`
    lists them. "identity": part of the config hash (changing it gives another result; see
    docs/concepts/options-and-identity.md)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in sub._choices_actions}
    sections = ["# Command-line reference", "",
                "Generated from the parsers (`bench.cli.cli_reference()`); every option's default, allowed values and "
                "whether it is part of a result's identity (its config hash).", ""]  # fmt: skip
    for name, command in sub.choices.items():
        sections += [command_reference(name, command, helps.get(name)), ""]
    return "\n".join(sections).rstrip() + "\n"
