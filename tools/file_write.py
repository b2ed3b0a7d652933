"""The writing file tools: copy_files, write_files, edit_files (``tools/files.py``). Writes go
through a new file renamed over the target, never through a symlink or a hard link."""
from __future__ import annotations

import difflib
import os
import stat
from pathlib import Path

from pydantic import BaseModel, Field, field_validator

from tools.context import ToolError
from tools.file_common import (DIFF_CHARS, MAX_COPY_BYTES, MAX_COPY_FILES, MAX_DIFF_BYTES,
                               MAX_EDIT_BYTES, MAX_WRITE_CHARS, JailedTool, _as_list,
                               _is_binary, _read_head, _regular, _size, too_big)
from tools.sandbox import Jail


# -- writing helpers --------------------------------------------------------------------------
def _make_parents(jail: Jail, real: Path) -> None:
    current = jail.root
    for part in real.relative_to(jail.root).parts[:-1]:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            os.mkdir(current)
            continue
        if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
            raise ToolError(f"'{current.relative_to(jail.root)}' is not a folder; choose "
                            f"another path")


def _atomic_write(jail: Jail, real: Path, data: bytes | None = None,
                  source: Path | None = None) -> None:
    """Write a new file beside ``real`` then rename it over: never writes through a symlink or
    into a hard-linked file."""
    _make_parents(jail, real)
    if real.is_dir() or os.path.islink(real):
        raise ToolError(f"'{jail.virtual(real)}' is a folder or a link; choose a file path")
    tmp = real.parent / f".{real.name[:100]}.m3b-{os.getpid()}-{os.urandom(4).hex()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            if source is not None:
                with open(source, "rb") as src:
                    while chunk := src.read(1 << 20):
                        fh.write(chunk)
            else:
                fh.write(data or b"")
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _old_text(real: Path) -> tuple[str | None, int]:
    """(the old file's text, its size): the text only when it is at most MAX_DIFF_BYTES (the
    size is checked before anything is read); (None, 0) when there is no old file."""
    try:
        size = os.stat(real).st_size
    except FileNotFoundError:
        return None, 0
    if size > MAX_DIFF_BYTES:
        return None, size
    return _read_head(real, MAX_DIFF_BYTES).decode("utf-8", errors="replace"), size


def _diff(old: str, new: str, name: str) -> tuple[int, int, str]:
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), f"a/{name}",
                                      f"b/{name}", n=2, lineterm=""))
    added = sum(1 for ln in lines if ln.startswith("+") and not ln.startswith("+++"))
    removed = sum(1 for ln in lines if ln.startswith("-") and not ln.startswith("---"))
    text = "\n".join(lines)
    if len(text) > DIFF_CHARS:
        text = text[:DIFF_CHARS] + f"\n... [{len(text) - DIFF_CHARS} chars of diff cut]"
    return added, removed, text


# -- copy_files -------------------------------------------------------------------------------
class CopyArgs(BaseModel):
    sources: list[str] = Field(description="files to copy: workspace paths or 'dataset/...' "
                               f"(at most {MAX_COPY_FILES})")
    destination: str = Field(description="a workspace folder (ending in '/' or existing; the "
                             "files keep their names) or, for one source, a file path. Never "
                             "'dataset/' or the system's files")

    @field_validator("sources", mode="before")
    @classmethod
    def one_or_more(cls, value):
        return _as_list(value)


class CopyFiles(JailedTool):
    name: str = "copy_files"
    description: str = ("Copy files from 'dataset/' or the workspace into the workspace (never "
                        "into the dataset). E.g. sources ['dataset/labels.csv'], destination "
                        "'Datapath/'.")
    args_schema: type[BaseModel] = CopyArgs

    def execute(self, sources: list[str], destination: str) -> dict:
        sources = _as_list(sources)
        if not sources or len(sources) > MAX_COPY_FILES:
            raise ToolError(f"give 1 to {MAX_COPY_FILES} source files")
        jail = self.jail
        dest = jail.resolve(destination, write=True)
        into_folder = (destination.endswith("/") or dest.is_dir() or len(sources) > 1)
        plan, total = [], 0
        for name in sources:
            src = jail.resolve(name, write=False)
            total += _regular(src, name).st_size
            target_name = f"{destination.rstrip('/')}/{src.name}" if into_folder else destination
            target = jail.resolve(target_name, write=True)
            plan.append((src, target))
        if total > MAX_COPY_BYTES:
            raise ToolError(f"the files hold {_size(total)}, more than {_size(MAX_COPY_BYTES)}; "
                            f"copy fewer, or index the dataset in place (scripts can read "
                            f"$M3B_DATASET_DIR)")
        copied = []
        for src, target in plan:
            _atomic_write(jail, target, source=src)
            copied.append(f"{jail.virtual(src)} -> {jail.virtual(target)}")
        return {"copied": copied, "bytes": total}

    def summarise(self, result: dict) -> str:
        return f"{len(result['copied'])} files, {_size(result['bytes'])}"


# -- write_files ------------------------------------------------------------------------------
class WriteArgs(BaseModel):
    path: str = Field(description="workspace file to create or overwrite, e.g. "
                      "'scripts/make_index.py' or 'Datapath/dataloader.py'; parent folders are "
                      "created")
    content: str = Field(description="the file's full new text")


class WriteFiles(JailedTool):
    name: str = "write_files"
    description: str = ("Create or overwrite one text file in the workspace (never in "
                        "'dataset/', never the system's files: plan.json, train_config.json, "
                        "report.json, model_card.md, Logout/...). Returns created/overwritten "
                        "and lines added/removed.")
    args_schema: type[BaseModel] = WriteArgs

    def execute(self, path: str, content: str) -> dict:
        if not isinstance(content, str):
            raise ToolError("content must be text")
        if len(content) > MAX_WRITE_CHARS:
            raise ToolError(f"content is {len(content)} characters (at most "
                            f"{MAX_WRITE_CHARS}); write a script that generates the file")
        jail = self.jail
        real = jail.resolve(path, write=True)
        existed = real.is_file()
        old, old_size = _old_text(real) if existed else (None, 0)
        _atomic_write(jail, real, content.encode("utf-8"))
        name = jail.virtual(real)
        result = {"path": name, "action": "overwritten" if existed else "created",
                  "lines": len(content.splitlines()), "bytes": len(content.encode("utf-8"))}
        if existed and old is None:  # too big to compare: replaced without reading it
            result.update(lines_added=result["lines"], lines_removed=None,
                          note=f"the old file was {_size(old_size)}, more than the "
                               f"{_size(MAX_DIFF_BYTES)} write_files compares, so it was "
                               f"replaced without a diff")
            return result
        added, removed, _ = _diff(old or "", content, name)
        return {**result, "lines_added": added, "lines_removed": removed}

    def summarise(self, result: dict) -> str:
        removed = "?" if result["lines_removed"] is None else result["lines_removed"]
        return f"{result['action']} {result['path']} (+{result['lines_added']} -{removed})"


# -- edit_files -------------------------------------------------------------------------------
class EditArgs(BaseModel):
    path: str = Field(description="workspace text file to patch")
    old: str = Field(description="the exact text to replace (copy it from read_files, with "
                     "enough surrounding lines to be unique)")
    new: str = Field(description="the text to put in its place")
    count: int | None = Field(default=None, ge=1, le=10000,
                              description="how many occurrences to replace; leave it unset "
                              "when 'old' must occur exactly once")


class EditFiles(JailedTool):
    name: str = "edit_files"
    description: str = ("Patch part of a workspace text file: replace the exact text 'old' by "
                        "'new'. Fails when 'old' is not found, or found several times without "
                        "'count'. Returns a unified diff excerpt.")
    args_schema: type[BaseModel] = EditArgs

    def execute(self, path: str, old: str, new: str, count: int | None = None) -> dict:
        if not old:
            raise ToolError("'old' is empty; give the exact text to replace (use write_files "
                            "to write a whole file)")
        jail = self.jail
        real = jail.resolve(path, write=True)
        if not real.exists():
            raise ToolError(f"'{path}' does not exist; create it with write_files")
        size = _regular(real, path).st_size
        if size > MAX_EDIT_BYTES:
            raise too_big(path, size, MAX_EDIT_BYTES, "edit_files patches",
                          "change it with a script (run_script) or write a new file with "
                          "write_files")
        head = _read_head(real, MAX_EDIT_BYTES)
        if _is_binary(head):
            raise ToolError(f"'{path}' is a binary file; only text files can be edited")
        text = head.decode("utf-8")
        found = text.count(old)
        if found == 0:
            hint = ""
            if old.strip() and text.count(old.strip()) > 0:
                hint = " (it is there with different leading/trailing whitespace)"
            raise ToolError(f"'old' was not found in '{path}'{hint}; read_files the file and "
                            f"copy the exact text")
        if count is None and found > 1:
            raise ToolError(f"'old' occurs {found} times in '{path}'; add surrounding lines to "
                            f"make it unique, or set count={found} to replace them all")
        if count is not None and found < count:
            raise ToolError(f"'old' occurs {found} times in '{path}', fewer than count={count}")
        replaced = count or 1
        updated = text.replace(old, new, replaced)
        if len(updated) > MAX_WRITE_CHARS:
            raise ToolError(f"the edited file would hold {len(updated)} characters (at most "
                            f"{MAX_WRITE_CHARS})")
        _atomic_write(jail, real, updated.encode("utf-8"))
        name = jail.virtual(real)
        added, removed, diff = _diff(text, updated, name)
        self.ctx.note_summarised(name)
        return {"path": name, "replaced": replaced, "lines_added": added,
                "lines_removed": removed, "diff": diff}

    def summarise(self, result: dict) -> str:
        return (f"{result['path']}: {result['replaced']} replaced (+{result['lines_added']} "
                f"-{result['lines_removed']})")
