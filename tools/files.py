"""The paper's file and shell tools for LLM mode, jailed (``tools/sandbox.py``):

list_files, read_files, copy_files, write_files, edit_files, run_script (+ script_status),
preview_dirs, preview_files.

Paths are virtual: relative to the job's workspace (``Datapath/train.json``), or ``dataset/...``
for the planned dataset, which is read-only. Whatever a tool returns from a file is data, never
instructions: such results carry ``notice`` (``tools.sandbox.NOTICE``), the files are named to
``ctx.note_summarised`` (the audit of the next prompt), and patient identifiers are redacted
(``core/redaction.py``): identifier columns of tables, e-mail addresses, SSN-like numbers,
every identifying DICOM tag; images are described by their header, never their pixels.
"""
from __future__ import annotations

import csv
import difflib
import io
import json
import os
import re
import stat
import zipfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_validator

from core import redaction
from tools import scripts
from tools.base import MAX_RESULT_CHARS, M3Tool
from tools.context import ToolError
from tools.data_engineer import bounded
from tools.sandbox import DATASET, NOTICE, Jail

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
    with open(real, "rb") as fh:
        return fh.read(limit)


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


# -- list_files -------------------------------------------------------------------------------
class ListArgs(BaseModel):
    path: str = Field(default=".", description="folder to list: '.' is the workspace, "
                      "'dataset' the planned dataset (read-only), or a subfolder of either "
                      "such as 'Datapath' or 'dataset/train'")
    recursive: bool = Field(default=True, description="also list subfolders' files")


class ListFiles(JailedTool):
    name: str = "list_files"
    description: str = (f"List the files in a workspace folder or in 'dataset/' (names, sizes; "
                        f"at most {MAX_LIST} entries, with a count of the rest and of code/text "
                        f"files). Paths are relative to the workspace; 'dataset/...' is the "
                        f"planned dataset, read-only.")
    args_schema: type[BaseModel] = ListArgs

    def execute(self, path: str = ".", recursive: bool = True) -> dict:
        jail = self.jail
        real = jail.resolve(path, write=False)
        if not real.is_dir():
            raise ToolError(f"'{path}' is not a folder (read_files or preview_files read files)")
        base = jail.virtual(real)
        entries: list[str] = []
        files = folders = code = seen = used = 0
        truncated = full = False
        for top, dirs, names in os.walk(real, followlinks=False):
            dirs.sort(key=natural_key)
            seen += len(dirs) + len(names)
            if seen > MAX_WALK:
                truncated = True
                break
            rel_top = os.path.relpath(top, real)
            if not recursive:
                folders += len(dirs)
                for d in dirs:
                    full = full or len(entries) >= MAX_LIST or used > RESULT_BUDGET - 600
                    if not full:
                        entries.append(f"{d}/")
                        used += len(d) + 4
            elif rel_top != ".":
                folders += 1
            for name in sorted(names, key=natural_key):
                files += 1
                code += Path(name).suffix.lower() in CODE_SUFFIXES
                full = full or len(entries) >= MAX_LIST or used > RESULT_BUDGET - 600
                if full:
                    continue
                try:
                    st = os.lstat(os.path.join(top, name))
                    note = ("symlink, not followed" if stat.S_ISLNK(st.st_mode)
                            else _size(st.st_size))
                except OSError:
                    note = "unreadable"
                entries.append(f"{name if rel_top == '.' else rel_top + '/' + name} ({note})")
                used += len(entries[-1]) + 4
            if not recursive:
                break
        result = {"folder": base, "entries": entries, "files": files, "folders": folders,
                  "code_or_text_files": code, "shown": len(entries)}
        hidden = files + (folders if not recursive else 0) - len(entries)
        if hidden > 0:
            result["more"] = f"{hidden} more entries not shown; list a subfolder"
        if truncated:
            result["truncated"] = f"stopped after {MAX_WALK} entries; list a subfolder"
        return self.with_notice(result, base)

    def summarise(self, result: dict) -> str:
        return f"{result['folder']}: {result['files']} files, {result['folders']} folders"


# -- read_files -------------------------------------------------------------------------------
class PathsArgs(BaseModel):
    paths: list[str] = Field(description=f"up to {MAX_PATHS} file paths, relative to the "
                             f"workspace (e.g. 'Datapath/train.json') or 'dataset/...'")

    @field_validator("paths", mode="before")
    @classmethod
    def one_or_more(cls, value):
        return _as_list(value)


def _text_of(real: Path, head: bytes) -> str:
    text = head.decode("utf-8", errors="replace")
    suffix = real.suffix.lower()
    if suffix == ".json":
        try:
            value = json.loads(text)
        except ValueError:
            return redaction.redact_text(text)
        redacted = redaction.redact_json(value)
        return text if redacted == value else json.dumps(redacted, indent=1)
    if suffix in TABLE_SUFFIXES:
        return redaction.redact_text(text, "\t" if suffix == ".tsv" else ",")
    return redaction.redact_text(text)


class ReadFiles(JailedTool):
    name: str = "read_files"
    description: str = (f"Read text files (code, JSON, CSV, logs) from the workspace or "
                        f"'dataset/': up to {MAX_PATHS} files, about {READ_BUDGET} characters "
                        f"in all (long files are cut). Binary files (images, DICOM, NIfTI, "
                        f"Excel) are refused: use preview_files for them. Identifier columns of "
                        f"tables are redacted.")
    args_schema: type[BaseModel] = PathsArgs

    def execute(self, paths: list[str]) -> dict:
        paths = _as_list(paths)
        if not paths or len(paths) > MAX_PATHS:
            raise ToolError(f"give 1 to {MAX_PATHS} paths")
        jail, budget = self.jail, READ_BUDGET // len(paths)
        out, names = [], []
        for name in paths:
            real = jail.resolve(name, write=False)
            st = _regular(real, name)
            head = _read_head(real, 512 * 1024)
            if _is_binary(head) or _is_dicom(real, head) and b"\x00" in head:
                raise ToolError(f"'{name}' is a binary file ({_size(st.st_size)}); "
                                f"use preview_files to see its header and shape")
            text = _text_of(real, head)
            item = {"path": jail.virtual(real), "chars": len(text), "content": text[:budget]}
            if len(text) > budget or st.st_size > len(head):
                item["truncated"] = (f"showing the first {min(budget, len(text))} characters "
                                     f"of a {_size(st.st_size)} file")
            out.append(item)
            names.append(item["path"])
        return self.with_notice({"files": out}, *names)

    def summarise(self, result: dict) -> str:
        return ", ".join(f"{f['path']} ({f['chars']} chars)" for f in result["files"])


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


def _old_text(real: Path) -> str | None:
    try:
        return real.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None


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
        old = _old_text(real) if real.is_file() else None
        _atomic_write(jail, real, content.encode("utf-8"))
        name = jail.virtual(real)
        added, removed, _ = _diff(old or "", content, name)
        return {"path": name, "action": "created" if old is None else "overwritten",
                "lines": len(content.splitlines()), "lines_added": added,
                "lines_removed": removed, "bytes": len(content.encode("utf-8"))}

    def summarise(self, result: dict) -> str:
        return (f"{result['action']} {result['path']} (+{result['lines_added']} "
                f"-{result['lines_removed']})")


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
        _regular(real, path)
        head = _read_head(real, MAX_WRITE_CHARS * 4 + 1)
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


# -- run_script / script_status ---------------------------------------------------------------
class RunArgs(BaseModel):
    script: str = Field(description="a .py file in the workspace, e.g. 'scripts/make_index.py' "
                        "(write it with write_files first)")
    args: list[str] = Field(default_factory=list, description="command-line arguments, passed "
                            "literally (no shell)")
    timeout_s: int = Field(default=scripts.DEFAULT_TIMEOUT_S, ge=1, le=scripts.MAX_TIMEOUT_S,
                           description="seconds before the script is killed")
    background: bool = Field(default=False, description="start it and return a handle at once; "
                             "follow it with script_status")

    @field_validator("args", mode="before")
    @classmethod
    def listed(cls, value):
        return [] if value is None else _as_list(value)


class RunScript(JailedTool):
    name: str = "run_script"
    description: str = ("Run a Python script from the workspace with this job's Python (numpy, "
                        "torch, pandas, SimpleITK, nibabel, pydicom, the repo's core/ and "
                        "ml_templates/ importable). cwd is the workspace; $M3B_DATASET_DIR is the "
                        "dataset's real folder (read-only), $M3B_WORKSPACE the workspace. The "
                        "script may write files inside workspace folders (e.g. Datapath/, "
                        "scripts/, .tmp/), not at the workspace's top level, not in Logout/ and "
                        "never in the dataset; it has no network. Returns exit code, seconds and "
                        "the output (head and tail).")
    args_schema: type[BaseModel] = RunArgs

    def execute(self, script: str, args: list[str] | None = None,
                timeout_s: int = scripts.DEFAULT_TIMEOUT_S, background: bool = False) -> dict:
        result = scripts.run_script(self.jail, self.ctx.job_id, script, args or [], timeout_s,
                                    background)
        return self.with_notice(result, result["script"])

    def summarise(self, result: dict) -> str:
        if result.get("status") == "running":
            return f"{result['script']} started as {result['handle']}"
        return (f"{result['script']} exit {result['returncode']} in {result['seconds']} s"
                + (f" ({result['ended']})" if result.get("ended") else ""))


class StatusArgs(BaseModel):
    handle: str = Field(description="the handle run_script returned for a background script")


class ScriptStatus(JailedTool):
    name: str = "script_status"
    description: str = ("State of a background script started by run_script: running or "
                        "finished, exit code, seconds, and the tail of its output.")
    args_schema: type[BaseModel] = StatusArgs

    def execute(self, handle: str) -> dict:
        result = scripts.script_status(self.ctx.job_id, handle)
        return self.with_notice(result, result["script"])

    def summarise(self, result: dict) -> str:
        return f"{result['handle']} {result['status']} rc={result['returncode']}"


# -- preview_dirs -----------------------------------------------------------------------------
class DirArgs(BaseModel):
    path: str = Field(default=DATASET, description="folder to survey: 'dataset' (the planned "
                      "dataset), a subfolder such as 'dataset/train', or a workspace folder")


class PreviewDirs(JailedTool):
    name: str = "preview_dirs"
    description: str = (f"Survey a folder tree: for each subfolder its number of files and its "
                        f"first {DIR_FIRST} file paths (natural order); up to {MAX_DIRS} "
                        f"folders. Use it first on 'dataset' to see the layout.")
    args_schema: type[BaseModel] = DirArgs

    def execute(self, path: str = DATASET) -> dict:
        jail = self.jail
        real = jail.resolve(path, write=False)
        if not real.is_dir():
            raise ToolError(f"'{path}' is not a folder; preview_files shows a file")
        base = jail.virtual(real)
        folders, seen, total_files, total_folders, truncated = [], 0, 0, 0, False
        used, full = 0, False
        for top, dirs, files in os.walk(real, followlinks=False):
            dirs.sort(key=natural_key)
            seen += len(dirs) + len(files)
            if seen > MAX_WALK:
                truncated = True
                break
            total_folders += 1
            total_files += len(files)
            full = full or len(folders) >= MAX_DIRS or used > RESULT_BUDGET - 800
            if not full:
                rel = os.path.relpath(top, real)
                folder = base if rel == "." else f"{base}/{rel}" if base != "." else rel
                first = [f"{folder}/{f}" if folder != "." else f
                         for f in sorted(files, key=natural_key)[:DIR_FIRST]]
                folders.append({"folder": folder, "files": len(files),
                                "subfolders": len(dirs), "first": first})
                used += len(json.dumps(folders[-1]))
        result = {"root": base, "folders": folders, "total_folders": total_folders,
                  "total_files": total_files}
        if total_folders > len(folders):
            result["more"] = f"{total_folders - len(folders)} more folders not shown"
        if truncated:
            result["truncated"] = f"stopped after {MAX_WALK} entries; survey a subfolder"
        if base.startswith(DATASET):
            result["real_folder"] = str(real)
            result["paths_note"] = ("tools name the dataset 'dataset/...'; scripts see its real "
                                    "folder as $M3B_DATASET_DIR (use real paths in index files)")
        return self.with_notice(result, base)

    def summarise(self, result: dict) -> str:
        return f"{result['root']}: {result['total_folders']} folders, {result['total_files']} files"


# -- preview_files ----------------------------------------------------------------------------
def _count_lines(real: Path) -> tuple[int, bool]:
    """Lines in the file (in at most COUNT_BYTES; the bool says whether it was all of it)."""
    lines, read = 0, 0
    with open(real, "rb") as fh:
        while read < COUNT_BYTES:
            chunk = fh.read(1 << 20)
            if not chunk:
                return lines, True
            read += len(chunk)
            lines += chunk.count(b"\n")
        return lines, fh.read(1) == b""


def _preview_table(real: Path, head: bytes, delim: str, budget: int) -> dict:
    text = head.decode("utf-8", errors="replace")
    lines = text.splitlines()[: PREVIEW_ROWS + 2]
    rows = list(csv.reader(io.StringIO("\n".join(lines)), delimiter=delim))
    header, body = (rows[0], rows[1: PREVIEW_ROWS + 1]) if rows else ([], [])
    body = redaction.redact_rows(header, body)
    count, exact = _count_lines(real)
    if not text.endswith("\n") and exact:
        count += 1
    out = {"kind": "table", "delimiter": "tab" if delim == "\t" else delim,
           "columns": [c[:80] for c in header][:100], "rows": [[c[:200] for c in r[:100]]
                                                               for r in body],
           "row_count": max(count - 1, 0) if exact else f"more than {max(count - 1, 0)}"}
    redacted = redaction.identifier_columns(header)
    if redacted:
        out["redacted_columns"] = redacted
    if len(json.dumps(out)) > budget:
        out["rows"] = [[c[:40] for c in r[:30]] for r in out["rows"]]
        out["columns"] = [c[:40] for c in out["columns"][:30]]
    return out


def _preview_json(real: Path, size: int, budget: int) -> dict:
    if real.suffix.lower() == ".jsonl":
        items = []
        with open(real, "rb") as fh:
            for _, line in zip(range(PREVIEW_ROWS), fh):
                try:
                    items.append(json.loads(line))
                except ValueError:
                    items.append(line[:200].decode("utf-8", "replace"))
        count, exact = _count_lines(real)
        return bounded({"kind": "json lines", "first": redaction.redact_json(items),
                        "count": count if exact else f"more than {count}"}, budget)
    if size > MAX_JSON_BYTES:
        raise ToolError(f"'{real.name}' is a {_size(size)} JSON file, too big to parse for a "
                        f"preview; read_files shows its beginning")
    try:
        value = json.loads(real.read_bytes().decode("utf-8", errors="replace"))
    except ValueError as exc:
        raise ToolError(f"'{real.name}' is not valid JSON: {exc}") from None
    if isinstance(value, list):
        out = {"kind": "json list", "count": len(value),
               "first": redaction.redact_json(value[:PREVIEW_ROWS])}
    elif isinstance(value, dict):
        keys = list(value)
        out = {"kind": "json object", "count": len(keys), "keys": [str(k)[:80] for k in keys[:50]],
               "first": redaction.redact_json({k: value[k] for k in keys[:PREVIEW_ROWS]})}
    else:
        out = {"kind": "json value", "value": redaction.redact_json(value)}
    return bounded(out, budget)


def _preview_text(head: bytes, size: int, budget: int) -> dict:
    text = redaction.redact_text(head.decode("utf-8", errors="replace"))
    words = text.split()
    shown = " ".join(words[:PREVIEW_WORDS])
    out = {"kind": "text", "words": len(words) if size <= len(head) else
           f"{len(words)} in the first {_size(len(head))}", "text": shown[:budget]}
    if len(words) > PREVIEW_WORDS or len(shown) > budget:
        out["truncated"] = f"showing the first {min(len(shown), budget)} characters"
    return out


def _preview_excel(real: Path) -> dict:
    try:
        import openpyxl
    except ImportError:
        raise ToolError("openpyxl is not installed; Excel files cannot be previewed") from None
    try:
        book = openpyxl.load_workbook(real, read_only=True, data_only=True)
    except Exception as exc:  # a broken or encrypted workbook
        raise ToolError(f"'{real.name}' cannot be read as an Excel workbook: {exc}") from None
    try:
        sheets = []
        for sheet in book.worksheets[:5]:
            rows = []
            for row in sheet.iter_rows(max_row=PREVIEW_ROWS + 1, values_only=True):
                rows.append(["" if c is None else str(c)[:200] for c in row[:100]])
            header, body = (rows[0], rows[1:]) if rows else ([], [])
            entry = {"sheet": sheet.title, "columns": header,
                     "rows": redaction.redact_rows(header, body),
                     "row_count": max((sheet.max_row or 1) - 1, 0)}
            redacted = redaction.identifier_columns(header)
            if redacted:
                entry["redacted_columns"] = redacted
            sheets.append(entry)
        return {"kind": "excel", "sheets": sheets, "sheet_count": len(book.sheetnames)}
    finally:
        book.close()


def _preview_image(real: Path) -> dict:
    from PIL import Image
    try:
        with Image.open(real) as img:
            bands = img.getbands()
            return {"kind": "image", "format": img.format, "width": img.width,
                    "height": img.height, "mode": img.mode, "channels": len(bands),
                    "frames": getattr(img, "n_frames", 1),
                    "dpi": [float(v) for v in img.info["dpi"]] if "dpi" in img.info else None}
    except Exception as exc:
        raise ToolError(f"'{real.name}' cannot be read as an image: {exc}") from None


def _preview_dicom(real: Path) -> dict:
    import pydicom
    try:
        ds = pydicom.dcmread(real, stop_before_pixels=True, force=True)
    except Exception as exc:
        raise ToolError(f"'{real.name}' cannot be read as DICOM: {exc}") from None
    return {"kind": "dicom", **redaction.safe_dicom_summary(ds)}


def _preview_nifti(real: Path) -> dict:
    import nibabel as nib
    try:
        img = nib.load(str(real))
    except Exception as exc:
        raise ToolError(f"'{real.name}' cannot be read as NIfTI: {exc}") from None
    header = img.header
    return {"kind": "nifti", "shape": [int(s) for s in img.shape],
            "dtype": str(header.get_data_dtype()),
            "spacing": [round(float(z), 6) for z in header.get_zooms()],
            "orientation": "".join(nib.aff2axcodes(img.affine))}


def _preview_itk(real: Path) -> dict:
    import SimpleITK as sitk
    reader = sitk.ImageFileReader()
    reader.SetFileName(str(real))
    try:
        reader.ReadImageInformation()
    except Exception as exc:
        raise ToolError(f"'{real.name}' cannot be read by SimpleITK: {exc}") from None
    return {"kind": "image volume", "format": real.suffix.lower().lstrip("."),
            "shape": list(reader.GetSize()), "dtype": reader.GetPixelIDTypeAsString(),
            "components": reader.GetNumberOfComponents(),
            "spacing": [round(float(s), 6) for s in reader.GetSpacing()]}


def _npy_header(fh) -> dict:
    import numpy as np
    version = np.lib.format.read_magic(fh)
    reader = (np.lib.format.read_array_header_1_0 if version == (1, 0)
              else np.lib.format.read_array_header_2_0)
    shape, fortran, dtype = reader(fh)
    return {"shape": list(shape), "dtype": str(dtype)}


def _preview_numpy(real: Path) -> dict:
    try:
        if real.suffix.lower() == ".npy":
            with open(real, "rb") as fh:
                return {"kind": "numpy array", **_npy_header(fh)}
        arrays = {}
        with zipfile.ZipFile(real) as zf:
            for name in zf.namelist()[:50]:
                if name.endswith(".npy"):
                    with zf.open(name) as fh:
                        arrays[name[:-4]] = _npy_header(fh)
            total = len(zf.namelist())
        return {"kind": "numpy archive", "arrays": arrays, "count": total}
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        raise ToolError(f"'{real.name}' cannot be read as a numpy file: {exc}") from None


def preview_one(real: Path, st: os.stat_result, budget: int) -> dict:
    suffix = real.suffix.lower()
    lower = real.name.lower()
    head = _read_head(real, 512 * 1024)
    if lower.endswith((".nii", ".nii.gz")):
        return _preview_nifti(real)
    if suffix in ITK_SUFFIXES:
        return _preview_itk(real)
    if suffix in (".npy", ".npz"):
        return _preview_numpy(real)
    if suffix in (".xlsx", ".xlsm"):
        return _preview_excel(real)
    if suffix in IMAGE_SUFFIXES:
        return _preview_image(real)
    if _is_dicom(real, head):
        return _preview_dicom(real)
    if _is_binary(head):
        raise ToolError(f"'{real.name}' is a binary file of a kind preview_files does not "
                        f"know ({suffix or 'no extension'}, {_size(st.st_size)})")
    if suffix in TABLE_SUFFIXES:
        return _preview_table(real, head, "\t" if suffix == ".tsv" else ",", budget)
    if suffix in (".json", ".jsonl"):
        return _preview_json(real, st.st_size, budget)
    delim = redaction.sniff_delimiter(head[:65536].decode("utf-8", errors="replace"))
    if suffix in (".txt", "") and delim in ("\t", ","):
        return _preview_table(real, head, delim, budget)
    return _preview_text(head, st.st_size, budget)


class PreviewFiles(JailedTool):
    name: str = "preview_files"
    description: str = (f"Preview up to {MAX_PATHS} files of the dataset or workspace by kind: "
                        f"CSV/TSV/Excel header + first {PREVIEW_ROWS} rows + row count "
                        f"(identifier columns redacted); JSON first {PREVIEW_ROWS} items + "
                        f"count; text first words + word count; images, NIfTI, NRRD/MHA, DICOM "
                        f"and numpy files: header only (shape, dtype, spacing, technical DICOM "
                        f"tags), never pixel values or patient data.")
    args_schema: type[BaseModel] = PathsArgs

    def execute(self, paths: list[str]) -> dict:
        paths = _as_list(paths)
        if not paths or len(paths) > MAX_PATHS:
            raise ToolError(f"give 1 to {MAX_PATHS} paths")
        jail, budget = self.jail, PREVIEW_BUDGET // len(paths)
        out, names = [], []
        for name in paths:
            try:
                real = jail.resolve(name, write=False)
                st = _regular(real, name)
                item = {"path": jail.virtual(real), "size": _size(st.st_size),
                        **preview_one(real, st, budget)}
            except ToolError as exc:
                if len(paths) == 1:
                    raise
                out.append({"path": name, "error": str(exc)})
                continue
            out.append(item)
            names.append(item["path"])
        if names:
            self.ctx.note_summarised(*names)
        return bounded({"notice": NOTICE, "files": out}, RESULT_BUDGET)

    def summarise(self, result: dict) -> str:
        return ", ".join(f"{f['path']}: {f.get('kind', 'error')}" for f in result["files"])


# -- who gets what ----------------------------------------------------------------------------
FILE_TOOLS = {
    "list_files": ListFiles, "read_files": ReadFiles, "copy_files": CopyFiles,
    "write_files": WriteFiles, "edit_files": EditFiles, "run_script": RunScript,
    "script_status": ScriptStatus, "preview_dirs": PreviewDirs, "preview_files": PreviewFiles,
}
ROLE_FILE_TOOLS = {
    "task_manager": (),  # reads datacards only
    "data_engineer": ("list_files", "preview_dirs", "preview_files", "read_files",
                      "copy_files", "write_files", "edit_files", "run_script", "script_status"),
    "module_architect": ("list_files", "read_files", "preview_files", "write_files",
                         "edit_files", "run_script", "script_status"),
    "model_trainer": ("list_files", "read_files", "write_files", "edit_files", "run_script",
                      "script_status"),
}


def file_tools_for(role_key: str, ctx, role_name: str) -> list[M3Tool]:
    """The file tools of one role, bound to the job's context."""
    return [FILE_TOOLS[name](ctx=ctx, role=role_name) for name in ROLE_FILE_TOOLS[role_key]]
