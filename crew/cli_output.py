"""The CLI's output contract, shared by every command.

* With ``--json`` stdout holds exactly one JSON document: the command's result, or
  ``{"error": "...", "kind": "..."}`` with a non-zero exit status. Anything else a command or a
  library prints goes to stderr.
* Without ``--json`` results are text on stdout; errors are one ``error: ...`` line on stderr.
* Bad input (a wrong argument, a home that is a file, a damaged or read-only store, a store
  locked too long) ends with a message naming the problem and what to do, never a traceback.
  ``M3B_DEBUG=1`` shows the traceback of an unexpected error.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import traceback
from typing import Any, Callable

from core.store.errors import StoreBusy, StoreDamaged, StoreError, StoreUnwritable


class CLIError(Exception):
    """A refusal the user can act on; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = 2, kind: str = "invalid_input"):
        super().__init__(message)
        self.code, self.kind = code, kind


class UsageError(CLIError):
    def __init__(self, message: str):
        super().__init__(message, code=2, kind="usage")


class JsonArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are raised (so ``--json`` can print them as JSON)."""

    def error(self, message: str):  # noqa: D401 - argparse's hook
        raise UsageError(f"{message} (usage: {self.format_usage().strip().removeprefix('usage: ')})")


_KINDS = ((StoreDamaged, "store_damaged", 3), (StoreBusy, "store_busy", 4),
          (StoreUnwritable, "home_unusable", 5), (StoreError, "store_error", 5))


def _stdout(args) -> Any:
    return getattr(args, "_stdout", None) or sys.stdout


def emit(args, data: Any, text: str | None = None, always_json: bool = False) -> None:
    """The command's result: JSON with --json (or always_json), else ``text`` (or key: value
    lines)."""
    out = _stdout(args)
    if getattr(args, "json", False) or always_json or text is None and not isinstance(data, dict):
        out.write(json.dumps(data, indent=2, default=str) + "\n")
    elif text is not None:
        out.write(text.rstrip("\n") + "\n")
    else:
        for key, value in data.items():
            if value not in (None, [], {}, ""):
                shown = json.dumps(value, default=str) if isinstance(value, (dict, list)) \
                    else value
                out.write(f"{key}: {shown}\n")
    out.flush()


def fail(args, message: str, code: int, kind: str) -> int:
    if getattr(args, "json", False):
        out = _stdout(args)
        out.write(json.dumps({"error": message, "kind": kind}, indent=2) + "\n")
        out.flush()
    else:
        print(f"error: {message}", file=sys.stderr)
    return code or 1


def run(parser: argparse.ArgumentParser, argv: list[str] | None,
        dispatch: Callable[[argparse.Namespace], int]) -> int:
    """Parse, run, and turn every refusal into the contract above."""
    argv = list(sys.argv[1:] if argv is None else argv)
    wants_json = "--json" in argv
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        return fail(argparse.Namespace(json=wants_json), str(exc), exc.code, exc.kind)
    args._stdout = sys.stdout
    # with --json only the result reaches stdout; whatever else is printed goes to stderr
    redirect = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    try:
        with redirect:
            return dispatch(args)
    except CLIError as exc:
        return fail(args, str(exc), exc.code, exc.kind)
    except StoreError as exc:
        kind, code = next((k, c) for cls, k, c in _KINDS if isinstance(exc, cls))
        return fail(args, str(exc), code, kind)
    except KeyboardInterrupt:
        return fail(args, "interrupted by the user", 130, "interrupted")
    except Exception as exc:  # noqa: BLE001 - never a traceback; M3B_DEBUG=1 shows it
        if os.environ.get("M3B_DEBUG"):
            traceback.print_exc()
        return fail(args, f"unexpected {type(exc).__name__}: {exc} (a bug: please report it "
                          "with this message; M3B_DEBUG=1 shows where it happened)", 1,
                    "internal_error")
