"""nnU-Net v2 engine for segmentation jobs (driven by ml_templates.segmentation.nnunet_train).

Steps, all inside the job's output folder (never the user's home):

1. ``convert_dataset``: the job's index (Datapath/train.json, test.json) becomes an nnU-Net raw
   dataset ``<out>/nnunet/raw/Dataset501_M3B`` (imagesTr/labelsTr/imagesTs, dataset.json). Images
   are copied with SimpleITK so their real spacing, origin and direction are kept; channels become
   ``_0000``, ``_0001``...; each label must lie on its image's grid.
2. ``plan_and_preprocess``: fingerprint, plans and preprocessing through nnU-Net's Python API
   (3d_fullres for 3D data, 2d for 2D data).
3. ``train``: a budgeted subclass of nnUNetTrainer (epochs and iterations per epoch from the
   config; train_loss / val_loss / mean_fg_dice / lr reported through the run channel each epoch;
   stops on a stop request or the time budget), fold "all".
4. ``predict``: builds the network from the plans, loads ``checkpoint_final.pth`` and runs
   nnUNetPredictor on the test images; masks are written with the label's geometry.

nnU-Net spawns worker processes: callers need an ``if __name__ == "__main__":`` guard.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import SimpleITK as sitk

from core.imaging.arrays import map_label_values

DATASET_ID = 501
DATASET_NAME = f"Dataset{DATASET_ID:03d}_M3B"
TRAINER_NAME = "nnUNetTrainerM3B"
GEOMETRY_TOL = 1e-3


class NnunetEngineError(RuntimeError):
    pass


# ---------------------------------------------------------------- environment

def setup_env(out_dir: str | Path, n_proc: int = 2, n_proc_da: int = 2) -> dict:
    """Point nnU-Net's folders at the job's output folder; call before importing nnunetv2."""
    base = Path(out_dir).resolve() / "nnunet"
    paths = {"nnUNet_raw": base / "raw", "nnUNet_preprocessed": base / "preprocessed",
             "nnUNet_results": base / "results"}
    for key, path in paths.items():
        path.mkdir(parents=True, exist_ok=True)
        os.environ[key] = str(path)
    os.environ["nnUNet_def_n_proc"] = str(n_proc)
    os.environ["nnUNet_n_proc_DA"] = str(n_proc_da)
    os.environ.setdefault("nnUNet_compile", "false")
    return {k: str(v) for k, v in paths.items()}


# ---------------------------------------------------------------- conversion

def read_image(path: str | Path) -> sitk.Image:
    """A file SimpleITK reads, or a folder holding one DICOM series."""
    path = Path(path)
    if path.is_dir():
        reader = sitk.ImageSeriesReader()
        ids = reader.GetGDCMSeriesIDs(str(path))
        if not ids:
            raise NnunetEngineError(f"{path} is a folder without a DICOM series (nnU-Net engine "
                                    "reads image files or DICOM series)")
        reader.SetFileNames(reader.GetGDCMSeriesFileNames(str(path), ids[0]))
        return reader.Execute()
    return sitk.ReadImage(str(path))


def same_geometry(a: sitk.Image, b: sitk.Image, tol: float = GEOMETRY_TOL) -> str:
    """'' when a and b share size, spacing, origin and direction, else what differs."""
    if a.GetSize() != b.GetSize():
        return f"size {a.GetSize()} vs {b.GetSize()}"
    for name in ("GetSpacing", "GetOrigin", "GetDirection"):
        va, vb = np.asarray(getattr(a, name)()), np.asarray(getattr(b, name)())
        if not np.allclose(va, vb, atol=tol, rtol=tol):
            return f"{name[3:].lower()} {tuple(va)} vs {tuple(vb)}"
    return ""


def _channels(item: dict) -> list[str]:
    path = item["image_path"]
    return [str(p) for p in path] if isinstance(path, (list, tuple)) else [str(path)]


def _write_case(item: dict, case_id: str, images_dir: Path, labels_dir: Path | None) -> dict:
    channels = [read_image(p) for p in _channels(item)]
    ref = channels[0]
    for k, img in enumerate(channels[1:], 1):
        diff = same_geometry(ref, img)
        if diff:
            raise NnunetEngineError(f"{case_id}: channel {k} is not on channel 0's grid ({diff})")
    for k, img in enumerate(channels):
        if img.GetNumberOfComponentsPerPixel() > 1:  # RGB etc.: nnU-Net wants scalar channels
            raise NnunetEngineError(f"{case_id}: channel {k} has several components per pixel")
        sitk.WriteImage(img, str(images_dir / f"{case_id}_{k:04d}.nii.gz"), useCompression=True)
    if labels_dir is not None:
        label = read_image(item["label_path"])
        diff = same_geometry(ref, label)
        if diff:
            raise NnunetEngineError(f"{case_id}: label {item['label_path']} is not on the image's "
                                    f"grid ({diff})")
        label.CopyInformation(ref)  # identical within tolerance: make it exact for nnU-Net
        if item.get("label_values"):  # 0/255 masks: nnU-Net wants labels 0..N
            mapped = sitk.GetImageFromArray(map_label_values(
                sitk.GetArrayFromImage(label), item["label_values"]).astype(np.uint8))
            mapped.CopyInformation(label)
            label = mapped
        arr = sitk.GetArrayFromImage(label)
        if arr.min() < 0 or not np.array_equal(arr, np.round(arr)):
            raise NnunetEngineError(f"{case_id}: label must hold non-negative integers")
        label = sitk.Cast(label, sitk.sitkUInt8 if arr.max() < 256 else sitk.sitkUInt16)
        sitk.WriteImage(label, str(labels_dir / f"{case_id}.nii.gz"), useCompression=True)
    return {"case_id": case_id, "dimension": ref.GetDimension(), "n_channels": len(channels)}


def convert_dataset(datapath: str | Path, raw_root: str | Path) -> dict:
    """Write the raw dataset; returns {"dataset_dir", "dimension", "labels", "train", "test"}
    where test rows carry the case id and the original index row."""
    datapath, raw_root = Path(datapath), Path(raw_root)
    train = json.loads((datapath / "train.json").read_text())
    test_path = datapath / "test.json"
    test = json.loads(test_path.read_text()) if test_path.exists() else []
    if not train:
        raise NnunetEngineError("train.json lists no case")
    ds = raw_root / DATASET_NAME
    dirs = {n: ds / n for n in ("imagesTr", "labelsTr", "imagesTs")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    names = max((list(it.get("labels", [])) for it in train + test), key=len)
    n_channels = len(_channels(train[0]))
    dims = set()
    for i, item in enumerate(train):
        if len(_channels(item)) != n_channels:
            raise NnunetEngineError(f"train case {i} has {len(_channels(item))} channels, "
                                    f"the first {n_channels}")
        dims.add(_write_case(item, f"m3b_{i:04d}", dirs["imagesTr"], dirs["labelsTr"])["dimension"])
    test_rows = []
    for i, item in enumerate(test):
        case_id = f"m3b_test_{i:04d}"
        _write_case(item, case_id, dirs["imagesTs"], None)
        test_rows.append({"case_id": case_id, "item": item})
    if len(dims) != 1:
        raise NnunetEngineError(f"train images mix dimensions {sorted(dims)}")
    dimension = dims.pop()
    if not names:  # unnamed labels: name them by value
        max_label = 0
        for f in dirs["labelsTr"].glob("*.nii.gz"):
            max_label = max(max_label,
                            int(sitk.GetArrayFromImage(sitk.ReadImage(str(f))).max()))
        names = [f"label_{v}" for v in range(1, max_label + 1)]
    channel_names = {str(k): ("CT" if n_channels == 1 and _looks_ct(train[0]) else f"channel_{k}")
                     for k in range(n_channels)}
    dataset_json = {"channel_names": channel_names,
                    "labels": {"background": 0, **{n: i + 1 for i, n in enumerate(names)}},
                    "numTraining": len(train), "file_ending": ".nii.gz",
                    "name": "M3B", "description": f"converted from {datapath}"}
    (ds / "dataset.json").write_text(json.dumps(dataset_json, indent=2))
    return {"dataset_dir": str(ds), "dimension": dimension, "labels": names,
            "num_train": len(train), "test": test_rows, "n_channels": n_channels}


def _looks_ct(item: dict) -> bool:
    """CT gets nnU-Net's global HU normalisation: integer data with air near -1000."""
    try:
        arr = sitk.GetArrayFromImage(read_image(_channels(item)[0]))
        return np.issubdtype(arr.dtype, np.integer) and arr.min() <= -500
    except Exception:
        return False


# ---------------------------------------------------------------- planning

def plan_and_preprocess(configuration: str, n_proc: int = 2) -> dict:
    from nnunetv2.experiment_planning.plan_and_preprocess_api import (
        extract_fingerprint_dataset, plan_experiment_dataset, preprocess_dataset)
    from nnunetv2.experiment_planning.experiment_planners.default_experiment_planner import (
        ExperimentPlanner)
    extract_fingerprint_dataset(DATASET_ID, num_processes=n_proc, check_dataset_integrity=True,
                                clean=True, verbose=False, show_progress_bar=False)
    _, plans_identifier = plan_experiment_dataset(DATASET_ID, ExperimentPlanner)
    preprocess_dataset(DATASET_ID, plans_identifier, configurations=(configuration,),
                       num_processes=(n_proc,), verbose=False, show_progress_bar=False)
    pre = Path(os.environ["nnUNet_preprocessed"]) / DATASET_NAME
    plans = json.loads((pre / f"{plans_identifier}.json").read_text())
    if configuration not in plans["configurations"]:
        raise NnunetEngineError(f"nnU-Net planned no {configuration} configuration")
    return {"plans_file": str(pre / f"{plans_identifier}.json"),
            "dataset_json_file": str(pre / "dataset.json"), "plans": plans}


# ---------------------------------------------------------------- training

def _trainer_class():
    import torch
    from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer

    class nnUNetTrainerM3B(nnUNetTrainer):
        """nnUNetTrainer with a small, configurable budget, the run channel and a stop request.
        The signature must stay nnUNetTrainer's (it records its own init kwargs)."""

        def __init__(self, plans: dict, configuration: str, fold: int, dataset_json: dict,
                     device: torch.device = torch.device("cuda")):
            super().__init__(plans, configuration, fold, dataset_json, device)
            self.m3b_channel = None
            self.m3b_budget_s = None
            self.m3b_started = time.time()
            self.m3b_stop_reason = ""
            self.m3b_last_check = 0.0
            self.m3b_steps = 0  # training iterations run, for the metrics' step column
            self.m3b_best = None
            self.m3b_epochs_run = 0

        def configure_budget(self, epochs: int, iterations: int, val_iterations: int,
                             channel=None, time_budget_s=None, save_every=None,
                             started: float | None = None):
            self.num_epochs = max(1, int(epochs))
            self.num_iterations_per_epoch = max(1, int(iterations))
            self.num_val_iterations_per_epoch = max(1, int(val_iterations))
            self.save_every = int(save_every or max(1, self.num_epochs))
            self.m3b_channel = channel
            self.m3b_budget_s = float(time_budget_s) if time_budget_s else None
            self.m3b_started = float(started or time.time())  # the budget counts from here
            self.m3b_last_check = 0.0

        def m3b_should_stop(self) -> bool:
            """Checked every iteration: time budget always, a stop request every second."""
            now = time.time()
            if self.m3b_budget_s and now - self.m3b_started > self.m3b_budget_s:
                self.m3b_stop_reason = self.m3b_stop_reason or \
                    f"time budget of {self.m3b_budget_s:.0f} s reached"
            if self.m3b_channel is not None and now - self.m3b_last_check >= 1.0:
                self.m3b_last_check = now
                if self.m3b_channel.stop_requested():
                    self.m3b_stop_reason = "stopped by the user"
            return bool(self.m3b_stop_reason)

        def on_epoch_end(self):
            epoch = self.current_epoch
            super().on_epoch_end()  # increments current_epoch, saves best/latest
            self.m3b_epochs_run = epoch + 1
            get = self.logger.get_value
            values = {"train_loss": get("train_losses", step=-1),
                      "val_loss": get("val_losses", step=-1),
                      "mean_fg_dice": get("mean_fg_dice", step=-1),
                      "ema_fg_dice": get("ema_fg_dice", step=-1),
                      "lr": get("lrs", step=-1),
                      "epoch_seconds": get("epoch_end_timestamps", step=-1)
                      - get("epoch_start_timestamps", step=-1)}
            values = {k: float(v) for k, v in values.items()
                      if v is not None and np.isfinite(float(v))}
            dice = values.get("mean_fg_dice")
            if dice is not None and (self.m3b_best is None or dice > self.m3b_best):
                self.m3b_best = dice
            if self.m3b_channel is not None:
                self.m3b_channel.metrics(self.m3b_steps, float(epoch + 1), values)
            self.m3b_last_check = 0.0  # force a stop-request check at each epoch's end
            self.m3b_should_stop()

        def run_training(self):  # nnUNetTrainer.run_training with a way out between epochs
            self.on_train_start()
            for _ in range(self.current_epoch, self.num_epochs):
                self.on_epoch_start()
                self.on_train_epoch_start()
                train_outputs = []
                for _ in range(self.num_iterations_per_epoch):
                    train_outputs.append(self.train_step(next(self.dataloader_train)))
                    self.m3b_steps += 1
                    if self.m3b_should_stop():  # finish this epoch short: validate, log, save
                        break
                self.on_train_epoch_end(train_outputs)
                with torch.no_grad():
                    self.on_validation_epoch_start()
                    val_outputs = [self.validation_step(next(self.dataloader_val))
                                   for _ in range(self.num_val_iterations_per_epoch)]
                    self.on_validation_epoch_end(val_outputs)
                self.on_epoch_end()
                if self.m3b_stop_reason:
                    break
            self.on_train_end()

    return nnUNetTrainerM3B


def pick_device(name: str = "auto"):
    import torch
    if name in ("auto", "cuda", None) and torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


def train(plans_info: dict, configuration: str, device, epochs: int, iterations: int,
          val_iterations: int, channel=None, time_budget_s=None,
          started: float | None = None) -> dict:
    """``time_budget_s`` counts from ``started`` (the job's start; default now)."""
    plans = json.loads(Path(plans_info["plans_file"]).read_text())
    plans["continue_training"] = False
    dataset_json = json.loads(Path(plans_info["dataset_json_file"]).read_text())
    cls = _trainer_class()
    trainer = cls(plans=plans, configuration=configuration, fold="all",
                  dataset_json=dataset_json, device=device)
    trainer.configure_budget(epochs, iterations, val_iterations, channel=channel,
                             time_budget_s=time_budget_s, started=started)
    trainer.run_training()
    checkpoint = Path(trainer.output_folder) / "checkpoint_final.pth"
    if not checkpoint.exists():
        raise NnunetEngineError(f"training wrote no {checkpoint}")
    return {"checkpoint": str(checkpoint), "output_folder": str(trainer.output_folder),
            "epochs_run": trainer.m3b_epochs_run, "best_val_metric": trainer.m3b_best,
            "stop_reason": trainer.m3b_stop_reason or "completed",
            "num_parameters": sum(p.numel() for p in trainer.network.parameters()),
            "patch_size": list(trainer.configuration_manager.patch_size),
            "spacing": list(trainer.configuration_manager.spacing),
            "batch_size": int(trainer.configuration_manager.batch_size)}


# ---------------------------------------------------------------- inference

def load_predictor(checkpoint: str | Path, plans_file: str | Path, dataset_json_file: str | Path,
                   configuration: str, device, use_mirroring: bool = True):
    import torch
    from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor
    from nnunetv2.utilities.label_handling.label_handling import determine_num_input_channels
    from nnunetv2.utilities.plans_handling.plans_handler import PlansManager

    plans_manager = PlansManager(json.loads(Path(plans_file).read_text()))
    dataset_json = json.loads(Path(dataset_json_file).read_text())
    cm = plans_manager.get_configuration(configuration)
    ckpt = torch.load(str(checkpoint), map_location="cpu", weights_only=False)
    n_in = determine_num_input_channels(plans_manager, cm, dataset_json)
    heads = plans_manager.get_label_manager(dataset_json).num_segmentation_heads
    network = _trainer_class().build_network_architecture(
        plans_manager, cm, n_in, heads, enable_deep_supervision=False)
    network.load_state_dict(ckpt["network_weights"])
    mirror = ckpt.get("inference_allowed_mirroring_axes") if use_mirroring else None
    predictor = nnUNetPredictor(tile_step_size=0.5, use_gaussian=True,
                                use_mirroring=bool(use_mirroring and mirror),
                                perform_everything_on_device=device.type == "cuda",
                                device=device, verbose=False, verbose_preprocessing=False,
                                allow_tqdm=False)
    predictor.manual_initialization(network, plans_manager, cm, [ckpt["network_weights"]],
                                    dataset_json, TRAINER_NAME, mirror)
    return predictor


def _write_like_label(pred_file: Path, label_path: str, out_file: Path) -> None:
    """The predicted mask on the label's grid, with the label's own header where it is NIfTI."""
    pred = sitk.ReadImage(str(pred_file))
    if str(label_path).endswith((".nii", ".nii.gz")):
        import nibabel as nib
        ref = nib.load(str(label_path))
        arr = sitk.GetArrayFromImage(pred).T  # SimpleITK z,y,x -> NIfTI voxel order x,y,z
        if arr.shape != ref.shape[:arr.ndim]:
            arr = arr.reshape(ref.shape)
        header = ref.header.copy()
        header.set_data_dtype(np.uint8 if arr.max() < 256 else np.uint16)
        header["scl_slope"], header["scl_inter"] = 1, 0
        img = nib.Nifti1Image(arr.astype(header.get_data_dtype()), ref.affine, header)
        img.set_qform(ref.affine, int(ref.header["qform_code"]) or 1)
        img.set_sform(ref.affine, int(ref.header["sform_code"]) or 1)
        nib.save(img, str(out_file))
        return
    ref = read_image(label_path)
    diff = same_geometry(ref, pred)
    if diff.startswith("size"):
        raise NnunetEngineError(f"prediction for {label_path} has another {diff}")
    pred.CopyInformation(ref)
    sitk.WriteImage(pred, str(out_file), useCompression=True)


def predict(predictor, raw_dataset_dir: str | Path, test_rows: list[dict], out_dir: str | Path,
            n_proc: int = 2) -> list[dict]:
    raw_ts = Path(raw_dataset_dir) / "imagesTs"
    out_dir = Path(out_dir)
    tmp = out_dir.parent / "nnunet" / "predictions_raw"
    tmp.mkdir(parents=True, exist_ok=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not test_rows:
        return []
    inputs = [sorted(str(p) for p in raw_ts.glob(f"{r['case_id']}_[0-9][0-9][0-9][0-9].nii.gz"))
              for r in test_rows]
    outputs = [str(tmp / r["case_id"]) for r in test_rows]
    predictor.predict_from_files(inputs, outputs, save_probabilities=False, overwrite=True,
                                 num_processes_preprocessing=max(1, n_proc // 2),
                                 num_processes_segmentation_export=max(1, n_proc // 2))
    rows, used = [], set()
    for r in test_rows:
        item = r["item"]
        label_path = item.get("label_path")
        stem = Path(str(label_path or _channels(item)[0])).name
        for ext in (".nii.gz", ".nii", ".nrrd", ".mha", ".mhd", ".dcm"):
            stem = stem[:-len(ext)] if stem.endswith(ext) else stem
        name = stem if stem not in used else f"{stem}_{r['case_id']}"
        used.add(name)
        target = out_dir / f"{name}.nii.gz"
        src = tmp / f"{r['case_id']}.nii.gz"
        if label_path:
            _write_like_label(src, label_path, target)
        else:
            target.write_bytes(src.read_bytes())
        rows.append({"image_path": item["image_path"], "label_path": label_path,
                     "prediction_path": str(target)})
    return rows
