"""The diagnosis template on its own (no crew): resume after SIGKILL, seeded reproducibility,
verified exports, 3D scan folders and multi-label tables end to end through the crew."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.datasets.indexing import write_diagnosis_index
from core.evaluation.diagnosis import evaluate_diagnosis
from core.datasets.layouts.dispatch import scan_folder
from conftest import channel_metrics, channel_paths
from core.training.instantiate import instantiate
from tests.conftest import ROOT

TEMPLATE = ROOT / "ml_templates" / "diagnosis" / "dataloader_template.py"


def prepare(tmp_path: Path, data: Path, job_id: str, **overrides) -> Path:
    ws = tmp_path / job_id
    datapath = ws / "Datapath"
    write_diagnosis_index(scan_folder(data), datapath)
    instantiate(TEMPLATE, datapath / "dataloader.py",
                {"DATAPATH": str(datapath), "IMAGE_SIZE": [64, 64], "IN_CHANNELS": 1,
                 "MULTI_LABEL": False, "INTENSITY": {"kind": "minmax"}})
    config = {"job_id": job_id, **channel_paths(ws / "Logout"), "datapath": str(datapath),
              "output_dir": str(ws / "Logout"), "network": "densenet_small", "epochs": 3,
              "batch_size": 32, "learning_rate": 2e-3, "image_size": [64, 64],
              "in_channels": 1, "early_stopping_patience": 0, "seed": 7, **overrides}
    (ws / "train_config.json").write_text(json.dumps(config))
    return ws


def train(ws: Path, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "core.config.launch", "ml_templates.diagnosis.train", "--config",
                             str(ws / "train_config.json")], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kwargs)


@pytest.mark.slow
def test_sigkill_mid_run_resumes_from_checkpoint(tmp_path, settings, demo_folder):
    ws = prepare(tmp_path, demo_folder, "resume", epochs=6)
    proc = train(ws)
    deadline = time.time() + 400
    while not list((ws / "Logout" / "checkpoints").glob("checkpoint-*/trainer_state.json")):
        assert proc.poll() is None and time.time() < deadline, proc.stderr.read()[-2000:]
        time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = max(int(p.name.split("-")[1])
                    for p in (ws / "Logout" / "checkpoints").glob("checkpoint-*"))
    assert not (ws / "Logout" / "train_summary.json").exists()
    config = json.loads((ws / "train_config.json").read_text())
    (ws / "train_config.json").write_text(json.dumps({**config, "resume": True}))
    resumed = train(ws)
    assert resumed.wait(timeout=600) == 0, resumed.stderr.read()[-3000:]
    summary = json.loads((ws / "Logout" / "train_summary.json").read_text())
    assert summary["epochs_run"] == 6 and summary["stop_reason"] == "completed"
    steps = [m["step"] for m in channel_metrics(ws / "Logout")
             if m["name"] == "loss"]
    assert summary["global_step"] > killed_at and max(steps) > summary["global_step"] - 5


@pytest.mark.slow
def test_same_seed_same_predictions_and_verified_exports(tmp_path, settings, demo_folder):
    outputs = []
    for run in ("seed-a", "seed-b"):
        ws = prepare(tmp_path, demo_folder, run, epochs=2)
        proc = train(ws)
        assert proc.wait(timeout=600) == 0, proc.stderr.read()[-3000:]
        outputs.append((ws / "Logout" / "predictions.json").read_text())
    assert outputs[0] == outputs[1]
    summary = json.loads((ws / "Logout" / "train_summary.json").read_text())
    # selection by validation loss, said plainly; validation predictions never name test images
    assert summary["val_metric"] == "loss" and summary["epoch_kept"] in (1.0, 2.0)
    assert summary["selection"].startswith(f"kept epoch {summary['epoch_kept']:g}")
    val = json.loads((ws / "Logout" / "val_predictions.json").read_text())
    assert len(val) == summary["num_val"] and not set(val) & set(json.loads(outputs[1]))
    report = evaluate_diagnosis(ws / "Datapath", ws / "Logout" / "predictions.json")
    assert report["calibration"]["temperature"] == pytest.approx(summary["temperature"], rel=1e-4)
    assert report["operating_point"]["positive_class"] == "PNEUMONIA"
    for fmt in ("torchscript", "onnx"):
        assert summary["exports"][fmt]["verified"], summary["exports"][fmt]
        assert Path(summary["exports"][fmt]["path"]).exists()


@pytest.mark.slow
def test_two_process_ddp_with_gloo(tmp_path, settings, demo_folder):
    """The multi-GPU code path (torchrun + DDP), run on CPU with two gloo processes."""
    ws = prepare(tmp_path, demo_folder, "ddp", epochs=2)
    single = json.loads((ws / "train_config.json").read_text())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                           "--master_port", "29581", "-m", "core.config.launch", "ml_templates.diagnosis.train",
                           "--config", str(ws / "train_config.json")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((ws / "Logout" / "train_summary.json").read_text())
    per_epoch = -(-summary["num_train"] // (single["batch_size"] * 2))  # batches split over 2
    assert summary["global_step"] == 2 * per_epoch
    predictions = json.loads((ws / "Logout" / "predictions.json").read_text())
    assert len(predictions) == summary["num_test"]
    losses = [m for m in channel_metrics(ws / "Logout") if m["name"] == "loss"]
    assert len({m["step"] for m in losses}) == len(losses)  # rank 0 alone writes metrics
