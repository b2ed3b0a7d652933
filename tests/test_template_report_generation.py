"""Report-generation template: tokenizer, dataloader, image-conditioned decoder, the system's
evaluator, and end-to-end training on the 2D (IU-Xray-like) and 3D (RadGenome-Brain-like) demos
in subprocesses, scored against the most-common-training-report baseline."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from core.demo.reports import make_report_demo_2d, make_report_demo_3d
from core.evaluation import EvaluationError
from core.evaluation.report_generation import evaluate_report_generation
from conftest import channel_metrics, channel_paths
from core.training.instantiate import instantiate
from ml_templates.common.entry import load_dataloader
from ml_templates.report_generation.model import ReportGenerator, load_trained
from ml_templates.report_generation.tokenizer import (decode_report, encode_report,
                                                      get_tokenizer, load_tokenizer, report_text)

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "ml_templates" / "report_generation" / "dataloader_template.py"


# ---------------------------------------------------------------- helpers
def index_2d(data: Path, datapath: Path, n_test: int) -> None:
    """IU-Xray-like reports.csv -> train.json / test.json (the Data Engineer's job)."""
    rows = list(csv.DictReader(open(data / "reports.csv", encoding="utf-8")))
    items = [{"image_path": str(data / "images" / f"{r['image_id']}.png"),
              "findings": r["findings"], "impression": r["impression"]} for r in rows]
    datapath.mkdir(parents=True, exist_ok=True)
    (datapath / "test.json").write_text(json.dumps(items[:n_test]))
    (datapath / "train.json").write_text(json.dumps(items[n_test:]))


def index_3d(data: Path, datapath: Path) -> None:
    """RadGenome-Brain-like reports_{train,test}.json -> train.json / test.json."""
    datapath.mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        rows = json.loads((data / f"reports_{split}.json").read_text())
        items = [{"image_path": str(data / r["image"]), "findings": r["finding"],
                  "impression": r["impression"]} for r in rows]
        (datapath / f"{split}.json").write_text(json.dumps(items))


def write_dataloader(datapath: Path, **config) -> Path:
    values = {"DATAPATH": str(datapath), "SPATIAL_DIMS": 2, "IMAGE_SIZE": [64, 64],
              "IN_CHANNELS": 1, "MAX_TOKENS": 64, "TOKENIZER_PATH": "",
              "INTENSITY": {"kind": "minmax"}, **config}
    return instantiate(TEMPLATE, datapath / "dataloader.py", values)


def run(module: str, args: list[str], home: Path, timeout: float = 400):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "M3B_HOME": str(home)}
    started = time.time()
    proc = subprocess.run([sys.executable, "-m", "core.config.launch", module, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, time.time() - started


def train_and_evaluate(tmp_path: Path, datapath: Path, **overrides) -> tuple[dict, dict, dict]:
    home = tmp_path / "home"
    job_id = "job-report"
    _, check_s = run("ml_templates.report_generation.check_dataloader",
                     ["--datapath", str(datapath)], home)
    check = json.loads((datapath / "dataloader_check.json").read_text())
    assert check["failed"] == [] and check["loaded"] == check["expected"]
    assert len(check["shapes"]) == 1 and check["token_length"]["train"]["truncated"] == 0
    out = tmp_path / "Logout"
    cfg = {"job_id": job_id, **channel_paths(out), "datapath": str(datapath),
           "dataloader": str(datapath / "dataloader.py"), "output_dir": str(out),
           "network": "report_small", "epochs": 20, "batch_size": 16, "learning_rate": 1e-3,
           "seed": 0, "time_budget_s": 150, "early_stopping_patience": 0, "device": "cpu",
           "val_fraction": 0.1, "threads": 1, **overrides}
    (tmp_path / "train_config.json").write_text(json.dumps(cfg))
    _, train_s = run("ml_templates.report_generation.train",
                     ["--config", str(tmp_path / "train_config.json")], home)
    summary = json.loads((out / "train_summary.json").read_text())
    assert Path(summary["model_path"]).exists() and (out / "tokenizer").is_dir()
    assert load_tokenizer(out / "tokenizer").pad_token == "[PAD]"
    names = {m["name"] for m in channel_metrics(out)}
    assert {"loss", "learning_rate", "eval_loss"} <= names, names
    report = evaluate_report_generation(datapath, out / "predictions.json")
    print(json.dumps({"check_s": round(check_s, 1), "train_s": round(train_s, 1),
                      "summary": {k: summary[k] for k in ("epochs_run", "best_val_metric",
                                                          "val_rouge_l", "seconds",
                                                          "stop_reason")},
                      "metrics": report["metrics"], "ci95": report["ci95"],
                      "samples": report["samples"][:2]}, indent=1))
    return report, summary, cfg


# ---------------------------------------------------------------- fast unit tests
def test_tokenizer_trained_on_reports_round_trips_and_reloads(tmp_path):
    texts = [report_text("The heart is enlarged. No pleural effusion.", "Cardiomegaly."),
             report_text("The lungs are clear.", "Normal chest radiograph.")]
    tok = get_tokenizer(texts, save_dir=tmp_path / "tok")
    ids, labels, n = encode_report(tok, texts[0], 32)
    assert ids[0] == tok.bos_token_id and ids[n - 1] == tok.eos_token_id
    assert len(ids) == 32 and labels[n:] == [-100] * (32 - n)
    assert ids[n:] == [tok.pad_token_id] * (32 - n)
    assert decode_report(tok, ids[1:]) == ("FINDINGS: the heart is enlarged. no pleural effusion. "
                                           "IMPRESSION: cardiomegaly.")
    again = get_tokenizer([], tokenizer_path=str(tmp_path / "tok"))
    assert again.encode(texts[1]) == tok.encode(texts[1]) and len(again) == len(tok)
    short_ids, _, n_short = encode_report(tok, texts[0], 8)  # truncated, still framed
    assert n_short == 8 and short_ids[-1] == tok.eos_token_id


def test_dataset_items_and_decoder_uses_the_image(tmp_path):
    data = make_report_demo_2d(tmp_path / "cxr", n=12)
    datapath = tmp_path / "Datapath"
    index_2d(data, datapath, n_test=4)
    dl = load_dataloader(write_dataloader(datapath, IMAGE_SIZE=[48, 48], MAX_TOKENS=64))
    train = dl.ReportDataset("train", datapath=str(datapath))
    test = dl.ReportDataset("test", datapath=str(datapath))
    assert len(train) == 8 and len(test) == 4 and train.tokenizer.unk_token_id is not None
    item = test[0]
    assert item["pixel_values"].shape == (1, 48, 48) and item["pixel_values"].dtype == torch.float32
    assert item["input_ids"].shape == (64,) and item["labels"].shape == (64,)
    assert (item["labels"] == -100).any() and item["image_path"].endswith(".png")
    real = item["labels"] != -100
    assert torch.equal(item["labels"][real], item["input_ids"][real])

    tok = train.tokenizer
    torch.manual_seed(0)
    model = ReportGenerator("report_small", 2, 1, len(tok), 64, tok.pad_token_id,
                            tok.bos_token_id, tok.eos_token_id).eval()
    pixels = torch.stack([test[0]["pixel_values"], test[1]["pixel_values"]])
    prefix = test[0]["input_ids"][:6].repeat(2, 1)
    with torch.no_grad():
        out = model(pixels, prefix, labels=prefix)
    logits = out["logits"][:, -1]
    assert torch.isfinite(out["loss"]) and logits.shape == (2, len(tok))
    assert (logits[0] - logits[1]).abs().max() > 1e-3  # same text, different image
    generated = model.generate(pixels, max_new_tokens=10)
    assert generated.shape[0] == 2 and generated.shape[1] <= 10


def test_dataloader_reads_slice_folders_and_channel_lists(tmp_path):
    import nibabel as nib
    import numpy as np
    from PIL import Image
    folder = tmp_path / "scan1"
    folder.mkdir()
    for k in range(10):  # natural order: slice_2 before slice_10
        Image.fromarray(np.full((20, 24), k * 20, np.uint8)).save(folder / f"slice_{k}.png")
    for name in ("t1", "t2"):
        nib.save(nib.Nifti1Image(np.random.rand(12, 14, 10).astype(np.float32), np.eye(4)),
                 str(tmp_path / f"{name}.nii.gz"))
    items = [{"image_path": str(folder), "findings": "Normal.", "impression": "Normal."},
             {"image_path": [str(tmp_path / "t1.nii.gz"), str(tmp_path / "t2.nii.gz")],
              "findings": "A lesion.", "impression": "Lesion."}]
    datapath = tmp_path / "Datapath"
    datapath.mkdir()
    for split in ("train", "test"):
        (datapath / f"{split}.json").write_text(json.dumps(items))
    dl = load_dataloader(write_dataloader(datapath, SPATIAL_DIMS=3, IMAGE_SIZE=[8, 8, 8],
                                          IN_CHANNELS=2, MAX_TOKENS=16))
    ds = dl.ReportDataset("test", datapath=str(datapath))
    first, second = ds[0], ds[1]
    assert first["pixel_values"].shape == second["pixel_values"].shape == (2, 8, 8, 8)
    assert first["pixel_values"][0, 0].mean() < first["pixel_values"][0, -1].mean()
    assert not torch.equal(second["pixel_values"][0], second["pixel_values"][1])
    assert second["image_path"] == json.dumps(items[1]["image_path"])


@pytest.mark.parametrize("network,dims", [("report_small", 3), ("report_base", 2)])
def test_networks_build_and_load_local_encoder_weights(tmp_path, network, dims):
    size = (32,) * dims
    model = ReportGenerator(network, dims, 1, 30, 16, 0, 1, 2).eval()
    out = model(torch.rand(2, 1, *size), torch.randint(3, 30, (2, 7)))
    assert out["logits"].shape == (2, 7, 30) and "loss" not in out
    state = {f"module.{k}": v for k, v in model.encoder.trunk.state_dict().items()}
    torch.save({"state_dict": state}, tmp_path / "encoder.pt")
    other = ReportGenerator(network, dims, 1, 30, 16, 0, 1, 2,
                            pretrained_path=str(tmp_path / "encoder.pt"))
    assert torch.equal(other.encoder.trunk.conv1.weight, model.encoder.trunk.conv1.weight)
    torch.save({"unrelated.weight": torch.zeros(3)}, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="no weights"):
        ReportGenerator(network, dims, 1, 30, 16, 0, 1, 2, pretrained_path=str(tmp_path / "bad.pt"))


def _eval_fixture(tmp_path, predictions):
    train = [{"image_path": f"tr{i}.png", "findings": "The lungs are clear.",
              "impression": "Normal chest."} for i in range(3)]
    train.append({"image_path": "tr9.png", "findings": "The heart is enlarged.",
                  "impression": "Cardiomegaly."})
    test = [{"image_path": "a.png", "findings": "The heart is enlarged. No effusion.",
             "impression": "Cardiomegaly."},
            {"image_path": "b.png", "findings": "The lungs are clear.",
             "impression": "Normal chest."},
            {"image_path": ["c_t1.nii.gz", "c_t2.nii.gz"], "findings": "A large left lesion.",
             "impression": "Left lesion."}]
    (tmp_path / "train.json").write_text(json.dumps(train))
    (tmp_path / "test.json").write_text(json.dumps(test))
    rows = [{"image_path": t["image_path"], "generated": predictions(t)} for t in test]
    (tmp_path / "pred.json").write_text(json.dumps(rows))
    return tmp_path / "pred.json"


def test_evaluator_perfect_baseline_and_missing(tmp_path):
    pred = _eval_fixture(tmp_path, lambda t: f"FINDINGS: {t['findings']} "
                                             f"IMPRESSION: {t['impression']}")
    report = evaluate_report_generation(tmp_path, pred, n_boot=50)
    m = report["metrics"]
    assert m["rouge_l"] == pytest.approx(1.0) and m["bleu4"] == pytest.approx(1.0)
    assert m["bleu1"] == pytest.approx(1.0) and report["num_test"] == 3
    assert report["baseline"]["report"] == "The lungs are clear. Normal chest."
    assert 0 < m["baseline_rouge_l"] < 1 and report["ci95"]["rouge_l"] == [1.0, 1.0]
    assert report["task"] == "report_generation"
    assert report["evaluator"] == "core.evaluation.report_generation"
    assert report["samples"][0]["reference"] == "The heart is enlarged. No effusion. Cardiomegaly."

    wrong = _eval_fixture(tmp_path, lambda t: "completely unrelated words here")
    assert evaluate_report_generation(tmp_path, wrong, n_boot=20)["metrics"]["rouge_l"] == 0.0

    rows = json.loads(pred.read_text())[:2]
    pred.write_text(json.dumps(rows))
    with pytest.raises(EvaluationError, match="1 of 3 test images have no prediction"):
        evaluate_report_generation(tmp_path, pred)
    pred.write_text(json.dumps([{"image_path": "a.png"}]))
    with pytest.raises(EvaluationError, match="malformed prediction"):
        evaluate_report_generation(tmp_path, pred)


# ---------------------------------------------------------------- training, end to end
@pytest.mark.slow
def test_train_2d_report_generator_beats_baseline(tmp_path):
    data = make_report_demo_2d(tmp_path / "iu_xray_demo", n=200)
    datapath = tmp_path / "Datapath"
    index_2d(data, datapath, n_test=50)
    write_dataloader(datapath, SPATIAL_DIMS=2, IMAGE_SIZE=[64, 64], MAX_TOKENS=64)
    report, summary, cfg = train_and_evaluate(tmp_path, datapath, epochs=20)
    m = report["metrics"]
    assert m["rouge_l"] > m["baseline_rouge_l"] + 0.05, m
    assert report["ci95"]["rouge_l_gain"][0] > 0 and m["bleu4"] > 0.2
    assert summary["stop_reason"] == "completed" and summary["epochs_run"] == 20

    # the saved model and tokenizer reproduce a test prediction in this process
    model = load_trained(tmp_path / "Logout" / "model")
    tok = load_tokenizer(tmp_path / "Logout" / "model")
    dl = load_dataloader(datapath / "dataloader.py")
    first = dl.ReportDataset("test", datapath=str(datapath), tokenizer=tok)[0]
    text = decode_report(tok, model.generate(first["pixel_values"][None])[0])
    predicted = json.loads((tmp_path / "Logout" / "predictions.json").read_text())[0]
    assert predicted["image_path"] == first["image_path"] and predicted["generated"] == text

    # resume: one more epoch from the newest checkpoint, same vocabulary
    (tmp_path / "train_config.json").write_text(json.dumps({**cfg, "resume": True, "epochs": 21}))
    run("ml_templates.report_generation.train", ["--config", str(tmp_path / "train_config.json")],
        tmp_path / "home")
    resumed = json.loads((tmp_path / "Logout" / "train_summary.json").read_text())
    assert resumed["resumed"] and resumed["epochs_run"] == 21
    assert resumed["global_step"] > summary["global_step"]
    again = evaluate_report_generation(datapath, tmp_path / "Logout" / "predictions.json")
    assert again["metrics"]["rouge_l"] > again["metrics"]["baseline_rouge_l"]


@pytest.mark.slow
def test_train_3d_report_generator_beats_baseline(tmp_path):
    data = make_report_demo_3d(tmp_path / "radgenome_brain_demo", n=200)
    datapath = tmp_path / "Datapath"
    index_3d(data, datapath)
    write_dataloader(datapath, SPATIAL_DIMS=3, IMAGE_SIZE=[32, 32, 32], MAX_TOKENS=48,
                     INTENSITY={"kind": "minmax"})
    report, _, _ = train_and_evaluate(tmp_path, datapath, epochs=15)
    m = report["metrics"]
    assert m["rouge_l"] > m["baseline_rouge_l"] + 0.05, m
    assert report["ci95"]["rouge_l_gain"][0] > 0
