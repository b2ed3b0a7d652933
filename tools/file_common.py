"""What the jailed file tools (``tools/files.py``) share: their limits, small helpers on paths
and file heads, and ``JailedTool``, the base class that gives a tool the job's ``Jail`` and marks
the file content it returns as data (``notice`` + the audit of the next prompt)."""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

from tools.base import MAX_RESULT_CHARS, M3Tool
from tools.context import ToolError
from tools.sandbox import NOTICE, Jail

MAX_LIST = 200               # entries list_files returns
RESULT_BUDGET = MAX_RESULT_CHARS - 600  # characters of JSON a listing or preview aims at
MAX_PATHS = 10               # files per read/preview call
READ_BUDGET = 4500           # characters of file content per read_files call (all files)
PREVIEW_BUDGET = 4000        # characters of text per preview_files call (all files)
MAX_WRITE_CHARS = 1_000_000  # write_files content
MAX_COPY_FILES = 200
MAX_COPY_BYTES = 2 << 30
DIFF_CHARS = 2000
PREVIEW_ROWS = 5             # the paper's limits: rows, items, paths per folder, words
PREVIEW_WORDS = 10_000
DIR_FIRST = 5
MAX_DIRS = 60                # folders preview_dirs reports
MAX_WALK = 200_000           # directory entries a walk looks at before it stops
COUNT_BYTES = 256 << 20      # a table's rows are counted in at most this many bytes
MAX_JSON_BYTES = 64 << 20
MAX_HEAD_BYTES = 512 * 1024  # bytes of a file read_files and preview_files read at most
MAX_DIFF_BYTES = MAX_WRITE_CHARS * 4  # an old file larger is replaced without a diff
MAX_EDIT_BYTES = MAX_WRITE_CHARS * 4  # edit_files patches files up to this size
MAX_EXCEL_BYTES = 64 << 20   # workbooks larger are not opened for a preview
CODE_SUFFIXES = {".py", ".json", ".yaml", ".yml", ".txt", ".md", ".csv", ".tsv", ".cfg",
                 ".ini", ".toml", ".sh", ".jsonl"}
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".gif", ".webp"}
ITK_SUFFIXES = {".nrrd", ".nhdr", ".mha", ".mhd", ".hdr"}
TABLE_SUFFIXES = {".csv", ".tsv"}


def natural_key(text: str) -> list:
    return [(0, int(tok), "") if tok.isdigit() else (1, 0, tok.lower())
            for tok in re.split(r"(\d+)", str(text)) if tok]


def _size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def _as_list(value: Any) -> Any:
    if isinstance(value, str):
        return [value]
    return value


def path_list(paths: Any) -> list[str]:
    """The files of one read or preview call: a name or a list of 1 to MAX_PATHS names."""
    paths = _as_list(paths)
    if not paths or len(paths) > MAX_PATHS:
        raise ToolError(f"give 1 to {MAX_PATHS} paths")
    return paths


def _regular(real: Path, name: str) -> os.stat_result:
    """stat of a regular file, or a ToolError (missing, a folder, a device, a FIFO ...)."""
    try:
        st = os.stat(real)
    except FileNotFoundError:
        raise ToolError(f"'{name}' does not exist (list_files shows what is there)") from None
    except OSError as exc:
        raise ToolError(f"cannot read '{name}': {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"'{name}' is a folder; use list_files or preview_dirs for folders")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"'{name}' is not a regular file (a device, pipe or socket); refused")
    return st


def _read_head(real: Path, limit: int) -> bytes:
    """At most ``limit`` bytes from the start of the file (never the whole of a big file)."""
    with open(real, "rb") as fh:
        return fh.read(limit)


def too_big(name: str, size: int, limit: int, what: str, advice: str) -> ToolError:
    """The error for a file over a tool's read limit: what, how big, the limit, what to do."""
    return ToolError(f"'{name}' is {_size(size)}, more than the {_size(limit)} {what}; "
                     f"{advice}")


def _is_binary(head: bytes) -> bool:
    if b"\x00" in head[:8192]:
        return True
    try:
        head[:8192].decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(head[:8192]) - 4  # not just a character cut at the end
    return False


def _is_dicom(real: Path, head: bytes) -> bool:
    return real.suffix.lower() in (".dcm", ".dicom") or head[128:132] == b"DICM"


class JailedTool(M3Tool):
    """A file tool: a Jail for the job, and the notice + audit for content it returns."""

    @property
    def jail(self) -> Jail:
        return Jail(self.ctx)

    def with_notice(self, result: dict, *names: str) -> dict:
        if names:
            self.ctx.note_summarised(*names)
        return {"notice": NOTICE, **result}
