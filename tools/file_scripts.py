"""run_script and script_status (``tools/files.py``): the file tools' face of
``tools/scripts.py``, which runs agent scripts confined to the job's workspace."""
from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from tools import scripts
from tools.file_common import JailedTool, _as_list


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
                        "never in the dataset; it has no network, no Unix sockets, and cannot "
                        "change files' modes, owners or times (use shutil.copyfile, not "
                        "shutil.copy/copy2/copytree; DataLoader num_workers=0). Returns exit "
                        "code, seconds and the output (head and tail).")
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
