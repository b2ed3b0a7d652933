"""DICOM images: a file's pixels (rescaled, frames and samples as channels), a series' slices
ordered by their position along the slice normal, and the RAS affine from the headers.

May import: core.imaging.refs, core.imaging.arrays, pydicom and numpy."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from core.imaging.refs import ImageReadError


def slice_order(positions: Sequence[Sequence[float] | None],
                orientations: Sequence[Sequence[float] | None],
                instance_numbers: Sequence[Any] | None = None,
                names: Sequence[str] | None = None) -> tuple[list[int], dict]:
    """Order of the slices of one series along the slice normal.

    Each slice's ``ImagePositionPatient`` is projected on the normal (row direction x column
    direction of ``ImageOrientationPatient``); slices are sorted by that distance, ascending.
    Without positions on every slice, ``InstanceNumber`` orders them (recorded in the result).
    Returns (order, {"ordered_by", "step" (vector first->next slice, mm), "slice_spacing",
    "uniform"}). Raises ImageReadError for mixed orientations or two slices at one position
    (a 4D or multi-echo series)."""
    n = len(positions)
    names = list(names) if names is not None else [str(i) for i in range(n)]
    if n == 1:
        return [0], {"ordered_by": "single", "step": None, "slice_spacing": None,
                     "uniform": True}
    if all(p is not None and len(p) == 3 for p in positions) and \
            all(o is not None and len(o) == 6 for o in orientations):
        iop = np.asarray(orientations, dtype=float)
        if np.abs(iop - iop[0]).max() > 1e-3:
            other = names[int(np.abs(iop - iop[0]).max(1).argmax())]
            raise ImageReadError(f"slices of one series have different orientations (e.g. "
                                 f"{names[0]} and {other}): not one volume")
        normal = np.cross(iop[0, :3], iop[0, 3:])
        ipp = np.asarray(positions, dtype=float)
        distance = ipp @ normal
        order = [int(i) for i in np.argsort(distance, kind="stable")]
        gaps = np.diff(distance[order])
        if (gaps < 1e-3).any():
            first = int(np.argmax(gaps < 1e-3))
            raise ImageReadError(
                f"{int((gaps < 1e-3).sum()) + 1} slices share a position (e.g. "
                f"{names[order[first]]} and {names[order[first + 1]]}): a series with several "
                "images per position (time points, echoes, b-values) is not one 3D volume")
        step = (ipp[order[-1]] - ipp[order[0]]) / (n - 1)
        spacing = float(np.linalg.norm(step))
        uniform = bool(np.abs(gaps - gaps.mean()).max() <= 0.01 * max(gaps.mean(), 1e-6) + 1e-3)
        return order, {"ordered_by": "position", "step": step.tolist(),
                       "slice_spacing": spacing, "uniform": uniform}
    numbers = list(instance_numbers or [])
    try:
        values = [int(float(v)) for v in numbers] if len(numbers) == n else []
    except (TypeError, ValueError):
        values = []
    if values and len(set(values)) == n:
        order = sorted(range(n), key=lambda i: values[i])
        return order, {"ordered_by": "instance_number", "step": None, "slice_spacing": None,
                       "uniform": True}
    raise ImageReadError("cannot order the slices: they lack ImagePositionPatient/"
                         "ImageOrientationPatient and distinct InstanceNumbers (file names are "
                         f"never used), e.g. {names[0]}")


def _floats(value: Any) -> list[float] | None:
    try:
        return [float(v) for v in value] if value is not None else None
    except (TypeError, ValueError):
        return None


def dicom_pixels(ds: Any, ref: str = "") -> np.ndarray:
    """Pixel values in modality units (rescale slope/intercept or the modality LUT applied: HU
    for CT); MONOCHROME1 inverted so that larger always means brighter; palette colour
    expanded to RGB. Returns pydicom's layout: (rows, cols[, samples]) or (frames, rows, ...)."""
    from pydicom.pixels import apply_color_lut, apply_modality_lut
    try:
        arr = ds.pixel_array
    except Exception as exc:
        syntax = getattr(getattr(ds, "file_meta", None), "TransferSyntaxUID", None)
        raise ImageReadError(f"{ref}: DICOM pixel data cannot be decoded "
                             f"({type(exc).__name__}: {str(exc)[:160]}); transfer syntax "
                             f"{getattr(syntax, 'name', syntax)}. Compressed DICOM needs "
                             "pylibjpeg / pylibjpeg-openjpeg / pylibjpeg-rle") from exc
    photometric = str(getattr(ds, "PhotometricInterpretation", "MONOCHROME2")).upper()
    if photometric == "PALETTE COLOR":
        return apply_color_lut(arr, ds).astype(np.float32)
    if int(getattr(ds, "SamplesPerPixel", 1)) != 1:
        return arr.astype(np.float32)
    out = np.asarray(apply_modality_lut(arr, ds), dtype=np.float32)
    if photometric == "MONOCHROME1":
        bits = int(getattr(ds, "BitsStored", 8 * arr.dtype.itemsize))
        signed = int(getattr(ds, "PixelRepresentation", 0)) == 1
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        ends = np.asarray(apply_modality_lut(np.asarray([lo, hi], dtype=arr.dtype), ds),
                          dtype=np.float64)
        out = (ends.min() + ends.max() - out).astype(np.float32)
    return out


def _dicom_affine(ipp, iop, pixel_spacing, step) -> np.ndarray | None:
    """RAS affine for array axes (column, row, slice), as MONAI's DICOM reader builds it."""
    if ipp is None or iop is None or len(ipp) != 3 or len(iop) != 6:
        return None
    row_sp, col_sp = (pixel_spacing or [1.0, 1.0])[:2]
    row_dir, col_dir = np.asarray(iop[:3]), np.asarray(iop[3:])
    lps = np.eye(4)
    lps[:3, 0] = row_dir * col_sp   # along a row: next column
    lps[:3, 1] = col_dir * row_sp   # along a column: next row
    lps[:3, 2] = np.asarray(step) if step is not None else np.cross(row_dir, col_dir)
    lps[:3, 3] = ipp
    return np.diag([-1.0, -1.0, 1.0, 1.0]) @ lps


def _dicom_to_channels_first(pixels: np.ndarray, frames: int, samples: int) -> np.ndarray:
    """pydicom layout -> (C, cols, rows[, frames])."""
    if frames > 1:  # (F, R, C[, S])
        arr = pixels if samples > 1 else pixels[..., None]
        return np.transpose(arr, (3, 2, 1, 0))
    arr = pixels if samples > 1 else pixels[..., None]  # (R, C, S)
    return np.transpose(arr, (2, 1, 0))


def read_dicom_file(path: Path) -> tuple[np.ndarray, dict]:
    import pydicom
    try:
        ds = pydicom.dcmread(str(path))
    except Exception as exc:
        raise ImageReadError(f"{path}: not a readable DICOM file ({type(exc).__name__}: "
                             f"{str(exc)[:160]})") from exc
    if "PixelData" not in ds and "FloatPixelData" not in ds and "DoubleFloatPixelData" not in ds:
        raise ImageReadError(f"{path}: a DICOM file without pixel data "
                             f"({getattr(ds, 'Modality', '?')} {getattr(ds, 'SOPClassUID', '')})")
    frames = int(getattr(ds, "NumberOfFrames", 1) or 1)
    samples = int(getattr(ds, "SamplesPerPixel", 1) or 1)
    pixels = dicom_pixels(ds, str(path))
    if str(getattr(ds, "PhotometricInterpretation", "")).upper() == "PALETTE COLOR":
        samples = 3
    arr = _dicom_to_channels_first(pixels, frames, samples)
    pixel_spacing = _floats(getattr(ds, "PixelSpacing", None))
    spacing = [pixel_spacing[1], pixel_spacing[0]] if pixel_spacing else None
    step = None
    if frames > 1 and spacing:
        between = getattr(ds, "SpacingBetweenSlices", None) or getattr(ds, "SliceThickness", None)
        spacing.append(float(between) if between else 1.0)
    iop = _floats(getattr(ds, "ImageOrientationPatient", None))
    if frames > 1 and iop and spacing:
        step = (np.cross(iop[:3], iop[3:]) * spacing[2]).tolist()
    meta = {"format": "dicom", "modality": str(getattr(ds, "Modality", "")),
            "photometric": str(getattr(ds, "PhotometricInterpretation", ""))}
    affine = _dicom_affine(_floats(getattr(ds, "ImagePositionPatient", None)), iop,
                           pixel_spacing, step)
    if affine is not None:
        meta["affine"] = affine
    if spacing:
        meta["spacing"] = spacing
    return arr, meta


def read_dicom_series(files: Sequence[str | os.PathLike], ref: str = "",
                      expected_uid: str | None = None,
                      images_only: bool = False) -> tuple[np.ndarray, dict]:
    """DICOM files of one series -> (C, cols, rows, slices), slices ordered by position.
    ``images_only`` drops files without pixel data (reports, presentation states beside the
    slices of a folder) instead of failing on them."""
    import pydicom
    paths = [Path(f) for f in files]
    datasets = []
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"{ref}: series file {path} does not exist")
        try:
            datasets.append(pydicom.dcmread(str(path)))
        except Exception as exc:
            raise ImageReadError(f"{ref}: {path} is not a readable DICOM file "
                                 f"({type(exc).__name__}: {str(exc)[:120]})") from exc
    if images_only:
        kept = [(p, ds) for p, ds in zip(paths, datasets) if "PixelData" in ds]
        paths, datasets = [p for p, _ in kept], [ds for _, ds in kept]
    if not paths:
        raise ImageReadError(f"{ref}: no DICOM image files")
    uids = {str(getattr(ds, "SeriesInstanceUID", "")) for ds in datasets}
    if len(uids) > 1:
        raise ImageReadError(
            f"{ref}: the files belong to {len(uids)} DICOM series ({', '.join(sorted(uids)[:3])}"
            "...); a 3D image is one series. Index each series as its own "
            "<SeriesInstanceUID>.series.json manifest (the Data Engineer's DICOM layout does)")
    if expected_uid and uids != {expected_uid}:
        raise ImageReadError(f"{ref}: the files are series {uids.pop()}, the manifest names "
                             f"{expected_uid}")
    order, geometry = slice_order(
        [_floats(getattr(ds, "ImagePositionPatient", None)) for ds in datasets],
        [_floats(getattr(ds, "ImageOrientationPatient", None)) for ds in datasets],
        [getattr(ds, "InstanceNumber", None) for ds in datasets],
        [p.name for p in paths])
    datasets = [datasets[i] for i in order]
    paths = [paths[i] for i in order]
    shapes = {(int(ds.Rows), int(ds.Columns)) for ds in datasets}
    if len(shapes) > 1:
        raise ImageReadError(f"{ref}: slices of the series have different sizes {sorted(shapes)}")
    if any(int(getattr(ds, "NumberOfFrames", 1) or 1) > 1 for ds in datasets):
        raise ImageReadError(f"{ref}: a series of multi-frame files is not one 3D volume; "
                             "index each file on its own")
    slices = [dicom_pixels(ds, str(p)) for ds, p in zip(datasets, paths)]
    if len({s.shape for s in slices}) > 1:
        raise ImageReadError(f"{ref}: slices have different sample layouts")
    stack = np.stack(slices, axis=0)  # (S, R, C[, samples])
    stack = stack if stack.ndim == 4 else stack[..., None]
    arr = np.transpose(stack, (3, 2, 1, 0))  # (samples, C, R, S)
    first = datasets[0]
    pixel_spacing = _floats(getattr(first, "PixelSpacing", None))
    iop = _floats(getattr(first, "ImageOrientationPatient", None))
    step = geometry["step"]
    if step is None and iop is not None:
        thickness = float(getattr(first, "SliceThickness", 0) or 0) or 1.0
        step = (np.cross(iop[:3], iop[3:]) * thickness).tolist()
    spacing = None
    if pixel_spacing:
        spacing = [pixel_spacing[1], pixel_spacing[0],
                   geometry["slice_spacing"] or float(getattr(first, "SliceThickness", 0) or 1.0)]
    meta = {"format": "dicom_series", "modality": str(getattr(first, "Modality", "")),
            "series_instance_uid": uids.pop(), "num_slices": len(slices),
            "slice_order": geometry["ordered_by"], "uniform_spacing": geometry["uniform"],
            "stacked_slices": True}
    affine = _dicom_affine(_floats(getattr(first, "ImagePositionPatient", None)), iop,
                           pixel_spacing, step)
    if affine is not None:
        meta["affine"] = affine
    if spacing:
        meta["spacing"] = spacing
    return arr, meta
