"""Small writers and drawing helpers shared by the generality-check generators.

Everything here is deterministic from a ``numpy.random.Generator``; no code of the app is
imported (the check is meant to be written without knowing how the app reads folders).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
from pathlib import Path

import numpy as np


def rng_for(seed: int, key: str) -> np.random.Generator:
    """A generator that depends on the seed and the dataset key only."""
    h = int(hashlib.sha256(f"{key}:{seed}".encode()).hexdigest()[:12], 16)
    return np.random.default_rng(h)


def mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


# ----------------------------------------------------------------------------- drawing (2D)

def disk(shape, cy, cx, r) -> np.ndarray:
    yy, xx = np.ogrid[: shape[0], : shape[1]]
    return (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r


def ellipse(shape, cy, cx, ry, rx) -> np.ndarray:
    yy, xx = np.ogrid[: shape[0], : shape[1]]
    return ((yy - cy) / max(ry, 1e-3)) ** 2 + ((xx - cx) / max(rx, 1e-3)) ** 2 <= 1.0


def chest_background(rng, size=64) -> np.ndarray:
    """A frontal chest radiograph look-alike in [0, 1]: bright mediastinum, dark lungs."""
    img = np.full((size, size), 0.55, np.float32)
    lung_l = ellipse((size, size), size * 0.52, size * 0.30, size * 0.30, size * 0.16)
    lung_r = ellipse((size, size), size * 0.52, size * 0.70, size * 0.30, size * 0.16)
    img[lung_l | lung_r] = 0.22
    for k in range(5):  # ribs
        y = int(size * (0.28 + 0.11 * k))
        img[y: y + 1, :] += 0.06
    img += rng.normal(0, 0.03, img.shape).astype(np.float32)
    return np.clip(img, 0, 1)


def to_u8(img: np.ndarray) -> np.ndarray:
    return (np.clip(img, 0, 1) * 255).round().astype(np.uint8)


def save_png(path: Path, arr: np.ndarray) -> None:
    from PIL import Image

    mkdir(path.parent)
    Image.fromarray(arr).save(path)


def save_jpg(path: Path, arr: np.ndarray, quality: int = 92) -> None:
    from PIL import Image

    mkdir(path.parent)
    Image.fromarray(arr).save(path, quality=quality)


# ----------------------------------------------------------------------------- drawing (3D)

def ball(shape, c, r_vox) -> np.ndarray:
    """Ellipsoid mask; ``r_vox`` a scalar or one radius per axis (in voxels)."""
    r = np.broadcast_to(np.asarray(r_vox, float), (3,))
    zz, yy, xx = np.ogrid[: shape[0], : shape[1], : shape[2]]
    return (((zz - c[0]) / r[0]) ** 2 + ((yy - c[1]) / r[1]) ** 2 + ((xx - c[2]) / r[2]) ** 2) <= 1.0


# ----------------------------------------------------------------------------- file formats

def save_nifti(path: Path, vol_xyz: np.ndarray, spacing=(1.0, 1.0, 1.0), origin=(0.0, 0.0, 0.0),
               dtype=None) -> None:
    """Write a NIfTI-1 (.nii.gz) from an array in (x, y, z[, t]) order with a diagonal affine."""
    import nibabel as nib

    mkdir(path.parent)
    aff = np.eye(4)
    aff[0, 0], aff[1, 1], aff[2, 2] = spacing
    aff[:3, 3] = origin
    arr = vol_xyz if dtype is None else vol_xyz.astype(dtype)
    img = nib.Nifti1Image(arr, aff)
    img.header.set_xyzt_units("mm", "sec")
    img.set_qform(aff, code=1)
    img.set_sform(aff, code=1)
    nib.save(img, str(path))


def save_sitk(path: Path, vol_zyx: np.ndarray, spacing_xyz=(1.0, 1.0, 1.0),
              origin_xyz=(0.0, 0.0, 0.0), direction=None) -> None:
    """Write .mhd/.raw or .mha with SimpleITK from a (z, y, x) array."""
    import SimpleITK as sitk

    mkdir(path.parent)
    img = sitk.GetImageFromArray(vol_zyx)
    img.SetSpacing(tuple(float(s) for s in spacing_xyz))
    img.SetOrigin(tuple(float(o) for o in origin_xyz))
    if direction is not None:
        img.SetDirection(tuple(float(d) for d in direction))
    sitk.WriteImage(img, str(path), useCompression=False)


def uid(prefix: str, rng) -> str:
    """A syntactically valid DICOM UID (digits and dots, <= 64 chars)."""
    tail = ".".join(str(int(rng.integers(1, 10**9))) for _ in range(3))
    return f"{prefix}.{tail}"[:64]


def save_dicom_cr(path: Path, pixels_u8: np.ndarray, *, patient_id: str, study_uid: str,
                  series_uid: str, sop_uid: str, sex: str, age: str, view: str,
                  modality: str = "CR", body_part: str = "CHEST") -> None:
    """A single-frame 8-bit 2D radiograph (MONOCHROME2) like the
    RSNA Pneumonia Detection Challenge's de-identified .dcm files."""
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian

    mkdir(path.parent)
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.1"  # CR Image Storage
    meta.MediaStorageSOPInstanceUID = sop_uid
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset(str(path), {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID = meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = sop_uid
    now = _dt.datetime(1901, 1, 1)
    ds.StudyDate = now.strftime("%Y%m%d")
    ds.StudyTime = "000000.00"
    ds.AccessionNumber = ""
    ds.Modality = modality
    ds.ConversionType = "WSD"
    ds.ReferringPhysicianName = ""
    ds.SeriesDescription = f"view: {view}"
    ds.PatientName = patient_id
    ds.PatientID = patient_id
    ds.PatientBirthDate = ""
    ds.PatientSex = sex
    ds.BodyPartExamined = body_part
    ds.ViewPosition = view
    ds.StudyInstanceUID = study_uid
    ds.SeriesInstanceUID = series_uid
    ds.StudyID = ""
    ds.SeriesNumber = 1
    ds.InstanceNumber = 1
    ds.PatientOrientation = ""
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.Rows, ds.Columns = pixels_u8.shape
    ds.PixelSpacing = [0.168, 0.168]
    ds.BitsAllocated = 8
    ds.BitsStored = 8
    ds.HighBit = 7
    ds.PixelRepresentation = 0
    ds.LossyImageCompression = "01"
    ds.LossyImageCompressionMethod = "ISO_10918_1"
    ds.PixelData = pixels_u8.astype(np.uint8).tobytes()
    import warnings

    with warnings.catch_warnings():  # RSNA's files really carry PatientAge as bare digits
        warnings.simplefilter("ignore")
        ds.PatientAge = age
        ds.save_as(str(path), enforce_file_format=True)
