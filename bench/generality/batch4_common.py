"""Batch 4: writers shared by the batch-4 generators (a generic DICOM writer, a NIfTI writer
with a free affine, 12-hex-digit ids, a deterministic XLSX writer). Everything is deterministic
from the caller's ``numpy.random.Generator``; no code of the app is imported."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .batch3_2d import _deterministic_xlsx
from .common import mkdir

SOP_CLASS = {
    "CT": "1.2.840.10008.5.1.4.1.1.2",        # CT Image Storage
    "MR": "1.2.840.10008.5.1.4.1.1.4",        # MR Image Storage
    "MG": "1.2.840.10008.5.1.4.1.1.1.2",      # Digital Mammography X-Ray Image - For Presentation
    "DX": "1.2.840.10008.5.1.4.1.1.1.1",      # Digital X-Ray Image - For Presentation
    "CR": "1.2.840.10008.5.1.4.1.1.1",        # Computed Radiography Image
}


def hex12(rng) -> str:
    """A 12-hex-digit id like the SIIM-FISABIO-RSNA COVID-19 file and folder names."""
    return "".join("0123456789abcdef"[int(d)] for d in rng.integers(0, 16, 12))


def save_dicom(path: Path, pix: np.ndarray, *, modality: str, patient_id: str, study_uid: str,
               series_uid: str, sop_uid: str, photometric: str = "MONOCHROME2",
               bits_stored: int | None = None, **tags) -> None:
    """A single-frame grayscale DICOM file (explicit VR little endian, uncompressed). The pixel
    array's dtype fixes BitsAllocated (8 or 16) and PixelRepresentation (signed or not);
    ``tags`` are further DICOM keywords set as given (ImagePositionPatient, RescaleIntercept,
    WindowCenter, ...)."""
    import warnings

    mkdir(path.parent)
    with warnings.catch_warnings():  # some public files carry odd values (hex UIDs); keep them
        warnings.simplefilter("ignore")
        _write_dicom(path, pix, modality, patient_id, study_uid, series_uid, sop_uid,
                     photometric, bits_stored, tags)


def _write_dicom(path, pix, modality, patient_id, study_uid, series_uid, sop_uid, photometric,
                 bits_stored, tags):
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = SOP_CLASS[modality]
    meta.MediaStorageSOPInstanceUID = sop_uid
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset(str(path), {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID = meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = sop_uid
    ds.Modality = modality
    ds.PatientID = patient_id
    ds.PatientName = patient_id
    ds.StudyInstanceUID = study_uid
    ds.SeriesInstanceUID = series_uid
    ds.SeriesNumber = 1
    ds.InstanceNumber = 1
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = photometric
    ds.Rows, ds.Columns = pix.shape
    bits = 8 if pix.dtype.itemsize == 1 else 16
    ds.BitsAllocated = bits
    ds.BitsStored = bits_stored or bits
    ds.HighBit = ds.BitsStored - 1
    ds.PixelRepresentation = 1 if pix.dtype.kind == "i" else 0
    for k, v in tags.items():
        setattr(ds, k, v)
    ds.PixelData = np.ascontiguousarray(pix).tobytes()
    ds.save_as(str(path), enforce_file_format=True)


def save_nii(path: Path, data: np.ndarray, affine: np.ndarray) -> None:
    """NIfTI-1 (.nii or .nii.gz by the name) with the given array and affine (sform = qform)."""
    import nibabel as nib

    mkdir(path.parent)
    img = nib.Nifti1Image(data, affine)
    img.header.set_xyzt_units("mm", "sec")
    img.set_qform(affine, code=1)
    img.set_sform(affine, code=1)
    nib.save(img, str(path))


def save_xlsx(path: Path, sheet: str, rows: list[list]) -> None:
    """One sheet of plain rows, with fixed document dates so two runs are byte-identical."""
    from openpyxl import Workbook

    mkdir(path.parent)
    wb = Workbook()
    ws = wb.active
    ws.title = sheet
    for r in rows:
        ws.append(r)
    wb.properties.creator = "openpyxl"
    wb.save(path)
    _deterministic_xlsx(path)


def seg_line(shape, y0, x0, y1, x1, width) -> np.ndarray:
    """Pixels within width/2 of the segment (y0, x0)-(y1, x1)."""
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    dy, dx = y1 - y0, x1 - x0
    L2 = dy * dy + dx * dx or 1e-6
    t = np.clip(((yy - y0) * dy + (xx - x0) * dx) / L2, 0, 1)
    return (yy - (y0 + t * dy)) ** 2 + (xx - (x0 + t * dx)) ** 2 <= (width / 2) ** 2
