"""`bench db upgrade --db X`: upgrade a results database written by an older lenbench to today's schema, in place,
after copying it beside itself (the backup's path is printed). Every command that only reads (`bench results`, the
leaderboard, `bench claim --no-run`, `lenbench.load`) leaves an older file as it is; this is the one that changes it.
"""

from __future__ import annotations

import argparse

from bench.commands.common import add_db


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("db", help="the results database itself: `bench db upgrade` brings an older one to today's schema",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="db_action", metavar="ACTION", required=True)
    up = actions.add_parser("upgrade", help="upgrade an older database in place, keeping a backup copy beside it")
    add_db(up)
    up.add_argument("--no-backup", action="store_true", help="upgrade without copying the file first")
    up.set_defaults(func=upgrade)


def upgrade(args: argparse.Namespace) -> int:
    from results_db.models import SCHEMA_VERSION
    from results_db.upgrade import upgrade_database

    report = upgrade_database(args.db, backup=not args.no_backup)
    if not report.applied:
        print(f"{report.shown} is at schema {report.version}, this lenbench's; nothing to upgrade")
        return 0
    if report.backup is not None:
        print(f"backup of {report.shown} as it was (schema {report.version}): {report.backup}")
    elif not args.no_backup:
        print(f"{report.shown} is a server database: no file copy was made (keep a dump of your own)")
    for step in report.applied:
        print(f"  schema {step.version}: {step.summary}")
    print(f"upgraded {report.shown} from schema {report.version} to {SCHEMA_VERSION}")
    return 0
