"""Shared fixtures. Every test gets its own M3Builder home (never the user's), CrewAI's storage
in a temp folder, and no telemetry."""
from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("CREWAI_TESTING", "true")
# no warm standby worker per app run (core/jobs/standby.py); tests/test_standby_worker.py
# turns it on where it tests it
os.environ.setdefault("M3B_WARM_WORKER", "0")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # two test processes on two cores (make test): one compute thread each, for the process and
    # every training child it starts. Two 2-thread trainings on 2 cores spin against each other
    # (measured: a 35 s training took 385 s)
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_name, "1")

from core.config.bootstrap import apply  # noqa: E402

apply()  # process set-up before anything imports crewai


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``make test``: two processes, ``--dist loadfile`` so a file's
    module-scoped trained fixtures are built once, ``--no-loadscope-reorder`` so this order is
    kept) the files with the most slow tests are handed out first: the longest first keeps the
    two processes' ends close."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    weight: dict[str, int] = {}
    for item in items:
        name = item.nodeid.split("::")[0]
        weight[name] = weight.get(name, 0) + bool(item.get_closest_marker("slow"))
    order = {id(item): n for n, item in enumerate(items)}
    items.sort(key=lambda i: (-weight[i.nodeid.split("::")[0]], order[id(i)]))


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("m3b-home")
    monkeypatch.setenv("M3B_HOME", str(home))
    monkeypatch.setenv("CREWAI_STORAGE_DIR", str(tmp_path_factory.mktemp("crewai")))
    monkeypatch.delenv("M3B_LLM", raising=False)
    yield


@pytest.fixture
def settings():
    from core.config.settings import get_settings
    return get_settings()


@pytest.fixture
def store(settings):
    from core.store.db import open_store
    return open_store(settings.store_path)


@pytest.fixture(scope="session")
def demo_folder(tmp_path_factory) -> Path:
    from core.demo.chest_xray import make_chest_xray_demo
    return make_chest_xray_demo(tmp_path_factory.mktemp("demo") / "chest_xray_demo")


@pytest.fixture
def registered_demo(settings, store, demo_folder):
    from core.demo.chest_xray import DEMO_DESCRIPTION, DEMO_NAME
    from core.datasets.registration import register_dataset
    result = register_dataset(settings, store, str(demo_folder), DEMO_NAME, DEMO_DESCRIPTION)
    assert result["status"] == "registered", result
    return result


SMALL_DEMO = "Small chest X-ray"


@pytest.fixture(scope="session")
def small_folder(tmp_path_factory):
    """A tiny chest X-ray set (14 patients per class, 48 px): LLM-mode tests train on it."""
    from core.demo.chest_xray import make_chest_xray_demo
    return make_chest_xray_demo(tmp_path_factory.mktemp("small") / "cxr", patients_per_class=14,
                                size=48)


@pytest.fixture
def small(settings, store, small_folder):
    from core.datasets.registration import register_dataset
    result = register_dataset(settings, store, str(small_folder), SMALL_DEMO,
                              "Small synthetic chest X-ray PNGs, NORMAL vs PNEUMONIA folders")
    assert result["status"] == "registered", result
    return small_folder


def tree_digest(folder: Path) -> str:
    """Hash of every path, size and content under folder (hidden files included)."""
    digest = hashlib.sha256()
    for path in sorted(Path(folder).rglob("*")):
        digest.update(str(path.relative_to(folder)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def channel_paths(output_dir) -> dict:
    """The run-channel keys of a train_config.json whose output folder is ``output_dir``."""
    return {"metrics_path": str(Path(output_dir) / "metrics.jsonl"),
            "stop_path": str(Path(output_dir) / "stop.request")}


def channel_metrics(output_dir) -> list[dict]:
    """What a training child reported through its run channel, as the store's metric rows
    (step, epoch, name, value), each line validated as the parent validates it."""
    import json

    from core.training.channel import parse_line
    rows = []
    path = Path(output_dir) / "metrics.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        parsed = parse_line(line)
        assert parsed is not None, f"the parent would reject this channel line: {line[:200]}"
        step, epoch, values = parsed
        ts = json.loads(line).get("ts", 0.0)
        rows += [{"step": step, "epoch": epoch, "name": k, "value": v, "ts": ts}
                 for k, v in values.items()]
    return rows


STORE_GUARD = '''
import os, sys
_spec = os.environ.get("M3B_TEST_STORE_GUARD")
if _spec and "core.config.launch" in sys.orig_argv:  # the children of a job, not its worker
    _store, _log, _seen = _spec.split("|")
    with open(_seen, "a") as _f:
        _f.write(f"{os.getpid()}\\n")
    _names = {os.path.realpath(_store + s) for s in ("", "-wal", "-shm", "-journal")}

    def _guard(event, args):
        if event in ("open", "sqlite3.connect") and args:
            target = args[0]
            if isinstance(target, (str, bytes, os.PathLike)):
                path = os.path.realpath(os.fsdecode(target))
                if path in _names:
                    with open(_log, "a") as f:
                        f.write(f"{os.getpid()} {event} {path}\\n")
                    raise PermissionError(f"store.db is the parent's: {path}")
    sys.addaudithook(_guard)
'''


def store_guard(home: Path, folder: Path) -> tuple[dict, Path, Path]:
    """Environment under which every child a job starts through core.config.launch (the
    dataloader check, training) is refused any open of ``home``'s store.db (an audit hook in a
    sitecustomize); returns (env additions, the log of refused opens, the log of guarded pids)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(STORE_GUARD)
    refused, seen = folder / "refused.log", folder / "guarded_pids.log"
    return ({"PYTHONPATH": os.pathsep.join([str(ROOT), str(folder)]),
             "M3B_TEST_STORE_GUARD": f"{home / 'store.db'}|{refused}|{seen}"}, refused, seen)


def run_until_approval(settings, store, job_id: str, timeout: float = 120):
    """Run the job in a thread, as the worker would, until its plan waits for approval;
    returns (the thread, the dict its result lands in)."""
    import threading
    import time

    from crew.runner import JobRunner
    outcome: dict = {}
    worker = threading.Thread(target=lambda: outcome.update(JobRunner(settings, job_id).run()),
                              daemon=True)
    worker.start()
    deadline = time.time() + timeout
    while store.job(job_id)["status"] != "awaiting_approval":
        assert time.time() < deadline, f"planning did not reach approval in {timeout:.0f} s"
        assert worker.is_alive(), (outcome, store.job(job_id))
        time.sleep(0.1)
    return worker, outcome


def registered_demo_dataset(settings, name: str) -> tuple[Path, str]:
    """Build and register the built-in demo dataset ``name``; returns its folder and the
    digest of every file in it (the job must leave it byte-identical)."""
    from crew.demo import DEMOS, _ensure
    demo = next(d for d in DEMOS if d[0] == name)
    registered = _ensure(settings, *demo)
    assert registered["status"] == "registered", registered
    folder = settings.demo_dir / demo[1]
    return folder, tree_digest(folder)


def crew_home(tmp_path_factory, mp: pytest.MonkeyPatch, name: str, home: Path | None = None,
              crewai: Path | None = None):
    """A fresh M3Builder home (``home``, else a new temp folder named ``name``) for a module- or
    session-scoped fixture (autopilot, CrewAI's storage in ``crewai`` or a temp folder):
    (home, settings, store). ``mp`` keeps the environment until it ends."""
    from core.config.settings import get_settings
    from core.store.db import open_store

    home = home or tmp_path_factory.mktemp(name)
    mp.setenv("M3B_HOME", str(home))
    mp.setenv("CREWAI_STORAGE_DIR", str(crewai or tmp_path_factory.mktemp("crewai")))
    mp.delenv("M3B_LLM", raising=False)
    settings = get_settings()
    return home, settings, open_store(settings.store_path)


def approve_with_epochs(settings, store, job_id: str, worker, epochs: int,
                        timeout: float = 900) -> None:
    """Approve a plan waiting for approval with its epochs edited (a binding user edit) and
    wait for the job to end."""
    from core.planning.plan_edits import edit_plan
    edit_plan(settings, store, job_id, {"epochs": epochs})  # and approve
    worker.join(timeout=timeout)
    assert not worker.is_alive(), f"job {job_id} did not end in {timeout:.0f} s"


NNUNET_DEMO = "Demo abdominal CT organs (synthetic)"
NNUNET_REQUEST = "segment the liver and spleen on abdominal CT with nnU-Net"
NNUNET_EPOCHS = 5


@pytest.fixture(scope="session")
def nnunet_crew_job(tmp_path_factory) -> dict:
    """The one nnU-Net model of the suite, built the way a user gets one: the request through
    the crew in autopilot, the plan approved with the epochs edited down to NNUNET_EPOCHS (a
    binding user edit). The crew test, the engine test and the Models page test read it.

    Built once per run: under pytest-xdist the first process to ask builds it in the run's
    shared temp folder (under a file lock) and the other reads what it wrote."""
    import json

    from filelock import FileLock

    from core.jobs.lifecycle import create_job

    shared = tmp_path_factory.getbasetemp()
    shared = shared.parent if os.environ.get("PYTEST_XDIST_WORKER") else shared
    record = shared / "nnunet-job.json"
    with FileLock(str(shared / "nnunet-job.lock")), pytest.MonkeyPatch.context() as mp:
        home, settings, store = crew_home(tmp_path_factory, mp, "nnunet-home",
                                          home=shared / "nnunet-home",
                                          crewai=shared / "nnunet-crewai")
        if not record.exists():
            folder, before = registered_demo_dataset(settings, NNUNET_DEMO)
            job_id = create_job(settings, store, NNUNET_REQUEST, "autopilot",
                                auto_approve=False)
            worker, outcome = run_until_approval(settings, store, job_id)
            approve_with_epochs(settings, store, job_id, worker, NNUNET_EPOCHS)
            record.write_text(json.dumps({"job_id": job_id, "result": outcome,
                                          "folder": str(folder), "before": before}))
        built = json.loads(record.read_text())
    return {"settings": settings, "store": store, "job_id": built["job_id"],
            "result": built["result"], "folder": Path(built["folder"]),
            "before": built["before"], "home": home,
            "workspace": settings.jobs_dir / built["job_id"]}
