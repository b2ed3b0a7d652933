"""preview_files (``tools/files.py``): a file's kind, header and first rows or items, by its
kind, redacted; images and volumes by their header, never their pixels."""
from __future__ import annotations

import csv
import io
import json
import os
import zipfile
from pathlib import Path

from pydantic import BaseModel

from core.privacy import redaction
from tools.context import ToolError
from tools.data_engineer import bounded
from tools.file_common import (COUNT_BYTES, IMAGE_SUFFIXES, ITK_SUFFIXES, MAX_EXCEL_BYTES,
                               MAX_HEAD_BYTES, MAX_JSON_BYTES, MAX_PATHS, PREVIEW_BUDGET,
                               PREVIEW_ROWS, PREVIEW_WORDS, RESULT_BUDGET, TABLE_SUFFIXES,
                               JailedTool, path_list, _is_binary, _is_dicom, _read_head,
                               _regular, _size, too_big)
from tools.file_read import PathsArgs
from tools.sandbox import NOTICE


# -- preview_files ----------------------------------------------------------------------------
def _count_lines(real: Path) -> tuple[int, bool]:
    """Lines in the file (in at most COUNT_BYTES; the bool says whether it was all of it)."""
    lines, read = 0, 0
    with open(real, "rb") as fh:
        while read < COUNT_BYTES:
            chunk = fh.read(1 << 20)
            if not chunk:
                return lines, True
            read += len(chunk)
            lines += chunk.count(b"\n")
        return lines, fh.read(1) == b""


def _preview_table(real: Path, head: bytes, delim: str, budget: int) -> dict:
    text = head.decode("utf-8", errors="replace")
    lines = text.splitlines()[: PREVIEW_ROWS + 2]
    rows = list(csv.reader(io.StringIO("\n".join(lines)), delimiter=delim))
    header, body = (rows[0], rows[1: PREVIEW_ROWS + 1]) if rows else ([], [])
    body = redaction.redact_rows(header, body)
    count, exact = _count_lines(real)
    if not text.endswith("\n") and exact:
        count += 1
    out = {"kind": "table", "delimiter": "tab" if delim == "\t" else delim,
           "columns": [c[:80] for c in header][:100], "rows": [[c[:200] for c in r[:100]]
                                                               for r in body],
           "row_count": max(count - 1, 0) if exact else f"more than {max(count - 1, 0)}"}
    redacted = redaction.identifier_columns(header)
    if redacted:
        out["redacted_columns"] = redacted
    if len(json.dumps(out)) > budget:
        out["rows"] = [[c[:40] for c in r[:30]] for r in out["rows"]]
        out["columns"] = [c[:40] for c in out["columns"][:30]]
    return out


def _preview_json(real: Path, size: int, budget: int) -> dict:
    if real.suffix.lower() == ".jsonl":
        items = []
        with open(real, "rb") as fh:  # each line read up to a bound: a line may be the file
            for line in iter(lambda: fh.readline(MAX_HEAD_BYTES), b""):
                if len(items) >= PREVIEW_ROWS:
                    break
                if len(line) == MAX_HEAD_BYTES and not line.endswith(b"\n"):
                    items.append(f"(a line longer than {_size(MAX_HEAD_BYTES)}: "
                                 f"{line[:80].decode('utf-8', 'replace')}...)")
                    break
                try:
                    items.append(json.loads(line))
                except ValueError:
                    items.append(line[:200].decode("utf-8", "replace"))
        count, exact = _count_lines(real)
        return bounded({"kind": "json lines", "first": redaction.redact_json(items),
                        "count": count if exact else f"more than {count}"}, budget)
    if size > MAX_JSON_BYTES:
        raise too_big(real.name, size, MAX_JSON_BYTES, "preview_files parses as JSON",
                      "read_files shows its beginning")
    try:
        value = json.loads(_read_head(real, MAX_JSON_BYTES).decode("utf-8", errors="replace"))
    except ValueError as exc:
        raise ToolError(f"'{real.name}' is not valid JSON: {exc}") from None
    if isinstance(value, list):
        out = {"kind": "json list", "count": len(value),
               "first": redaction.redact_json(value[:PREVIEW_ROWS])}
    elif isinstance(value, dict):
        keys = list(value)
        out = {"kind": "json object", "count": len(keys), "keys": [str(k)[:80] for k in keys[:50]],
               "first": redaction.redact_json({k: value[k] for k in keys[:PREVIEW_ROWS]})}
    else:
        out = {"kind": "json value", "value": redaction.redact_json(value)}
    return bounded(out, budget)


def _preview_text(head: bytes, size: int, budget: int) -> dict:
    text = redaction.redact_text(head.decode("utf-8", errors="replace"))
    words = text.split()
    shown = " ".join(words[:PREVIEW_WORDS])
    out = {"kind": "text", "words": len(words) if size <= len(head) else
           f"{len(words)} in the first {_size(len(head))}", "text": shown[:budget]}
    if len(words) > PREVIEW_WORDS or len(shown) > budget:
        out["truncated"] = f"showing the first {min(len(shown), budget)} characters"
    return out


def _preview_excel(real: Path, size: int) -> dict:
    if size > MAX_EXCEL_BYTES:
        raise too_big(real.name, size, MAX_EXCEL_BYTES, "preview_files opens as a workbook",
                      "save the sheet as CSV (a script can) and preview that")
    try:
        import openpyxl
    except ImportError:
        raise ToolError("openpyxl is not installed; Excel files cannot be previewed") from None
    try:
        book = openpyxl.load_workbook(real, read_only=True, data_only=True)
    except Exception as exc:  # a broken or encrypted workbook
        raise ToolError(f"'{real.name}' cannot be read as an Excel workbook: {exc}") from None
    try:
        sheets = []
        for sheet in book.worksheets[:5]:
            rows = []
            for row in sheet.iter_rows(max_row=PREVIEW_ROWS + 1, values_only=True):
                rows.append(["" if c is None else str(c)[:200] for c in row[:100]])
            header, body = (rows[0], rows[1:]) if rows else ([], [])
            entry = {"sheet": sheet.title, "columns": header,
                     "rows": redaction.redact_rows(header, body),
                     "row_count": max((sheet.max_row or 1) - 1, 0)}
            redacted = redaction.identifier_columns(header)
            if redacted:
                entry["redacted_columns"] = redacted
            sheets.append(entry)
        return {"kind": "excel", "sheets": sheets, "sheet_count": len(book.sheetnames)}
    finally:
        book.close()


def _preview_image(real: Path) -> dict:
    from PIL import Image
    try:
        with Image.open(real) as img:
            bands = img.getbands()
            return {"kind": "image", "format": img.format, "width": img.width,
                    "height": img.height, "mode": img.mode, "channels": len(bands),
                    "frames": getattr(img, "n_frames", 1),
                    "dpi": [float(v) for v in img.info["dpi"]] if "dpi" in img.info else None}
    except Exception as exc:
        raise ToolError(f"'{real.name}' cannot be read as an image: {exc}") from None


def _preview_dicom(real: Path) -> dict:
    import pydicom
    try:
        # large values (a garbled length, private blobs) stay on disk: read on access only
        ds = pydicom.dcmread(real, stop_before_pixels=True, force=True, defer_size="256 KB")
    except Exception as exc:
        raise ToolError(f"'{real.name}' cannot be read as DICOM: {exc}") from None
    return {"kind": "dicom", **redaction.safe_dicom_summary(ds)}


def _preview_nifti(real: Path) -> dict:
    import nibabel as nib
    try:
        img = nib.load(str(real))
    except Exception as exc:
        raise ToolError(f"'{real.name}' cannot be read as NIfTI: {exc}") from None
    header = img.header
    return {"kind": "nifti", "shape": [int(s) for s in img.shape],
            "dtype": str(header.get_data_dtype()),
            "spacing": [round(float(z), 6) for z in header.get_zooms()],
            "orientation": "".join(nib.aff2axcodes(img.affine))}


def _preview_itk(real: Path) -> dict:
    import SimpleITK as sitk
    reader = sitk.ImageFileReader()
    reader.SetFileName(str(real))
    try:
        reader.ReadImageInformation()
    except Exception as exc:
        raise ToolError(f"'{real.name}' cannot be read by SimpleITK: {exc}") from None
    return {"kind": "image volume", "format": real.suffix.lower().lstrip("."),
            "shape": list(reader.GetSize()), "dtype": reader.GetPixelIDTypeAsString(),
            "components": reader.GetNumberOfComponents(),
            "spacing": [round(float(s), 6) for s in reader.GetSpacing()]}


def _npy_header(fh) -> dict:
    import numpy as np
    version = np.lib.format.read_magic(fh)
    reader = (np.lib.format.read_array_header_1_0 if version == (1, 0)
              else np.lib.format.read_array_header_2_0)
    shape, fortran, dtype = reader(fh)
    return {"shape": list(shape), "dtype": str(dtype)}


def _preview_numpy(real: Path) -> dict:
    try:
        if real.suffix.lower() == ".npy":
            with open(real, "rb") as fh:
                return {"kind": "numpy array", **_npy_header(fh)}
        arrays = {}
        with zipfile.ZipFile(real) as zf:
            for name in zf.namelist()[:50]:
                if name.endswith(".npy"):
                    with zf.open(name) as fh:
                        arrays[name[:-4]] = _npy_header(fh)
            total = len(zf.namelist())
        return {"kind": "numpy archive", "arrays": arrays, "count": total}
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        raise ToolError(f"'{real.name}' cannot be read as a numpy file: {exc}") from None


def preview_one(real: Path, st: os.stat_result, budget: int) -> dict:
    suffix = real.suffix.lower()
    lower = real.name.lower()
    head = _read_head(real, MAX_HEAD_BYTES)
    if lower.endswith((".nii", ".nii.gz")):
        return _preview_nifti(real)
    if suffix in ITK_SUFFIXES:
        return _preview_itk(real)
    if suffix in (".npy", ".npz"):
        return _preview_numpy(real)
    if suffix in (".xlsx", ".xlsm"):
        return _preview_excel(real, st.st_size)
    if suffix in IMAGE_SUFFIXES:
        return _preview_image(real)
    if _is_dicom(real, head):
        return _preview_dicom(real)
    if _is_binary(head):
        raise ToolError(f"'{real.name}' is a binary file of a kind preview_files does not "
                        f"know ({suffix or 'no extension'}, {_size(st.st_size)})")
    if suffix in TABLE_SUFFIXES:
        return _preview_table(real, head, "\t" if suffix == ".tsv" else ",", budget)
    if suffix in (".json", ".jsonl"):
        return _preview_json(real, st.st_size, budget)
    delim = redaction.sniff_delimiter(head[:65536].decode("utf-8", errors="replace"))
    if suffix in (".txt", "") and delim in ("\t", ","):
        return _preview_table(real, head, delim, budget)
    return _preview_text(head, st.st_size, budget)


class PreviewFiles(JailedTool):
    name: str = "preview_files"
    description: str = (f"Preview up to {MAX_PATHS} files of the dataset or workspace by kind: "
                        f"CSV/TSV/Excel header + first {PREVIEW_ROWS} rows + row count "
                        f"(identifier columns redacted); JSON first {PREVIEW_ROWS} items + "
                        f"count; text first words + word count; images, NIfTI, NRRD/MHA, DICOM "
                        f"and numpy files: header only (shape, dtype, spacing, technical DICOM "
                        f"tags), never pixel values or patient data.")
    args_schema: type[BaseModel] = PathsArgs

    def execute(self, paths: list[str]) -> dict:
        paths = path_list(paths)
        jail, budget = self.jail, PREVIEW_BUDGET // len(paths)
        out, names = [], []
        for name in paths:
            try:
                real = jail.resolve(name, write=False)
                st = _regular(real, name)
                item = {"path": jail.virtual(real), "size": _size(st.st_size),
                        **preview_one(real, st, budget)}
            except ToolError as exc:
                if len(paths) == 1:
                    raise
                out.append({"path": name, "error": str(exc)})
                continue
            out.append(item)
            names.append(item["path"])
        if names:
            self.ctx.note_summarised(*names)
        return bounded({"notice": NOTICE, "files": out}, RESULT_BUDGET)

    def summarise(self, result: dict) -> str:
        return ", ".join(f"{f['path']}: {f.get('kind', 'error')}" for f in result["files"])
