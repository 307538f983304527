"""A command's options (declared in bench.experiment.options) as the fields of its spec (`RunSpec` for `bench run`,
`EvalOptions` for `bench eval`), and Python values turned into those fields as the command's parser would turn its
argument strings into them.

A spec's fields are made from the declarations (`declared_fields(command)`, a class decorator): one field per
option read back from the spec's own attribute, with the declaration's default and type, so the command line, a
sweep point (TOML values) and the Python API (`lenbench.run`, `lenbench.evaluate`) share one declaration and a new
option needs no line in the spec.
`typed_options` accepts what a Python caller writes:

- a number where the option is a number (numpy's too), True/False (or 1/0) for a flag;
- for a repeatable option (`many`: --suite, --hp, --attack) any list, tuple, set or generator, or one string;
- for a comma-separated option (`joined`: --method, --seeds, --elong, --report-to) one string, or a list, tuple, set
  or generator of items (a set in sorted order), joined with commas: `seeds=[0, 1, 2]` is `--seeds 0,1,2`;
- anything else given several values is refused (never "the last one wins": that would run something else).

A bad value is a ValueError that names the keyword as the caller wrote it ("limit=0: ..."), never a flag.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import Field, dataclass, field, fields, replace
from typing import Any

from bench.experiment.option_types import FLAG, OptionValueError, positive_int  # noqa: F401 - re-exported
from bench.experiment.options import Option, options_of


def spec_field(command: str, name: str) -> Any:
    """The dataclass field of `bench COMMAND`'s option `name`: the declared default (a fresh list for a list), and
    the declaration in its metadata."""
    option = options_of(command)[name]
    meta = {"option": option}
    if isinstance(option.default, list):
        return field(default_factory=lambda: list(option.default), metadata=meta)
    return field(default=option.default, metadata=meta)


def own_attribute(option: Option) -> str | None:
    """The spec attribute an option is read back from when it is the spec's own (not a field of its TrainConfig or
    EncoderOptions, the opposite of a flag, or a setting the suites read), else None."""
    path = option.paths()[0]
    return None if "." in path or path.startswith("!") or path == SUITE_OPTIONS else path


def declared_fields(command: str) -> Callable[[type], type]:
    """A class decorator: the class as a dataclass whose first fields are `bench COMMAND`'s options read back from
    the spec's own attributes, in declaration order, each with its declared default and type (`spec_field`); the
    fields the class writes itself (its nested TrainConfig / EncoderOptions, the suites' options) follow."""

    def make(cls: type) -> type:
        own = dict(cls.__dict__.get("__annotations__", {}))
        declared: dict[str, str] = {}
        for name, option in options_of(command).items():
            attribute = own_attribute(option)
            if attribute is None or attribute in declared:
                continue
            if attribute in own:
                raise TypeError(f"{cls.__name__}.{attribute} is written in the class and declared as an option of "
                                f"`bench {command}`: remove it from the class")  # fmt: skip
            declared[attribute] = option.annotation()
            setattr(cls, attribute, spec_field(command, name))
        cls.__annotations__ = {**declared, **own}
        return dataclass(cls)

    return make


def keyword(name: str) -> str:
    """How an option is named to a Python caller: its keyword."""
    return name


def _several(value: Any) -> list[Any] | None:
    """The items of a list, tuple, set (sorted) or generator; None for one value (a string is one value)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable) or isinstance(value, dict):
        return None
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return list(value)


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    if type(value).__name__ in ("bool_", "bool") and hasattr(value, "item"):  # numpy.bool_
        return bool(value)
    raise ValueError(f"{name}={value!r}: a flag is True or False")


def _convert(option: Option, item: Any) -> Any:
    try:
        converted = option.type(str(item))
    except ValueError as exc:
        detail = str(exc) if option.type is positive_int else f"not a valid {option.type.__name__}"
        raise ValueError(f"{option.name}={item!r}: {detail}") from None
    if option.choices and converted not in option.choices:
        allowed = ", ".join(map(repr, option.choices))
        raise ValueError(f"{option.name}={converted!r}: invalid choice (choose from {allowed})")
    return converted


def unknown_option(name: str, command: str) -> ValueError:
    known = [n for n, o in options_of(command).items() if not o.hidden]
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f" (see `bench {command} --help`)"
    return ValueError(f"{name!r} is not a `bench {command}` option{hint}")


def typed_options(command: str, options: dict[str, Any]) -> dict[str, Any]:
    """`options` (name -> Python value) typed and checked as `bench COMMAND`'s parser would (see the module
    docstring), within their declared ranges; an unknown name is a ValueError naming the command."""
    from bench.experiment.option_ranges import check_numbers

    known = options_of(command)
    values: dict[str, Any] = {}
    for name, value in options.items():
        if name not in known:
            raise unknown_option(name, command)
        option = known[name]
        if option.type is FLAG:
            values[name] = _flag(name, value)
            continue
        if value is None:  # as an option left out: its default
            continue
        items = _several(value)
        if items is not None and option.joined:
            value, items = ",".join(str(i) for i in items), None
        if items is not None and not option.many:  # never "the last one wins": that runs something else
            raise ValueError(f"{name}={value!r}: one value expected, got a {type(value).__name__}")
        converted = [_convert(option, item) for item in (items if items is not None else [value])]
        values[name] = converted if option.many else converted[-1]
    check_numbers(values, keyword)  # the ranges the command checks on its command line (a ConfigError, a ValueError)
    return values


def argv_of(option: Option, value: Any) -> list[str]:
    """The command-line words that give `option` this value (none for a flag that is off or a value of None; a list
    repeats a repeatable option and joins a comma-separated one)."""
    if option.type is FLAG:
        return [option.flag] if value else []
    if value is None:
        return []
    items = _several(value)
    if items is not None and option.joined:
        items = [",".join(str(i) for i in items)]
    return [word for v in (items if items is not None else [value]) for word in (option.flag, str(v))]


def option_argv(command: str, options: dict[str, Any]) -> list[str]:
    """`bench COMMAND` command-line options for option name -> value (see `argv_of`)."""
    known = options_of(command)
    return [word for name, value in options.items() for word in argv_of(known[name], value)]


def command_text(command: str, options: dict[str, Any]) -> str:
    """The `bench COMMAND ...` line that gives `options` (name -> value; None and False left out), as Run.command
    records it (bench.experiment.record.command_line)."""
    from bench.experiment.record import command_line

    given = {k: v for k, v in options.items() if v is not None and v is not False}
    return command_line([command, *option_argv(command, given)])


def declared_field(f: Field) -> Option:
    """The declaration behind a spec's field (`spec_field`)."""
    return f.metadata["option"]


SUITE_OPTIONS = "suite_options"  # Option.field of an option the suites read (EvalSettings.options, EvalContext.options)


def spec_kwargs(cls: type, command: str, values: dict[str, Any]) -> dict[str, Any]:
    """`cls`'s constructor keywords from option name -> typed value: each option in its declared field(s) (its own
    attribute, a field of the spec's TrainConfig or EncoderOptions, the opposite of a flag, or, given, a setting
    the suites read). A field the spec does not have is not this command's (bench eval trains nothing)."""
    known = options_of(command)
    own = {f.name: f for f in fields(cls)}
    kwargs: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        option = known[name]
        for path in option.paths():
            head, _, rest = path.lstrip("!").partition(".")
            if head not in own:
                continue
            item = (not value) if path.startswith("!") else value
            if head == SUITE_OPTIONS:
                if value is not None:
                    nested.setdefault(head, {})[name] = value
            elif rest:
                nested.setdefault(head, {})[rest] = item
            else:
                kwargs[head] = item
    for head, changes in nested.items():
        default = own[head].default_factory()  # a nested value: TrainConfig, EncoderOptions, a dict
        kwargs[head] = {**default, **changes} if isinstance(default, dict) else replace(default, **changes)
    return kwargs


def nested_default(command: str, head: str, cls: type) -> Any:
    """The default of a spec's nested value (`train`, `encoder`): `cls` with the declared defaults of `bench
    COMMAND`'s options that fill its fields (bench run's pooling is mean; the encoder's own default is the model's)."""
    values = {}
    for option in options_of(command).values():
        for path in option.paths():
            field_head, _, rest = path.lstrip("!").partition(".")
            if field_head == head and rest:
                values[rest] = (not option.default) if path.startswith("!") else option.default
    return cls(**values)


def spec_values(spec: Any, command: str) -> dict[str, Any]:
    """Option name -> value of a spec built by `spec_kwargs` (read from the option's first field; an option it was
    not given: its default)."""
    out = {}
    for name, option in options_of(command).items():
        path = option.paths()[0]
        if path == SUITE_OPTIONS:
            out[name] = getattr(spec, SUITE_OPTIONS).get(name, option.default)
            continue
        value = spec
        for part in path.lstrip("!").split("."):
            value = getattr(value, part)
        out[name] = (not value) if path.startswith("!") else value
    return out
