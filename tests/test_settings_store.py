from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading

from core.config.settings import get_settings
from tests.conftest import ROOT


def test_home_from_argument_beats_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("M3B_HOME", str(tmp_path / "env-home"))
    assert get_settings().home == (tmp_path / "env-home").resolve()
    explicit = get_settings(tmp_path / "arg-home")
    assert explicit.home == (tmp_path / "arg-home").resolve()
    for folder in (explicit.datacards_dir, explicit.jobs_dir, explicit.datasets_dir):
        assert folder.is_dir() and explicit.home in folder.parents


def test_store_is_wal_with_all_tables(settings, store):
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert {"datacards", "jobs", "job_events", "metrics", "models", "audit"} <= set(
        store.db.table_names())


def test_concurrent_writers_lose_nothing(settings, store):
    """Threads in this process and a second process write events at once: every row lands."""
    store.insert_job({"id": "j", "status": "running", "created_at": 0.0})
    code = ("import sys; sys.path.insert(0, sys.argv[2]); from core.config.bootstrap import apply; apply(); "
            "from core.store.db import Store; s = Store(sys.argv[1]); "
            "[s.add_event('j', 'P', 'tool', tool=str(i)) for i in range(300)]")
    proc = subprocess.Popen([sys.executable, "-c", code, str(settings.store_path), str(ROOT)])
    threads = [threading.Thread(target=lambda: [store.add_metrics("j", i, 0.0, {"loss": i})
                                                for i in range(300)]) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert proc.wait(timeout=120) == 0
    assert len(store.events("j")) == 300
    assert len(store.metrics("j")) == 600
    conn = sqlite3.connect(settings.store_path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_update_job_serialises_dicts(store):
    store.insert_job({"id": "a", "status": "queued", "created_at": 1.0})
    store.update_job("a", status="running", result={"x": [1, 2]})
    job = store.job("a")
    assert job["status"] == "running" and job["result"] == '{"x": [1, 2]}'
    assert store.job("missing") is None


def test_torchvision_guard_keeps_trainer_importable():
    """In a fresh process, the process set-up makes `from transformers import Trainer` work whether
    or not the installed torchvision can load."""
    code = ("from core.config import bootstrap; bootstrap.apply(); from transformers import Trainer; "
            "import importlib.util, sys; "
            "ok = bootstrap.torchvision_status in ('ok', 'not installed') or "
            "(bootstrap.torchvision_status.startswith('disabled') and "
            "importlib.util.find_spec('torchvision') is None); print(bootstrap.torchvision_status);"
            "sys.exit(0 if ok else 3)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_monai_loads_without_transformers_which_stays_importable():
    """The process set-up keeps MONAI's package import from loading Transformers (its Transchex
    network pulls BERT in, seconds per child); Transformers still imports afterwards, and the
    networks the templates use load. Without the set-up MONAI does load it (the control)."""
    code = ("import sys; {setup}import monai.transforms, monai.data; "
            "from monai.networks.nets import UNet, DenseNet121; "
            "print(int('transformers' in sys.modules)); "
            "from transformers import GPT2Config; {trainer}print('ok')")
    setup = "from core.config import bootstrap; bootstrap.apply(); "
    trainer = "from transformers import Trainer; "   # needs the torchvision guard too
    with_setup, without = (
        subprocess.run([sys.executable, "-c", code.format(setup=s, trainer=t)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
        for s, t in ((setup, trainer), ("", "")))
    assert with_setup.stdout.split() == ["0", "ok"], with_setup.stderr[-2000:]
    assert without.stdout.split() == ["1", "ok"], without.stderr[-2000:]


def test_telemetry_is_off_after_import():
    import os
    assert os.environ["CREWAI_DISABLE_TELEMETRY"] == "true"
    assert os.environ["OTEL_SDK_DISABLED"] == "true"
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
