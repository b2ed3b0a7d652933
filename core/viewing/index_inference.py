"""A trained model run over every case of an index, as its own process: the child of an external
validation (core.external_validation), started by the parent through the process set-up,

    python -m core.config.launch core.viewing.index_inference --job JOB_DIR --datapath DIR \
        --out PREDICTIONS_JSON

The model is the job's (``core.viewing.model_loading.load_model``: its weights and its
``train_config.json``); the images are read and transformed by ``DIR/dataloader.py`` — the job's
own dataloader with its own configuration, pointed at ``DIR`` — from ``DIR/test.json``. The
predictions are written in the form the template writes for its test set, so the system's
evaluator scores them as it scores a job's:

* diagnosis: ``{image_path: [p_class0, p_class1, ...]}`` (the model's classes, its order);
* segmentation (MONAI): a label map per case on the case's own grid in ``<out>/../predictions/``
  and the list ``[{image_path, label_path, prediction_path}]``.

The child writes only beside ``--out``; it never opens the store. Its last line on stdout is
``{"event": "done", ...}``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from core.viewing.model_loading import InferenceError, LoadedModel, load_model

SUPPORTED = ("diagnosis", "segmentation")
BATCH = 32


def _dataloader(loaded: LoadedModel, datapath: Path):
    from ml_templates.common.entry import load_dataloader
    dl = load_dataloader(datapath / "dataloader.py")
    if loaded.template == "segmentation" and loaded.config.get("roi_size"):
        dl.ROI_SIZE = [int(s) for s in loaded.config["roi_size"]]  # as train.py and load_model
    return dl


def predict_diagnosis(loaded: LoadedModel, dl, datapath: Path, device) -> dict:
    import torch
    dataset = dl.DiagnosisDataset("test", augment=False, datapath=str(datapath))
    model = loaded.model.to(device)
    predictions = {}
    with torch.no_grad():
        for start in range(0, len(dataset), BATCH):
            batch = [dataset[j] for j in range(start, min(start + BATCH, len(dataset)))]
            pixels = torch.stack([b["pixel_values"] for b in batch]).to(device)
            for item, probs in zip(batch, model(pixels).cpu().numpy()):
                predictions[item["image_path"]] = [float(p) for p in probs]
            print(json.dumps({"event": "progress", "done": start + len(batch),
                              "total": len(dataset)}), flush=True)
    return predictions


def predict_segmentation(loaded: LoadedModel, dl, datapath: Path, device, folder: Path) -> list:
    from ml_templates.segmentation.inference import predict_dataset
    dataset = dl.SegmentationDataset("test", augment=False, datapath=str(datapath))
    return predict_dataset(loaded.model.to(device), dataset, list(dl.ROI_SIZE), device, folder)


def run(job: Path, datapath: Path, out: Path) -> dict:
    import torch
    started = time.time()
    loaded = load_model(job)
    if loaded.engine != "monai" or loaded.template not in SUPPORTED:
        what = "an nnU-Net model" if loaded.engine == "nnunet" else f"a {loaded.template} model"
        raise InferenceError(f"scoring {what} on another dataset is not supported yet "
                             f"(supported: MONAI {' and '.join(SUPPORTED)} models)")
    dl = _dataloader(loaded, datapath)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if loaded.template == "diagnosis":
        predictions = predict_diagnosis(loaded, dl, datapath, device)
    else:
        predictions = predict_segmentation(loaded, dl, datapath, device,
                                           out.parent / "predictions")
    out.write_text(json.dumps(predictions, indent=None if loaded.template == "diagnosis" else 1))
    return {"cases": len(predictions), "device": str(device), "template": loaded.template,
            "seconds": round(time.time() - started, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", required=True, help="the model's job folder")
    parser.add_argument("--datapath", required=True,
                        help="folder with test.json, label_dict.json and dataloader.py")
    parser.add_argument("--out", required=True, help="predictions JSON to write")
    args = parser.parse_args(argv)
    try:
        summary = run(Path(args.job), Path(args.datapath), Path(args.out))
    except InferenceError as exc:
        print(json.dumps({"event": "error", "error": str(exc)}), flush=True)
        return 2
    print(json.dumps({"event": "done", **summary}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
