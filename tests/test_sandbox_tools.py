"""The jailed file and shell tools of LLM mode (tools/files.py), on their happy paths: diffs of
writes and edits, previews by file kind (with identifiers redacted, DICOM without patient tags,
images without pixels), directory surveys, and confined scripts (capped output, timeout,
background runs, the dataset readable through $M3B_DATASET_DIR). No training, no CrewAI run."""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from conftest import tree_digest
from core.jobs.lifecycle import create_job
from runtime import landlock
from tools import confinement
from tools import scripts
from tools.context import JobContext
from tools.files import FILE_TOOLS, file_tools_for
from tools.sandbox import NOTICE

PATIENTS = ["Doe^John", "Roe^Jane", "Poe^Edgar", "Moe^Ann", "Zoe^Lee", "Kay^Bob"]
BIRTHS = ["1950-01-01", "1961-02-02", "1972-03-03", "1983-04-04", "1994-05-05", "2001-06-06"]


def make_dataset(root: Path) -> Path:
    """A small dataset: class folders of PNGs, a table with identifiers, JSON, text, DICOM,
    NIfTI, numpy and Excel files."""
    import nibabel as nib
    import numpy as np
    import openpyxl
    import pydicom.data
    from PIL import Image
    for cls, names in (("NORMAL", ["img10", "img2", "img1", "img3"]),
                       ("PNEUMONIA", ["p1", "p11", "p2"])):
        folder = root / "train" / cls
        folder.mkdir(parents=True)
        for i, name in enumerate(names):
            Image.fromarray(np.full((8, 12), 40 * i, dtype=np.uint8)).save(folder / f"{name}.png")
    rows = ["image,PatientName,patient_birth_date,patient_id,label"]
    rows += [f"train/NORMAL/img{i}.png,{p},{b},P{i:03d},{i % 2}"
             for i, (p, b) in enumerate(zip(PATIENTS, BIRTHS))]
    (root / "labels.csv").write_text("\n".join(rows) + "\n")
    (root / "meta.json").write_text(json.dumps(
        [{"image": f"train/NORMAL/img{i}.png", "name": PATIENTS[i], "label": i % 2}
         for i in range(6)]))
    (root / "classes.json").write_text(json.dumps({f"class{i}": i for i in range(8)}))
    (root / "notes.txt").write_text("chest x-ray study " * 50 + "\n")
    (root / "ct").mkdir()
    shutil.copy(pydicom.data.get_testdata_file("CT_small.dcm"), root / "ct" / "CT_small.dcm")
    nib.save(nib.Nifti1Image(np.zeros((6, 5, 4), np.int16), np.diag([0.8, 0.8, 2.5, 1.0])),
             str(root / "vol.nii.gz"))
    np.save(root / "arr.npy", np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["case", "Patient Name", "DOB", "grade"])
    for i in range(6):
        sheet.append([f"c{i}", PATIENTS[i], BIRTHS[i], i])
    book.save(root / "table.xlsx")
    return root


def register_card(settings, name: str, dataset: Path) -> None:
    """A registered datacard for ``dataset`` (the job's dataset folder must be registered)."""
    from core.datasets.datacards import Datacard, save_datacard
    save_datacard(Datacard(name=name, path=str(dataset), tasks=["diagnosis"]),
                  settings.datacards_dir)


def make_job(settings, store, dataset: Path) -> JobContext:
    register_card(settings, "tiny", dataset)
    job_id = create_job(settings, store, "classify pneumonia", llm="scripted", auto_approve=True)
    ctx = JobContext(settings, store, job_id, "classify pneumonia")
    ws = ctx.workspace.ensure()
    ws.plan.write_text(json.dumps({"status": "ready", "dataset": "tiny", "template": "diagnosis",
                                   "dataset_path": str(dataset), "task": "diagnosis"}))
    return ctx


@pytest.fixture
def job(settings, store, tmp_path):
    dataset = make_dataset(tmp_path / "tiny_dataset")
    before = tree_digest(dataset)
    ctx = make_job(settings, store, dataset)
    tools = {name: cls(ctx=ctx, role="Data Engineer") for name, cls in FILE_TOOLS.items()}
    yield ctx, tools, dataset
    scripts.stop_background(ctx.job_id)
    assert tree_digest(dataset) == before, "the dataset changed"


def ok(result: dict) -> dict:
    assert result["ok"], result
    return result


def refused(result: dict, *words: str) -> str:
    assert not result["ok"], result
    for word in words:
        assert word.lower() in result["error"].lower(), result["error"]
    return result["error"]


# -- write / edit -----------------------------------------------------------------------------
def test_write_and_edit_return_diff_summaries(job):
    ctx, tools, _ = job
    first = ok(tools["write_files"].call(path="scripts/a.py", content="x = 1\ny = 2\n"))
    assert (first["action"], first["lines_added"], first["lines_removed"]) == ("created", 2, 0)
    assert (ctx.workspace.root / "scripts" / "a.py").read_text() == "x = 1\ny = 2\n"
    second = ok(tools["write_files"].call(path="scripts/a.py", content="x = 1\ny = 3\nz = 4\n"))
    assert (second["action"], second["lines_added"], second["lines_removed"]) == (
        "overwritten", 2, 1)
    edit = ok(tools["edit_files"].call(path="scripts/a.py", old="y = 3", new="y = 30"))
    assert edit["replaced"] == 1 and "-y = 3" in edit["diff"] and "+y = 30" in edit["diff"]
    assert (ctx.workspace.root / "scripts" / "a.py").read_text() == "x = 1\ny = 30\nz = 4\n"
    assert "scripts/a.py" in ctx.summarised


def test_edit_not_found_and_ambiguous_are_errors(job):
    ctx, tools, _ = job
    ok(tools["write_files"].call(path="Datapath/cfg.py", content="a = 1\na = 1\nb = 2\n"))
    refused(tools["edit_files"].call(path="Datapath/cfg.py", old="c = 3", new="c = 4"),
            "not found")
    refused(tools["edit_files"].call(path="Datapath/cfg.py", old="a = 1", new="a = 2"),
            "2 times", "count")
    refused(tools["edit_files"].call(path="Datapath/cfg.py", old="b = 2", new="", count=3),
            "fewer")
    refused(tools["edit_files"].call(path="Datapath/missing.py", old="a", new="b"),
            "does not exist")
    both = ok(tools["edit_files"].call(path="Datapath/cfg.py", old="a = 1", new="a = 2",
                                       count=2))
    assert both["replaced"] == 2 and both["lines_removed"] == 2
    assert (ctx.workspace.datapath / "cfg.py").read_text() == "a = 2\na = 2\nb = 2\n"


# -- read / copy ------------------------------------------------------------------------------
def test_read_files_reads_text_with_notice_and_refuses_binaries(job):
    ctx, tools, _ = job
    ok(tools["write_files"].call(path="scripts/hello.py", content="print('hi')\n"))
    result = ok(tools["read_files"].call(paths=["scripts/hello.py", "dataset/notes.txt"]))
    assert result["notice"] == NOTICE
    assert result["files"][0]["content"] == "print('hi')\n"
    assert result["files"][1]["path"] == "dataset/notes.txt"
    assert {"scripts/hello.py", "dataset/notes.txt"} <= set(ctx.summarised)
    refused(tools["read_files"].call(paths=["dataset/train/NORMAL/img1.png"]),
            "binary", "preview_files")
    refused(tools["read_files"].call(paths=["dataset/ct/CT_small.dcm"]), "preview_files")
    csv = ok(tools["read_files"].call(paths="dataset/labels.csv"))["files"][0]["content"]
    assert "[redacted]" in csv and "P001" in csv
    assert not any(p in csv for p in PATIENTS) and not any(b in csv for b in BIRTHS)


def test_copy_files_from_dataset_into_workspace(job):
    ctx, tools, dataset = job
    one = ok(tools["copy_files"].call(sources=["dataset/labels.csv"], destination="Datapath/"))
    assert one["copied"] == ["dataset/labels.csv -> Datapath/labels.csv"]
    assert (ctx.workspace.datapath / "labels.csv").read_bytes() == \
        (dataset / "labels.csv").read_bytes()
    ok(tools["copy_files"].call(sources=["dataset/train/NORMAL/img1.png",
                                         "dataset/train/NORMAL/img2.png"],
                                destination="scripts/imgs"))
    assert sorted(p.name for p in (ctx.workspace.root / "scripts" / "imgs").iterdir()) == [
        "img1.png", "img2.png"]
    ok(tools["copy_files"].call(sources="Datapath/labels.csv", destination="scripts/l.csv"))
    assert (ctx.workspace.root / "scripts" / "l.csv").is_file()


# -- previews ---------------------------------------------------------------------------------
def test_preview_csv_redacts_identifier_columns(job):
    ctx, tools, _ = job
    result = ok(tools["preview_files"].call(paths=["dataset/labels.csv"]))
    table = result["files"][0]
    assert result["notice"] == NOTICE and table["kind"] == "table"
    assert table["columns"] == ["image", "PatientName", "patient_birth_date", "patient_id",
                                "label"]
    assert table["row_count"] == 6 and len(table["rows"]) == 5
    assert set(table["redacted_columns"]) == {"PatientName", "patient_birth_date"}
    assert all(r[1] == r[2] == "[redacted]" for r in table["rows"])
    assert [r[3] for r in table["rows"]] == [f"P{i:03d}" for i in range(5)]
    text = json.dumps(result)
    assert not any(p in text for p in PATIENTS + BIRTHS)
    assert "dataset/labels.csv" in ctx.summarised


def test_preview_dicom_shows_no_patient_tags(job):
    _, tools, _ = job
    result = ok(tools["preview_files"].call(paths=["dataset/ct/CT_small.dcm"]))
    item = result["files"][0]
    assert item["kind"] == "dicom" and item["tags"]["Modality"] == "CT"
    assert item["tags"]["Rows"] == 128 and item["tags"]["PixelSpacing"] == [0.661468, 0.661468]
    assert item["withheld"] > 100
    text = json.dumps(result)
    for secret in ("CompressedSamples", "1CT1", "JFK", "20040119", "PatientName", "PatientID",
                   "PatientBirthDate", "InstitutionName", "StudyDate", "PixelData"):
        assert secret not in text, secret


def test_preview_json_text_and_table_counts(job):
    _, tools, _ = job
    result = ok(tools["preview_files"].call(paths=["dataset/meta.json", "dataset/classes.json",
                                                   "dataset/notes.txt", "dataset/table.xlsx"]))
    meta, classes, notes, sheet = result["files"]
    assert meta["kind"] == "json list" and meta["count"] == 6 and len(meta["first"]) == 5
    assert all(item["name"] == "[redacted]" for item in meta["first"])
    assert classes["kind"] == "json object" and classes["count"] == 8
    assert len(classes["first"]) == 5
    assert notes["kind"] == "text" and notes["words"] == 150
    assert sheet["kind"] == "excel" and sheet["sheets"][0]["row_count"] == 6
    assert set(sheet["sheets"][0]["redacted_columns"]) == {"Patient Name", "DOB"}
    assert not any(p in json.dumps(result) for p in PATIENTS + BIRTHS)


def test_preview_images_give_metadata_never_pixels(job):
    _, tools, _ = job
    result = ok(tools["preview_files"].call(paths=["dataset/train/NORMAL/img3.png",
                                                   "dataset/vol.nii.gz", "dataset/arr.npy"]))
    png, nii, npy = result["files"]
    assert (png["kind"], png["width"], png["height"], png["mode"]) == ("image", 12, 8, "L")
    assert nii["shape"] == [6, 5, 4] and nii["spacing"] == [0.8, 0.8, 2.5]
    assert nii["dtype"] == "int16"
    assert npy["shape"] == [2, 3, 4] and npy["dtype"] == "float32"
    for item in result["files"]:
        assert not {"pixels", "values", "data", "min", "max", "mean"} & set(item)


def test_preview_dirs_natural_sort_and_counts(job):
    ctx, tools, dataset = job
    result = ok(tools["preview_dirs"].call())
    folders = {f["folder"]: f for f in result["folders"]}
    normal = folders["dataset/train/NORMAL"]
    assert normal["files"] == 4
    assert normal["first"] == [f"dataset/train/NORMAL/img{i}.png" for i in (1, 2, 3, 10)]
    assert folders["dataset/train/PNEUMONIA"]["first"] == [
        f"dataset/train/PNEUMONIA/p{i}.png" for i in (1, 2, 11)]
    assert result["total_files"] == 15 and result["real_folder"] == str(dataset.resolve())
    assert result["notice"] == NOTICE and "dataset" in ctx.summarised


def test_list_files_caps_entries(job):
    ctx, tools, _ = job
    many = ctx.workspace.root / "scripts" / "many"
    many.mkdir(parents=True)
    for i in range(250):
        (many / f"f{i}.txt").write_text("x")
    result = ok(tools["list_files"].call(path="scripts"))
    assert result["shown"] == 200 and result["files"] == 250 and "50 more" in result["more"]
    assert result["entries"][:3] == ["many/f0.txt (1 B)", "many/f1.txt (1 B)",
                                     "many/f2.txt (1 B)"]
    top = ok(tools["list_files"].call(path=".", recursive=False))
    assert "Datapath/" in top["entries"] and "plan.json" in " ".join(top["entries"])
    data = ok(tools["list_files"].call(path="dataset/train"))
    assert data["files"] == 7 and data["folder"] == "dataset/train"


# -- scripts ----------------------------------------------------------------------------------
def write_script(tools, path: str, code: str) -> None:
    ok(tools["write_files"].call(path=path, content=code))


def test_run_script_caps_output(job):
    _, tools, _ = job
    write_script(tools, "scripts/loud.py",
                 "import sys\nprint('BEGIN' + 'a' * 3000)\nprint('b' * 20000)\n"
                 "print('END', sys.argv[1:])\nsys.exit(3)\n")
    result = ok(tools["run_script"].call(script="scripts/loud.py", args=["x y"]))
    assert result["returncode"] == 3 and result["status"] == "finished"
    out = result["output"]
    assert out.startswith("BEGIN") and "END ['x y']" in out
    assert "chars cut]" in out and len(out) < scripts.HEAD_CHARS + scripts.TAIL_CHARS + 100
    assert result["notice"] == NOTICE


def test_run_script_timeout_kills_the_process_group(job):
    ctx, tools, _ = job
    marker = ctx.workspace.root / "scripts" / "late.txt"
    write_script(tools, "scripts/late.py",
                 f"import time\ntime.sleep(2.5)\nopen({str(marker)!r}, 'w').write('late')\n")
    write_script(tools, "scripts/slow.py",
                 "import subprocess, sys, time\n"
                 "subprocess.Popen([sys.executable, 'scripts/late.py'])\n"
                 "print('started', flush=True)\ntime.sleep(60)\n")
    started = time.time()
    result = ok(tools["run_script"].call(script="scripts/slow.py", timeout_s=1))
    assert time.time() - started < 10
    assert "1 s limit" in result["ended"] and result["returncode"] != 0
    assert "started" in result["output"]
    time.sleep(2.5)
    assert not marker.exists(), "a child of the timed-out script survived"


def test_background_script_and_status(job):
    ctx, tools, _ = job
    write_script(tools, "scripts/bg.py",
                 "import time\nprint('working', flush=True)\ntime.sleep(0.8)\nprint('done')\n")
    start = ok(tools["run_script"].call(script="scripts/bg.py", background=True))
    assert start["status"] == "running" and start["handle"]
    status = ok(tools["script_status"].call(handle=start["handle"]))
    assert status["status"] in ("running", "finished")
    deadline = time.time() + 20
    while status["status"] == "running" and time.time() < deadline:
        time.sleep(0.2)
        status = ok(tools["script_status"].call(handle=start["handle"]))
    assert status["status"] == "finished" and status["returncode"] == 0
    assert "working" in status["output"] and "done" in status["output"]
    refused(tools["script_status"].call(handle="nope"), "no background script")
    write_script(tools, "scripts/forever.py", "import time\ntime.sleep(600)\n")
    long = ok(tools["run_script"].call(script="scripts/forever.py", background=True))
    assert scripts.stop_background(ctx.job_id) == 1
    run_proc_gone = refused(tools["script_status"].call(handle=long["handle"]))
    assert "no background script" in run_proc_gone


def test_script_reads_dataset_dir_and_writes_an_index(job):
    ctx, tools, dataset = job
    write_script(tools, "scripts/index.py", """
import csv, json, os
root = os.environ["M3B_DATASET_DIR"]
rows = list(csv.DictReader(open(os.path.join(root, "labels.csv"))))
index = {os.path.join(root, r["image"]): [int(r["label"])] for r in rows}
os.makedirs("Datapath", exist_ok=True)
json.dump(index, open("Datapath/train.json", "w"))
import tempfile; tempfile.NamedTemporaryFile().close()
env = os.environ
print(len(index), env["HOME"] == env["TMPDIR"], os.getcwd() == env["M3B_WORKSPACE"])
""")
    result = ok(tools["run_script"].call(script="scripts/index.py"))
    assert result["returncode"] == 0, result["output"]
    assert result["output"].split() == ["6", "True", "True"]
    index = json.loads((ctx.workspace.datapath / "train.json").read_text())
    assert str(dataset.resolve() / "train/NORMAL/img0.png") in index


def test_numpy_and_torch_import_under_landlock(job):
    if landlock.abi_version() == 0:
        pytest.skip("no Landlock on this kernel")
    _, tools, _ = job
    write_script(tools, "scripts/t.py",
                 "import numpy, torch\nprint(float(torch.ones(3).sum()), numpy.__name__)\n"
                 "import core.config.settings, core.imaging.image_io\nprint('imports ok')\n")
    result = ok(tools["run_script"].call(script="scripts/t.py", timeout_s=300))
    assert result["returncode"] == 0, result["output"]
    assert "3.0 numpy" in result["output"] and "imports ok" in result["output"]
    assert "Error" not in result["output"], result["output"]


def test_scripts_refused_without_landlock_unless_allowed(job, monkeypatch):
    _, tools, _ = job
    write_script(tools, "scripts/p.py", "print('ran')\n")
    from runtime import protections
    found = {**protections.protections(), "landlock_abi": 0}
    monkeypatch.setattr(landlock, "abi_version", lambda: 0)
    monkeypatch.setattr(confinement, "missing_protections",
                        lambda allow_tcp=False: protections.missing(allow_tcp, found))
    refused(tools["run_script"].call(script="scripts/p.py"), "Landlock",
            confinement.UNCONFINED_ENV)
    monkeypatch.setenv(confinement.UNCONFINED_ENV, "1")
    assert ok(tools["run_script"].call(script="scripts/p.py"))["output"].strip() == "ran"


def test_roles_get_their_file_tools(job):
    from tools.registry import ROLE_TOOLS, tools_for
    ctx, _, _ = job
    expected = {
        "task_manager": [],
        "data_engineer": ["list_files", "preview_dirs", "preview_files", "read_files",
                          "copy_files", "write_files", "edit_files", "run_script",
                          "script_status"],
        "module_architect": ["list_files", "read_files", "preview_files", "write_files",
                             "edit_files", "run_script", "script_status"],
        "model_trainer": ["list_files", "read_files", "write_files", "edit_files",
                          "run_script", "script_status"]}
    names = {role: [t.name for t in tools_for(role, ctx)] for role in expected}
    for role, files in expected.items():
        high_level = [t.name for t in ROLE_TOOLS[role](ctx)]
        assert high_level and names[role] == high_level + files, role  # high-level tools first
    assert "write_plan" in names["task_manager"] and "build_index" in names["data_engineer"]
    for role, listed in names.items():
        assert len(listed) == len(set(listed)), role
    tool = file_tools_for("data_engineer", ctx, "Data Engineer")[0]
    assert tool.role == "Data Engineer" and tool.args_schema.model_json_schema()[
        "properties"]["path"]["description"]


# -- redaction helpers (core/redaction.py) ----------------------------------------------------
@pytest.mark.parametrize("column", [
    "name", "Name", "PatientName", "patient name", "patient_birth_date", "Birth Date", "DOB",
    "date_of_birth", "MRN", "Medical Record Number", "medical_record", "SSN", "Address",
    "home_address", "Phone", "telephone", "E-mail", "email", "first_name", "Surname",
    "ReferringPhysicianName", "zip"])
def test_identifier_columns(column):
    from core.privacy.redaction import is_identifier_column
    assert is_identifier_column(column)


@pytest.mark.parametrize("column", [
    "patient_id", "PatientID", "label", "file_name", "filename", "image_name", "ClassName",
    "Image Index", "Finding Labels", "age", "sex", "series_name", "birth_weight", "mailbox"])
def test_non_identifier_columns(column):
    from core.privacy.redaction import is_identifier_column
    assert not is_identifier_column(column)


def test_redact_text_tables_and_cut_json():
    from core.privacy.redaction import redact_rows, redact_text
    table = redact_text('id;Patient Name;label\n1;"Doe; John";a\n2;Roe;b\n')
    assert "Doe" not in table and "Roe" not in table and table.count("[redacted]") == 2
    cut = redact_text('[{"name": "Doe, John", "file_name": "a.png"}, {"name": "Ro')
    assert "Doe" not in cut and '"Ro' not in cut and "a.png" in cut
    assert "jdoe@example.org" not in redact_text("contact jdoe@example.org or 123-45-6789")
    assert redact_rows(["a", "DOB"], [[1, "1990"], {"DOB": "x", "a": 2}]) == [
        [1, "[redacted]"], {"DOB": "[redacted]", "a": 2}]


def test_no_dataset_in_the_plan_means_no_dataset_folder(settings, store, tmp_path):
    ctx = make_job(settings, store, tmp_path)
    ctx.workspace.plan.write_text(json.dumps({"status": "no_dataset", "dataset": None}))
    tool = FILE_TOOLS["preview_dirs"](ctx=ctx, role="Data Engineer")
    refused(tool.call(path="dataset"), "no dataset")
    listing = FILE_TOOLS["list_files"](ctx=ctx, role="Data Engineer").call(path=".")
    assert listing["ok"] and "plan.json" in " ".join(listing["entries"])


@pytest.mark.skipif(landlock.abi_version() == 0, reason="no Landlock on this kernel")
def test_landlock_confines_at_every_abi_the_kernel_has(tmp_path):
    """Each ABI's rights mask is accepted; reads of read-only roots work, writes there and
    anywhere unlisted are denied, writes to read-write roots work."""
    import os
    import subprocess
    import sys
    ro, rw = tmp_path / "ro", tmp_path / "rw"
    ro.mkdir()
    rw.mkdir()
    (ro / "data.txt").write_text("data")
    system = sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)}
                    | {"/usr", "/lib", "/lib64", "/etc"})
    code = ("import sys\n"
            "def t(f):\n"
            "    try:\n        f(); return 'ok'\n"
            "    except OSError as e:\n        return 'denied'\n"
            f"print(t(lambda: open({str(ro / 'data.txt')!r}).read()),"
            f" t(lambda: open({str(ro / 'new.txt')!r}, 'w')),"
            f" t(lambda: open({str(rw / 'new.txt')!r}, 'w')),"
            f" t(lambda: open({str(tmp_path / 'x.txt')!r}, 'w')))\n")
    for abi in range(1, landlock.abi_version() + 1):
        def confine(abi=abi):
            landlock.confine(read_write=[rw], read_only=system + [str(ro)], abi=abi)
        landlock.prepare()
        out = subprocess.run([sys.executable, "-S", "-c", code], preexec_fn=confine,
                             capture_output=True, text=True, timeout=60)
        assert out.stdout.split() == ["ok", "denied", "ok", "denied"], (abi, out.stderr)


def test_listings_and_previews_fit_the_result_limit(job):
    from tools.base import MAX_RESULT_CHARS
    ctx, tools, _ = job
    deep = ctx.workspace.root / "scripts" / ("long_folder_name_" * 4)
    for i in range(80):
        sub = deep / f"sub{i}"
        sub.mkdir(parents=True)
        for j in range(6):
            (sub / f"a_rather_long_file_name_{j}.txt").write_text("x")
    for call in (tools["list_files"].call(path="scripts"),
                 tools["preview_dirs"].call(path="scripts"),
                 tools["preview_files"].call(paths=["dataset/ct/CT_small.dcm"] * 10)):
        assert call["ok"] and len(json.dumps(call)) <= MAX_RESULT_CHARS, len(json.dumps(call))
    listing = tools["list_files"].call(path="scripts")
    assert listing["files"] == 480 and "more" in listing
    survey = tools["preview_dirs"].call(path="scripts")
    assert survey["total_folders"] == 82 and "more" in survey


@pytest.mark.parametrize("folder", ["/", "{home}", "{repo}", "{app}"])
def test_a_plan_pointing_at_a_system_folder_exposes_nothing(settings, store, tmp_path, folder):
    from core.config.settings import REPO_ROOT
    ctx = make_job(settings, store, tmp_path)
    real = folder.format(home=Path.home(), repo=REPO_ROOT, app=settings.home)
    register_card(settings, "system", Path(real))  # even a registered card's folder is refused
    ctx.workspace.plan.write_text(json.dumps({"status": "ready", "dataset": "system",
                                              "dataset_path": real}))
    for name in ("preview_dirs", "list_files"):
        refused(FILE_TOOLS[name](ctx=ctx, role="Data Engineer").call(path="dataset"),
                "is or contains")
