"""Every file tool checks a file's size before reading it and reads at most a bounded amount: a
200 MB file a script made in the workspace (sparse: no disk used) is overwritten, read,
previewed and refused for edits without the app's memory growing by the file's size (measured
in a fresh process, peak RSS), and each refusal says what, how big, the limit and what to do."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SIZE = 200 << 20
GROWTH_LIMIT_MB = 60  # far below the 200 MB one whole read of a file would add

PROBE = textwrap.dedent('''
    import json, os, resource, sys
    sys.path.insert(0, sys.argv[1])
    from core.config.bootstrap import apply
    apply()
    from core.config.settings import get_settings
    from core.store.db import open_store
    from core.jobs.lifecycle import create_job
    from tools.context import JobContext
    from tools.files import FILE_TOOLS

    SIZE = int(sys.argv[2])
    settings = get_settings()
    store = open_store(settings.store_path)
    job = create_job(settings, store, "classify", llm="scripted/x")
    ctx = JobContext(settings, store, job, "classify")
    ws = ctx.workspace.ensure()
    (ws.root / "scripts").mkdir()
    tools = {n: FILE_TOOLS[n](ctx=ctx, role="Data Engineer") for n in FILE_TOOLS}

    def sparse(name, head=b""):
        path = ws.root / "scripts" / name
        with open(path, "wb") as fh:
            fh.write(head)
            fh.truncate(SIZE)  # the rest is a hole: no disk used
        return "scripts/" + name

    def peak_mb():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    # warm up: every code path once on small files (imports, caches), then measure
    small = {"s.log": b"a b c\\n", "s.json": b"[1, 2]", "s.jsonl": b"{}\\n", "s.csv": b"a,b\\n1,2\\n"}
    for name, data in small.items():
        (ws.root / "scripts" / name).write_bytes(data)
        tools["read_files"].call(paths=["scripts/" + name])
        tools["preview_files"].call(paths=["scripts/" + name])
    tools["write_files"].call(path="scripts/s.log", content="x\\n")
    tools["edit_files"].call(path="scripts/s.log", old="x", new="y")
    text = sparse("big.log", b"a line of text\\n" * 1200)
    one_line = sparse("big.jsonl", b'{"a": "' + b"x" * 9000)
    big_json = sparse("big.json", b"[" + b"1, " * 4000)
    big_csv = sparse("big.csv", b"a,b\\n" + b"1,2\\n" * 3000)
    book = sparse("big.xlsx", b"PK")
    overwrite = sparse("over.py", b"print(1)\\n" * 1000)
    before = peak_mb()
    out = {
        "read": tools["read_files"].call(paths=[text]),
        "preview_text": tools["preview_files"].call(paths=[text]),
        "preview_jsonl": tools["preview_files"].call(paths=[one_line]),
        "preview_json": tools["preview_files"].call(paths=[big_json]),
        "preview_csv": tools["preview_files"].call(paths=[big_csv]),
        "preview_xlsx": tools["preview_files"].call(paths=[book]),
        "edit": tools["edit_files"].call(path=text, old="a line", new="b line"),
        "write": tools["write_files"].call(path=overwrite, content="print(2)\\n"),
    }
    out["growth_mb"] = peak_mb() - before
    out["written"] = (ws.root / overwrite).read_text()
    out["sizes"] = {n: os.stat(ws.root / p).st_size for n, p in
                    (("text", text), ("over", overwrite))}
    print("RESULT " + json.dumps(out, default=str))
''')


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    home = tmp_path_factory.mktemp("bounded-home")
    env = {**os.environ, "M3B_HOME": str(home), "CREWAI_TESTING": "true"}
    proc = subprocess.run([sys.executable, "-c", PROBE, str(ROOT), str(SIZE)], env=env,
                          capture_output=True, text=True, timeout=600)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(line[len("RESULT "):])


def test_memory_stays_bounded_for_a_200_mb_file(probe):
    assert probe["growth_mb"] < GROWTH_LIMIT_MB, probe["growth_mb"]


def test_write_files_replaces_a_big_file_without_reading_it(probe):
    result = probe["write"]
    assert result["ok"], result
    assert result["action"] == "overwritten" and result["lines_removed"] is None
    assert "209.7 MB" in result["note"] and "without a diff" in result["note"]
    assert probe["written"] == "print(2)\n" and probe["sizes"]["over"] == len("print(2)\n")


def test_read_and_preview_show_a_bounded_head(probe):
    read = probe["read"]
    assert read["ok"], read
    item = read["files"][0]
    assert item["content"].startswith("a line of text") and "209.7 MB" in item["truncated"]
    assert probe["preview_text"]["ok"] and probe["preview_text"]["files"][0]["kind"] == "text"
    jsonl = probe["preview_jsonl"]
    assert jsonl["ok"] and "a line longer than" in json.dumps(jsonl["files"][0]["first"])
    csv = probe["preview_csv"]
    assert csv["ok"] and csv["files"][0]["kind"] == "table"


@pytest.mark.parametrize("key, words", [
    ("preview_json", ["big.json", "209.7 MB", "67.1 MB", "read_files"]),
    ("preview_xlsx", ["big.xlsx", "209.7 MB", "67.1 MB", "CSV"]),
    ("edit", ["big.log", "209.7 MB", "4.0 MB", "script"]),
])
def test_too_big_files_are_refused_with_what_to_do(probe, key, words):
    result = probe[key]
    assert not result["ok"], result
    for word in words:
        assert word in result["error"], result["error"]


def test_the_edit_refusal_left_the_file_whole(probe):
    assert probe["sizes"]["text"] == SIZE


def test_json_the_system_reads_is_bounded(tmp_path):
    from tools.context import ToolError, read_json_bounded
    path = tmp_path / "train_summary.json"
    path.write_text('{"epochs_run": 2}')
    assert read_json_bounded(path, 100) == {"epochs_run": 2}
    with open(path, "ab") as fh:
        fh.truncate(SIZE)
    with pytest.raises(ToolError, match=r"train_summary.json is 209.7 MB, more than the "
                                         r"0.0 MB"):
        read_json_bounded(path, 100)


def test_workspace_json_and_child_log_tails_are_bounded(tmp_path):
    """A plan.json a child replaced by a huge (sparse) file is refused before it is read, and
    the log tail shown after a child ends reads only the log's end."""
    import resource

    from core.jobs.workspace import MAX_JSON_BYTES, JobWorkspace
    from runtime.process import TAIL_BYTES, tail
    ws = JobWorkspace(tmp_path / "job").ensure()
    ws.plan.write_text('{"status": "ready"}')
    assert ws.read_plan() == {"status": "ready"}
    with open(ws.plan, "ab") as fh:
        fh.truncate(SIZE)
    with pytest.raises(ValueError, match=r"plan.json is 209.7 MB, more than the 16.8 MB"):
        ws.read_plan()
    assert MAX_JSON_BYTES < SIZE

    log = tmp_path / "child.log"
    with open(log, "wb") as fh:
        fh.truncate(SIZE)  # a sparse gigantic log ...
        fh.seek(SIZE)
        fh.write(b"half line\nTraceback: the end\n")  # ... whose end matters
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert tail(log).splitlines()[-1] == "Traceback: the end"
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < GROWTH_LIMIT_MB and TAIL_BYTES < SIZE
