"""A method defined in one file, passed by path: `bench run --method ./my_method.py` (in a claim or sweep file and in
`lenbench.run` too). No package, no entry point, no install: the file is executed as a module and every method it
defines is used (`./my_method.py:NAME` picks one).

What a file defines: `MethodSpec` objects (the full adapter, docs/howto/add-a-method.md's second step) and functions
decorated with `lenbench.contrastive` (the small contract: a text-to-positive function), which carry their spec as
`__lenbench_method__`. Each spec gets the file (as given), the sha256 of its bytes and the line that defines it
(`MethodSpec.source_*`): the hash is part of each of its runs' identity (bench.experiment.run_spec), so an edit
gives new runs and an unchanged file reuses its rows; the file and line name the method in every message.

The module is named after the file's hash (`lenbench_method_file_<hash>`), so that an edited file is a new module
and the objects a run sends to its loader workers (the adapter, its positives function) are found there: a worker
loads the same files first (`install`), refusing a file whose bytes changed since the run began.

Each config field needs a default (a run takes the defaults and its --hp values, nothing else), refused at load
with the field's line. A name already taken by a built-in or an installed plug-in is refused (a file never shadows one), as is a name
another file defined earlier in this process.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import traceback
import types
from dataclasses import MISSING, dataclass, fields, replace
from pathlib import Path
from typing import Any

from bench.runtime.errors import MethodContractError, MethodFileError
from bench.runtime.plugins import Registry, is_slug
from bench.train.method import MethodSpec

SUFFIX = ".py"
MODULE_PREFIX = "lenbench_method_file_"
MARK = "__lenbench_method__"  # the spec a decorated function carries (lenbench.contrastive)


@dataclass(frozen=True)
class MethodFile:
    """One loaded method file: the path as given, its absolute path, the sha256 of its bytes, its module's name and
    the methods it defines (each with its source fields set)."""

    shown: str
    path: str
    sha256: str
    module: str
    specs: tuple[MethodSpec, ...]


_LOADED: dict[str, MethodFile] = {}  # absolute path -> its latest load
_BY_NAME: dict[str, MethodSpec] = {}  # method name (and alias) -> the spec a file defined


def split_target(text: str) -> tuple[str, str | None]:
    """'dir/m.py:shuffle' -> ('dir/m.py', 'shuffle'); 'dir/m.py' -> ('dir/m.py', None)."""
    path, sep, name = text.rpartition(":")
    if sep and path.endswith(SUFFIX) and name:
        return path, name
    return text, None


def is_method_file(text: object) -> bool:
    """Whether a --method entry names a file (ends in .py, optionally `:NAME`) rather than a registered method."""
    return isinstance(text, str) and split_target(text.strip())[0].endswith(SUFFIX)


def load(text: str, methods: Registry[MethodSpec]) -> MethodFile:
    """Load the file `text` names (cached while its bytes are unchanged). MethodFileError, one line, when it is
    missing, fails to import, defines no method or names one that is taken."""
    shown = split_target(text.strip())[0]
    path = Path(shown).expanduser()
    if not path.is_file():
        raise MethodFileError(f"{shown}: no such method file; give the path of a .py file that defines a method "
                              "(`bench method new NAME` writes one)")  # fmt: skip
    data = path.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    absolute = str(path.resolve())
    known = _LOADED.get(absolute)
    if known is not None and known.sha256 == sha:
        return known
    module = _execute(shown, absolute, data, sha)
    specs = tuple(_specs_of(module, shown, sha, data.decode("utf-8", "replace"), methods))
    if not specs:
        raise MethodFileError(f"{shown}: defines no method; expected a function decorated with "
                              "@lenbench.contrastive(...) or a MethodSpec (see `bench method new NAME`)")  # fmt: skip
    _claim_names(specs, known, methods)
    for spec in specs:
        _check_defaults(spec, data.decode("utf-8", "replace"))
    loaded = MethodFile(shown, absolute, sha, module.__name__, specs)
    _LOADED[absolute] = loaded
    return loaded


def specs_of(text: str, methods: Registry[MethodSpec]) -> list[MethodSpec]:
    """The methods a --method file entry stands for: all the file defines, or the one `:NAME` picks."""
    loaded = load(text, methods)
    _, name = split_target(text.strip())
    if name is None:
        return list(loaded.specs)
    picked = [s for s in loaded.specs if name == s.name or name in s.aliases]
    if not picked:
        raise MethodFileError(f"{loaded.shown}: defines no method {name!r}; it defines "
                              f"{', '.join(s.name for s in loaded.specs)}")  # fmt: skip
    return picked


def one_spec(text: str, methods: Registry[MethodSpec]) -> MethodSpec:
    specs = specs_of(text, methods)
    if len(specs) > 1:
        raise MethodFileError(f"{split_target(text.strip())[0]}: defines {len(specs)} methods ({', '.join(s.name for s in specs)}); "
                              f"name one as {split_target(text)[0]}:NAME")  # fmt: skip
    return specs[0]


def by_name(name: str) -> MethodSpec | None:
    """A method a file loaded in this process defined under `name` (or as an alias), else None."""
    return _BY_NAME.get(name)


def loaded() -> list[tuple[str, str, str]]:
    """(module name, absolute path, sha256) of every file loaded in this process: what a loader worker installs."""
    return [(f.module, f.path, f.sha256) for f in _LOADED.values()]


def install(files: list[tuple[str, str, str]]) -> None:
    """Load these files in this process (a loader worker) under the same module names, so the objects pickled by
    reference to them are found; a file whose bytes changed since is refused."""
    for module_name, path, sha in files:
        if module_name in sys.modules:
            continue
        data = Path(path).read_bytes()
        if hashlib.sha256(data).hexdigest() != sha:
            raise MethodFileError(f"{path}: the method file changed while the run was using it; run it again")
        _execute(path, path, data, sha)


def author_fault(spec: MethodSpec, exc: BaseException, doing: str, anywhere: bool = False) -> MethodContractError | None:
    """One line for an exception a method file's code raised while lenbench was `doing` something with it: at the
    last line of the file the traceback passes through (the spec's own line when `anywhere` and none does). None
    when the file's code is not in the traceback (lenbench's own error) or the method comes from no file."""
    if not spec.source_file:
        return None
    absolute = str(Path(spec.source_file).expanduser().resolve())
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == absolute and f.lineno]
    if not lines and not anywhere:
        return None
    line = lines[-1] if lines else spec.source_line or 1
    return MethodContractError(f"{spec.source_file}:{line}: {_one_line(exc)} (while {doing} method {spec.name!r})")


def worker_fault(exc: BaseException, doing: str) -> MethodContractError | None:
    """`author_fault` in a loader worker, where the spec is not at hand: one line at the last line of a loaded method
    file that the traceback passes through (the path as seen from here), None when none does. Made in the worker,
    since what crosses back to the training process is only the worker's traceback as text."""
    paths = {getattr(m, "__file__", None) for n, m in list(sys.modules.items()) if n.startswith(MODULE_PREFIX)}
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename in paths and f.lineno]
    if not frames:
        return None
    shown = os.path.relpath(frames[-1].filename)
    shown = frames[-1].filename if shown.startswith("..") else f"./{shown}"
    return MethodContractError(f"{shown}:{frames[-1].lineno}: {_one_line(exc)} (while {doing})")


# ------------------------------------------------------------------------------------------- loading
def _execute(shown: str, absolute: str, data: bytes, sha: str) -> types.ModuleType:
    name = MODULE_PREFIX + sha[:16]
    if name in sys.modules:
        return sys.modules[name]
    module = types.ModuleType(name)
    module.__file__ = absolute
    sys.modules[name] = module  # dataclasses and pickling look the module up while it runs
    try:
        exec(compile(data, absolute, "exec"), module.__dict__)
    except Exception as exc:  # noqa: BLE001 - the author's code: whatever it raises is one line naming its line
        del sys.modules[name]
        raise MethodFileError(f"{shown}:{_line_in(exc, absolute)}: {_one_line(exc)} (while loading the method file)") from exc
    return module


def _line_in(exc: BaseException, absolute: str) -> int:
    """The line of `absolute` the exception passed through last (a SyntaxError's own line)."""
    if isinstance(exc, SyntaxError) and exc.lineno:
        return exc.lineno
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == absolute and f.lineno]
    return lines[-1] if lines else 1


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _specs_of(module: types.ModuleType, shown: str, sha: str, source: str,
              METHODS: Registry[MethodSpec]) -> list[MethodSpec]:  # noqa: N803 - the registry itself

    found: list[MethodSpec] = []
    for value in list(vars(module).values()):
        spec = getattr(value, MARK, None) if callable(value) and not isinstance(value, type) else value
        if not isinstance(spec, MethodSpec) or any(spec is s for s in found):
            continue
        if METHODS.get(spec.name) is spec:  # a built-in imported into the file, not one it defines
            continue
        line = spec.source_line or _line_of(spec.name, source)
        located = getattr(spec.factory, "located", None)  # a contrastive method's messages name the file as given
        factory = located(shown) if callable(located) else spec.factory
        found.append(replace(spec, factory=factory, source_file=shown, source_sha256=sha, source_line=line))
    return found


def _check_defaults(spec: MethodSpec, source: str) -> None:
    """Every field of the method's config has a default: a run builds it from the defaults and its --hp values."""
    missing = [f for f in fields(spec.config_cls) if f.default is MISSING and f.default_factory is MISSING]
    if missing:
        field = missing[0]
        line = _field_line(spec.config_cls.__name__, field.name, source) or spec.source_line
        raise MethodFileError(f"{spec.source_file}:{line}: config field {spec.config_cls.__name__}.{field.name} of "
                              f"method {spec.name!r} has no default; expected one, e.g. `{field.name}: "
                              f"{_annotation(field)} = hp(DEFAULT, ...)` (a run takes the defaults and its --hp "
                              "values)")  # fmt: skip


def _field_line(cls_name: str, name: str, source: str) -> int:
    """The line of `name: ...` in `class cls_name` of the file (0 when not found: a config defined elsewhere)."""
    lines = source.splitlines()
    start = next((i for i, line in enumerate(lines) if re.match(rf"\s*class\s+{re.escape(cls_name)}\b", line)), None)
    if start is None:
        return 0
    pattern = re.compile(rf"\s+{re.escape(name)}\s*:")
    return next((i + 1 for i in range(start + 1, len(lines)) if pattern.match(lines[i])), 0)


def _annotation(field: Any) -> str:
    kind = field.type
    return kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))


def _line_of(name: str, source: str) -> int:
    """The first line that spells the method's name as a string (its `MethodSpec(name=...)`), else 1."""
    pattern = re.compile(r"""["']""" + re.escape(name) + r"""["']""")
    for number, line in enumerate(source.splitlines(), 1):
        if pattern.search(line):
            return number
    return 1


def name_problem(name: str, METHODS: Registry[MethodSpec]) -> str | None:  # noqa: N803 - the registry itself
    """Why `name` cannot name a new method (not a slug, or taken by a built-in or installed plug-in), else None."""
    if not is_slug(name):
        return (f"method name {name!r} is not a slug; use lower-case letters and digits, words joined by '-' or '_' "
                "(e.g. my-method)")  # fmt: skip
    if METHODS.get(name) is not None:
        kind = "a built-in method" if METHODS.is_builtin(name) else "an installed plug-in method"
        return f"method name {name!r} clashes with {kind}; give yours another name"
    return None


def _claim_names(specs: tuple[MethodSpec, ...], previous: MethodFile | None,
                 METHODS: Registry[MethodSpec]) -> None:  # noqa: N803 - the registry itself
    """Refuse a name that is not a slug, is taken by a built-in or plug-in, or by another file; then record them."""

    mine = {id(s) for s in previous.specs} if previous is not None else set()
    for spec in specs:
        for name in (spec.name, *spec.aliases):
            problem = name_problem(name, METHODS)
            if problem is not None:
                raise MethodFileError(f"{spec.where}: {problem}")
            other = _BY_NAME.get(name)
            if other is not None and id(other) not in mine and Path(other.source_file).resolve() != Path(spec.source_file).resolve():
                raise MethodFileError(f"{spec.where}: method name {name!r} is already defined by {other.where}; give "
                                      "yours another name")  # fmt: skip
    for spec in specs:
        for name in (spec.name, *spec.aliases):
            _BY_NAME[name] = spec
