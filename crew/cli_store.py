"""``python -m crew store check|backup|restore``: the store's health and its rolling backups
(core/store/backup.py). None of them opens the store for writing, so they work on a damaged one.

    python -m crew store check [--quick] [--home DIR] [--json]   integrity check; lists backups
    python -m crew store backup [--home DIR] [--json]            a backup now (store must be sound)
    python -m crew store restore [BACKUP] [--home DIR] [--json]  the newest good backup (or BACKUP)
                                                                 in place of store.db
"""
from __future__ import annotations

import time

from core.store.backup import check_store, make_backup, restore_backup
from core.store.db import forget_store
from core.store.errors import StoreDamaged, StoreError
from core.store.home import load_settings
from crew.cli_output import CLIError, emit


def _store_path(args):
    return load_settings(args.home).store_path


def cmd_check(args) -> int:
    report = check_store(_store_path(args), full=not args.quick)
    lines = [f"store:   {report['store']}" + ("" if report["exists"] else " (not created yet)"),
             f"check:   {report['check']}: " + ("ok" if report["ok"] else report["problem"])]
    lines += [f"backup:  {b['path']}  ({time.strftime('%Y-%m-%d %H:%M', time.localtime(b['modified']))})"
              for b in report["backups"]] or ["backup:  none yet"]
    if report["restore"]:
        lines.append(f"to restore: {report['restore']}")
    emit(args, report, "\n".join(lines))
    return 0 if report["ok"] else 3


def cmd_backup(args) -> int:
    path = _store_path(args)
    if not path.exists():
        raise CLIError(f"there is no store at {path} yet: nothing to back up", code=1,
                       kind="no_store")
    try:
        made = make_backup(path)
    except StoreDamaged as exc:
        raise StoreDamaged(f"{exc}: restore a backup first (`python -m crew store restore`)") \
            from None
    emit(args, {"status": "backed_up", "store": str(path), "backup": str(made)},
         f"backed up {path} to {made}")
    return 0


def cmd_restore(args) -> int:
    path = _store_path(args)
    forget_store(path)  # this process must not keep the old file open
    try:
        result = restore_backup(path, args.backup)
    except OSError as exc:
        raise StoreError(f"restoring {path} failed ({exc}); the files are as they were or "
                         f"beside it as store.db.*-<time>") from None
    kept = result["previous_store_kept_as"]
    emit(args, result, f"restored {path} from {result['restored_from']}"
         + (f"; the previous file is kept as {kept}" if kept else ""))
    return 0


def add_store_parser(sub, common) -> None:
    p = sub.add_parser("store", help="check, back up or restore the store (store.db)",
                       description=__doc__)
    actions = p.add_subparsers(dest="action", required=True)
    q = actions.add_parser("check", parents=[common], help="check the store and list backups")
    q.add_argument("--quick", action="store_true", help="quick_check instead of integrity_check")
    q.set_defaults(func=cmd_check)
    q = actions.add_parser("backup", parents=[common], help="back the store up now")
    q.set_defaults(func=cmd_backup)
    q = actions.add_parser("restore", parents=[common],
                           help="put the newest good backup (or BACKUP) in place of the store; "
                                "stop the app and running jobs first")
    q.add_argument("backup", nargs="?", default=None, help="a backup file (default: newest good)")
    q.set_defaults(func=cmd_restore)
