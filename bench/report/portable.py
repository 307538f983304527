"""What a run's record says, made readable away from the folder the run was started in (for results.json): paths
absolute, and only the settings that shaped its scores.

A run stores its encoder folder and the command as given, relative to the folder it was launched from
(`runs/…/encoder`, `--db conc.sqlite`); a results.json read elsewhere would point nowhere. The database knows its own
absolute location, so `--db` is rewritten from it, whatever the current folder is.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

FROM = "   # from: "  # between a reproduce command and the command as it was invoked (bench.experiment.run_spec)
SCALE = 100  # every stored score is the metric times 100 (Spearman 0.8203 -> 82.03), as every table shows it


def absolute_model(model: Any, kind: str | None) -> Any:
    """A trained run's encoder folder, or a scored model that is a folder here, as an absolute path (resolved from
    the current folder: the run's own process writes its results.json); a hub id or a name (minilm, bm25) as it is."""
    if not isinstance(model, str) or not model:
        return model
    path = Path(model).expanduser()
    if path.is_absolute() or not (kind == "train" or path.exists()):
        return model
    return str(path.resolve())


def _absolute_db(argv: list[str], db_path: Path) -> list[str]:
    out, skip = [], False
    for k, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg == "--db" and k + 1 < len(argv):
            out += ["--db", str(db_path)]
            skip = True
        elif arg.startswith("--db="):
            out.append(f"--db={db_path}")
        else:
            out.append(arg)
    return out


def command_with_absolute_db(command: Any, db_path: Path | None) -> Any:
    """The stored command with its `--db` (in either part, reproduce and as invoked) naming the database by its
    absolute path; a server URL (db_path None) or a command that cannot be split is left as it is."""
    if not isinstance(command, str) or db_path is None or "--db" not in command:
        return command
    parts = command.split(FROM, 1)
    try:
        rewritten = [shlex.join(_absolute_db(shlex.split(part), db_path)) for part in parts]
    except ValueError:
        return command
    return FROM.join(rewritten)


def _uses_elong(suites: Any) -> bool:
    from bench.evaluate.suites.registry import attacked_families

    listed = [suites] if isinstance(suites, str) else [str(s) for s in suites or []]
    return "elong" in attacked_families(listed)


def config_as_scored(config: dict[str, Any]) -> dict[str, Any]:
    """The config without its elongation variants when no suite attacked with elong (they shaped no score; the
    config hash, which the database keeps, still covers them)."""
    if _uses_elong(config.get("suite")):
        return config
    out = {k: v for k, v in config.items() if k != "elong"}
    if isinstance(config.get("eval"), dict):
        out["eval"] = {k: v for k, v in config["eval"].items() if k != "elong"}
    return out
