"""nnU-Net v2 on a system segmentation job's cases, run with nnU-Net's own command-line tools.

    python -m bench.expert.nnunet --job <job workspace> --out <folder>

1. The job's training cases (``Datapath/train.json``) become an nnU-Net raw dataset
   (``imagesTr/<case>_0000.nii.gz``, ``labelsTr``, ``dataset.json``), its test cases
   ``imagesTs``; ``nnUNet_raw``, ``nnUNet_preprocessed`` and ``nnUNet_results`` point into
   ``<out>/nnunet``.
2. ``nnUNetv2_plan_and_preprocess`` (the configuration for the data's dimension), then
   ``splits_final.json`` with one fold: validation = the same patients the expert baseline holds
   out (``bench.expert.common.hold_out_validation``), training = the rest.
3. ``nnUNetv2_train DATASET CONFIG 0 -tr nnUNetTrainerBench``: nnU-Net's trainer with the job's
   epochs and the other pipelines' number of training patches per epoch
   (``nnunet_trainers/``).
4. ``nnUNetv2_predict`` on the test images (nnU-Net's defaults: final checkpoint, mirroring);
   ``predictions.json`` lists the masks and the system's evaluator scores them.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench.expert.common import (Clock, ExpertError, check_split, hold_out_validation, load_job,
                                 score, write_result)

DATASET_ID = 777
DATASET = f"Dataset{DATASET_ID}_VsExpert"
TRAINER = "nnUNetTrainerBench"
TRAINERS_DIR = Path(__file__).resolve().parent / "nnunet_trainers"
REPO = Path(__file__).resolve().parents[2]
PATCHES_PER_CASE = 4   # the system's and the expert's training patches per case and epoch


def stem(path: str) -> str:
    name = Path(path).name
    for ext in (".nii.gz", ".nii", ".nrrd", ".mha", ".mhd"):
        if name.endswith(ext):
            return name[:-len(ext)]
    return Path(name).stem


def case_ids(items: list[dict]) -> list[str]:
    """nnU-Net case identifiers: the image file names, numbered where two share one."""
    stems = [stem(str(it["image_path"])) for it in items]
    if len(set(stems)) == len(stems):
        return stems
    return [f"case_{i:04d}" for i in range(len(items))]


def copy_nifti(src: str, dst: Path) -> None:
    """nnU-Net wants one file ending: ``.nii.gz`` files are copied, others converted."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if str(src).endswith(".nii.gz"):
        shutil.copyfile(src, dst)
        return
    import SimpleITK as sitk
    sitk.WriteImage(sitk.ReadImage(str(src)), str(dst), useCompression=True)


def write_raw(job, raw: Path, ids: list[str], test_ids: list[str]) -> Path:
    ds = raw / DATASET
    if ds.exists():
        shutil.rmtree(ds)
    for item, cid in zip(job.train, ids):
        if isinstance(item["image_path"], (list, tuple)) or item.get("label_values"):
            raise ExpertError("this bench converts one image file and a 0..N mask per case")
        copy_nifti(item["image_path"], ds / "imagesTr" / f"{cid}_0000.nii.gz")
        copy_nifti(item["label_path"], ds / "labelsTr" / f"{cid}.nii.gz")
    for item, cid in zip(job.test, test_ids):
        copy_nifti(item["image_path"], ds / "imagesTs" / f"{cid}_0000.nii.gz")
    names = list(job.train[0]["labels"])
    kind = (job.loader.get("INTENSITY") or {}).get("kind", "")
    (ds / "dataset.json").write_text(json.dumps({
        "channel_names": {"0": "CT" if kind == "ct" else "MRI" if kind == "mri" else "image"},
        "labels": {"background": 0, **{n: i + 1 for i, n in enumerate(names)}},
        "numTraining": len(ids), "file_ending": ".nii.gz"}, indent=2))
    return ds


def nnunet_env(base: Path, epochs: int, patches_per_epoch: int) -> dict:
    env = dict(os.environ)
    for key, sub in (("nnUNet_raw", "raw"), ("nnUNet_preprocessed", "preprocessed"),
                     ("nnUNet_results", "results")):
        (base / sub).mkdir(parents=True, exist_ok=True)
        env[key] = str(base / sub)
    cpus = str(min(2, os.cpu_count() or 1))
    env.update(nnUNet_extTrainer=str(TRAINERS_DIR), nnUNet_def_n_proc=cpus,
               nnUNet_n_proc_DA=cpus, nnUNet_compile="false", BENCH_EPOCHS=str(epochs),
               BENCH_PATCHES_PER_EPOCH=str(patches_per_epoch),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])))
    return env


def run(command: list[str], env: dict, log: Path) -> None:
    """One nnU-Net console script; its output goes to ``log``; a failure names the log."""
    with open(log, "w") as handle:
        done = subprocess.run([sys.executable, "-m", "bench.expert.nnunet_cli", *command],
                              env=env, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT)
    if done.returncode:
        tail = log.read_text(errors="replace")[-1500:]
        raise ExpertError(f"{command[0]} failed (exit {done.returncode}); see {log}:\n{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--job", required=True, help="the system job's workspace folder")
    parser.add_argument("--out", required=True, help="where nnU-Net's folders and results go")
    parser.add_argument("--epochs", type=int, help="default: the job's epochs")
    parser.add_argument("--device", default="cpu", help="cpu | cuda (nnU-Net's -device)")
    args = parser.parse_args(argv)
    clock = Clock()
    job = load_job(args.job)
    if job.template != "segmentation":
        raise ExpertError(f"job {args.job} trained the {job.template!r} template, not "
                          "segmentation")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    base = out / "nnunet"
    ids, test_ids = case_ids(job.train), case_ids(job.test)
    if set(ids) & set(test_ids):
        ids = [f"train_{i:04d}" for i in range(len(ids))]
        test_ids = [f"test_{i:04d}" for i in range(len(test_ids))]
    tr, va = hold_out_validation([it["image_path"] for it in job.train], job.groups,
                                 seed=job.seed)
    check_split([job.train[i] for i in tr], [job.train[i] for i in va], job.test, job.groups)
    epochs = int(args.epochs or job.config.get("epochs", 20))
    patches = len(tr) * int(job.loader.get("SAMPLES_PER_CASE", PATCHES_PER_CASE))
    env = nnunet_env(base, epochs, patches)
    config = "2d" if int(job.loader.get("SPATIAL_DIMS", 3)) == 2 else "3d_fullres"
    with clock("convert"):
        raw = write_raw(job, base / "raw", ids, test_ids)
    with clock("plan_and_preprocess"):
        run(["nnUNetv2_plan_and_preprocess", "-d", str(DATASET_ID), "-c", config, "-np",
             env["nnUNet_def_n_proc"], "--verify_dataset_integrity"], env,
            out / "plan_and_preprocess.log")
    splits = [{"train": [ids[i] for i in tr], "val": [ids[i] for i in va]}]
    (base / "preprocessed" / DATASET / "splits_final.json").write_text(json.dumps(splits,
                                                                                  indent=1))
    with clock("train"):
        run(["nnUNetv2_train", str(DATASET_ID), config, "0", "-tr", TRAINER, "-device",
             args.device], env, out / "train.log")
    pred_dir = out / "predictions"
    with clock("predict"):
        run(["nnUNetv2_predict", "-i", str(raw / "imagesTs"), "-o", str(pred_dir), "-d",
             str(DATASET_ID), "-c", config, "-f", "0", "-tr", TRAINER, "-device", args.device,
             "-npp", "1", "-nps", "1", "--disable_progress_bar"], env, out / "predict.log")
    rows = [{"image_path": it["image_path"], "label_path": it["label_path"],
             "prediction_path": str(pred_dir / f"{cid}.nii.gz")}
            for it, cid in zip(job.test, test_ids)]
    (out / "predictions.json").write_text(json.dumps(rows, indent=1))
    with clock("evaluate"):
        report = score("segmentation", job.datapath, out / "predictions.json")
    (out / "report.json").write_text(json.dumps(report, indent=2, default=float))
    fold = base / "results" / DATASET / f"{TRAINER}__nnUNetPlans__{config}" / "fold_0"
    training = json.loads((fold / "bench_training.json").read_text())
    result = {"pipeline": "nnunet", "template": "segmentation", "network": f"nnunet_{config}",
              "epochs": epochs, "num_train": len(tr), "num_val": len(va),
              "num_test": len(job.test), "nnunet": training,
              "train_samples_per_second": training["train_patches"]
              / max(training["train_loop_seconds"], 1e-9),
              "seconds": clock.total(), "sections": clock.seconds,
              "metrics": report["metrics"], "report": str(out / "report.json")}
    write_result(out, result)
    print(json.dumps({"event": "done", **{k: result[k] for k in (
        "metrics", "train_samples_per_second", "seconds")}}, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
