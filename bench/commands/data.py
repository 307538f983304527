"""`bench data list`: which datasets of the catalog are present, and where."""

from __future__ import annotations

import argparse

from bench.data.catalog import search_dirs, status


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="datasets: what is present and where it comes from")
    p.add_argument("action", choices=["list"], nargs="?", default="list")
    p.add_argument("--data-dir", default=None)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("searched: " + ", ".join(str(d) for d in search_dirs(args.data_dir)))
    rows = status(args.data_dir)
    width = max(len(info.name) for info, _ in rows)
    for info, path in rows:
        where = str(path) if path else f"missing (expected {', '.join(info.expected_files())}; source: {info.source})"
        print(f"{info.name:<{width}}  {info.kind:<8}  {where}")
    present = sum(1 for _, p in rows if p)
    print(f"{present}/{len(rows)} datasets present")
    return 0
