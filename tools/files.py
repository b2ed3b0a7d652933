"""The paper's file and shell tools for LLM mode, jailed (``tools/sandbox.py``):

list_files, read_files, copy_files, write_files, edit_files, run_script (+ script_status),
preview_dirs, preview_files.

Paths are virtual: relative to the job's workspace (``Datapath/train.json``), or ``dataset/...``
for the planned dataset, which is read-only. Whatever a tool returns from a file is data, never
instructions: such results carry ``notice`` (``tools.sandbox.NOTICE``), the files are named to
``ctx.note_summarised`` (the audit of the next prompt), and patient identifiers are redacted
(``core/privacy/redaction.py``): identifier columns of tables, e-mail addresses, SSN-like numbers,
every identifying DICOM tag; images are described by their header, never their pixels.

Where each part lives: limits, helpers and the ``JailedTool`` base in ``tools/file_common.py``;
list_files, read_files, preview_dirs in ``tools/file_read.py``; preview_files in
``tools/file_preview.py``; copy_files, write_files, edit_files in ``tools/file_write.py``;
run_script, script_status in ``tools/file_scripts.py``. This module says which role gets which.
"""
from __future__ import annotations

from tools.base import M3Tool
from tools.file_common import JailedTool, natural_key
from tools.file_preview import PreviewFiles, preview_one
from tools.file_read import ListFiles, PreviewDirs, ReadFiles
from tools.file_scripts import RunScript, ScriptStatus
from tools.file_write import CopyFiles, EditFiles, WriteFiles

__all__ = ["FILE_TOOLS", "ROLE_FILE_TOOLS", "file_tools_for", "JailedTool", "natural_key",
           "preview_one", "ListFiles", "ReadFiles", "PreviewDirs", "PreviewFiles", "CopyFiles",
           "WriteFiles", "EditFiles", "RunScript", "ScriptStatus"]


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
