"""Batch 5: writers shared by the batch-5 generators: an RGB (photographic) DICOM writer, a
byte-stable .npz writer, a MATLAB v7.3 (HDF5) .mat writer, a multi-page TIFF writer and plain
CSV/TSV writers. Everything is deterministic from the caller's ``numpy.random.Generator``; no
code of the app is imported."""
from __future__ import annotations

import csv
import io
import zipfile
from pathlib import Path

import numpy as np

from .common import mkdir

ZIP_DATE = (2020, 6, 1, 0, 0, 0)


def write_table(path: Path, header: list, rows: list, delimiter: str = ",") -> None:
    """A CSV (or TSV) with '\\n' line ends, quoting only where needed."""
    mkdir(path.parent)
    with open(path, "w", newline="") as fh:
        wr = csv.writer(fh, delimiter=delimiter, lineterminator="\n")
        wr.writerow(header)
        wr.writerows(rows)


def save_npz(path: Path, **arrays) -> None:
    """Like ``numpy.savez_compressed`` but with fixed zip dates, so two runs are byte-identical
    (numpy stamps each member with the current time)."""
    mkdir(path.parent)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, arr in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asanyarray(arr), allow_pickle=False)
            zi = zipfile.ZipInfo(f"{name}.npy", date_time=ZIP_DATE)
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, member.getvalue())
    path.write_bytes(buf.getvalue())


def save_zip(path: Path, members: dict[str, bytes]) -> None:
    """A zip archive of the given members with fixed dates."""
    mkdir(path.parent)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zi = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, data)
    path.write_bytes(buf.getvalue())


def png_bytes(arr: np.ndarray) -> bytes:
    from PIL import Image

    b = io.BytesIO()
    Image.fromarray(arr).save(b, format="PNG")
    return b.getvalue()


# ----------------------------------------------------------------------------- MATLAB v7.3

_MAT_HEADER = (b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Thu Apr 13 10:12:05 2017 "
               b"HDF5 schema 1.00 .")


def save_mat73(path: Path, struct: str, fields: dict[str, tuple[np.ndarray, str]]) -> None:
    """A MATLAB v7.3 .mat file (an HDF5 file behind a 512-byte MATLAB header) holding one struct
    ``struct`` whose fields are ``name: (array, matlab_class)``. MATLAB stores arrays column-
    major, so every array is written transposed (a 1 x N row vector becomes an (N, 1) dataset);
    char fields are uint16 code points with MATLAB_int_decode = 2; logical fields are uint8."""
    import h5py

    mkdir(path.parent)
    with h5py.File(path, "w", userblock_size=512, libver="earliest") as f:
        gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
        gcpl.set_obj_track_times(False)
        gid = h5py.h5g.create(f.id, struct.encode(), gcpl=gcpl)
        g = h5py.Group(gid)
        g.attrs["MATLAB_class"] = np.bytes_("struct")
        for name, (arr, mclass) in fields.items():
            a = np.asarray(arr)
            if a.ndim < 2:
                a = a.reshape(1, -1)
            d = g.create_dataset(name, data=np.ascontiguousarray(a.T), track_times=False)
            d.attrs["MATLAB_class"] = np.bytes_(mclass)
            if mclass == "char":
                d.attrs["MATLAB_int_decode"] = np.int32(2)
    head = _MAT_HEADER.ljust(116, b" ") + b"\0" * 8 + b"\x00\x02" + b"IM"
    with open(path, "r+b") as fh:
        fh.write(head.ljust(512, b"\0"))


def save_mat73_array(path: Path, name: str, arr: np.ndarray, mclass: str = "double") -> None:
    """A v7.3 .mat file holding one top-level array (written transposed, as MATLAB does)."""
    import h5py

    mkdir(path.parent)
    a = np.asarray(arr)
    if a.ndim < 2:
        a = a.reshape(-1, 1)
    with h5py.File(path, "w", userblock_size=512, libver="earliest") as f:
        d = f.create_dataset(name, data=np.ascontiguousarray(a.T), track_times=False)
        d.attrs["MATLAB_class"] = np.bytes_(mclass)
    head = _MAT_HEADER.ljust(116, b" ") + b"\0" * 8 + b"\x00\x02" + b"IM"
    with open(path, "r+b") as fh:
        fh.write(head.ljust(512, b"\0"))


def mat_char(s: str) -> np.ndarray:
    """A MATLAB char row vector as stored in v7.3 files (uint16 code points)."""
    return np.array([[ord(c) for c in s]], np.uint16)


# ----------------------------------------------------------------------------- DICOM (RGB)

def save_dicom_rgb(path: Path, rgb: np.ndarray, *, patient_id: str, study_uid: str,
                   series_uid: str, sop_uid: str, **tags) -> None:
    """A single-frame RGB photograph as DICOM (VL Photographic Image Storage, modality XC,
    explicit VR little endian, uncompressed, interleaved samples)."""
    import warnings

    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian

    mkdir(path.parent)
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.77.1.4"
    meta.MediaStorageSOPInstanceUID = sop_uid
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset(str(path), {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID = meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = sop_uid
    ds.Modality = "XC"
    ds.PatientID = patient_id
    ds.PatientName = patient_id
    ds.StudyInstanceUID = study_uid
    ds.SeriesInstanceUID = series_uid
    ds.SeriesNumber = 1
    ds.InstanceNumber = 1
    ds.SamplesPerPixel = 3
    ds.PhotometricInterpretation = "RGB"
    ds.PlanarConfiguration = 0
    ds.Rows, ds.Columns = rgb.shape[:2]
    ds.BitsAllocated = 8
    ds.BitsStored = 8
    ds.HighBit = 7
    ds.PixelRepresentation = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k, v in tags.items():
            setattr(ds, k, v)
        ds.PixelData = np.ascontiguousarray(rgb.astype(np.uint8)).tobytes()
        ds.save_as(str(path), enforce_file_format=True)


# ----------------------------------------------------------------------------- TIFF

def save_tiff_pages(path: Path, pages: list[np.ndarray], tile: tuple[int, int] | None = None,
                    compression: str | None = "zlib") -> None:
    """A multi-page (pyramid-like) TIFF: one page per array, largest first, as whole-slide
    images are stored (each page a lower resolution level)."""
    import tifffile

    mkdir(path.parent)
    with tifffile.TiffWriter(path) as tw:
        for k, p in enumerate(pages):
            use_tile = tile if (tile and p.shape[0] % tile[0] == 0 and
                                p.shape[1] % tile[1] == 0) else None
            tw.write(p, photometric="rgb" if p.ndim == 3 else "minisblack", tile=use_tile,
                     compression=compression, subfiletype=1 if k else 0, software=False,
                     metadata=None)
