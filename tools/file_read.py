"""The reading file tools: list_files, read_files, preview_dirs (``tools/files.py``)."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from pydantic import BaseModel, Field, field_validator

from core.privacy import redaction
from tools.context import ToolError
from tools.file_common import (CODE_SUFFIXES, DIR_FIRST, MAX_DIRS, MAX_HEAD_BYTES, MAX_LIST,
                               MAX_PATHS, MAX_WALK, READ_BUDGET, RESULT_BUDGET, TABLE_SUFFIXES, JailedTool,
                               _as_list, _is_binary, _is_dicom, _read_head, _regular, _size,
                               natural_key, path_list)
from tools.sandbox import DATASET


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
        paths = path_list(paths)
        jail, budget = self.jail, READ_BUDGET // len(paths)
        out, names = [], []
        for name in paths:
            real = jail.resolve(name, write=False)
            st = _regular(real, name)
            head = _read_head(real, MAX_HEAD_BYTES)  # never more, whatever the size
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
