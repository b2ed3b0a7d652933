"""What an uploaded file is, read from its first bytes rather than its name: "report.pdf is a
PDF document". The Models page's inference accepts PNG, JPEG, DICOM and NIfTI; anything else is
named, with what to do instead.

NIfTI headers are recognised by nibabel, DICOM by its ``DICM`` marker (as pydicom's
``is_dicom``), Office documents by the folders inside their zip; the rest by the signatures
their formats begin with.

May import: nothing of the project.
"""
from __future__ import annotations

import io
import zipfile
import zlib
from dataclasses import dataclass

HEAD = 64 * 1024  # enough bytes for every signature below (a zip's names come from its end)

IMAGE = "image"            # accepted: a PNG, JPEG, DICOM or NIfTI file
DOCUMENT = ("Upload the image itself, exported from the viewer or PACS as DICOM or saved as "
            "PNG, not a report or document.")
PICTURE = "Save it as PNG (or JPEG) in an image viewer and upload that."
VOLUME = ("Convert it to NIfTI (.nii.gz), e.g. with 3D Slicer or SimpleITK, and upload that.")
ARCHIVE = "Unpack it and upload the image files inside."


@dataclass(frozen=True)
class FileKind:
    """``text`` names the kind with its article ("a PDF document"); ``suffix`` is the one to
    save an accepted image under; ``advice`` says what to do with a refused one."""
    key: str
    text: str
    suffix: str = ""
    advice: str = ""

    @property
    def accepted(self) -> bool:
        return bool(self.suffix)


PNG = FileKind("png", "a PNG image", ".png")
JPEG = FileKind("jpeg", "a JPEG image", ".jpg")
DICOM = FileKind("dicom", "a DICOM file", ".dcm")
NIFTI = FileKind("nifti", "a NIfTI volume", ".nii")
NIFTI_GZ = FileKind("nifti", "a compressed NIfTI volume", ".nii.gz")

SIGNATURES: tuple[tuple[int, bytes, FileKind], ...] = (
    (0, b"%PDF", FileKind("pdf", "a PDF document", advice=DOCUMENT)),
    (0, b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
     FileKind("office", "an older Microsoft Office document (.doc, .xls or .ppt)",
              advice=DOCUMENT)),
    (0, b"{\\rtf", FileKind("rtf", "an RTF text document", advice=DOCUMENT)),
    (0, b"GIF8", FileKind("gif", "a GIF image", advice=PICTURE)),
    (0, b"II*\x00", FileKind("tiff", "a TIFF image", advice=PICTURE)),
    (0, b"MM\x00*", FileKind("tiff", "a TIFF image", advice=PICTURE)),
    (0, b"\x00\x00\x00\x0cjP  ", FileKind("jp2", "a JPEG 2000 image", advice=PICTURE)),
    (0, b"NRRD", FileKind("nrrd", "an NRRD volume", advice=VOLUME)),
    (0, b"ObjectType", FileKind("mha", "a MetaImage volume (.mha/.mhd)", advice=VOLUME)),
    (0, b"\x93NUMPY", FileKind("npy", "a NumPy array file (.npy)", advice=VOLUME)),
    (0, b"7z\xbc\xaf\x27\x1c", FileKind("7z", "a 7-Zip archive", advice=ARCHIVE)),
    (0, b"Rar!", FileKind("rar", "a RAR archive", advice=ARCHIVE)),
)
ZIP_CONTENTS = (("word/", "a Word document (.docx)", DOCUMENT),
                ("xl/", "an Excel workbook (.xlsx)", DOCUMENT),
                ("ppt/", "a PowerPoint presentation (.pptx)", DOCUMENT))


def _nifti(head: bytes) -> str:
    """"single" (a .nii, header and pixels), "pair" (the .hdr of a .hdr/.img pair) or ""."""
    import nibabel as nib
    try:
        if nib.Nifti2Header.may_contain_header(head):
            return "single" if head[4:7] == b"n+2" else "pair"
        if nib.Nifti1Header.may_contain_header(head):
            return "single" if head[344:347] == b"n+1" else "pair"
    except (ValueError, TypeError):
        pass
    return ""


def _gunzip_head(data: bytes) -> bytes:
    try:
        return zlib.decompressobj(wbits=31).decompress(data[:HEAD], 1024)
    except zlib.error:
        return b""


def _zip_kind(data: bytes) -> FileKind:
    try:
        names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        names = []
    for folder, text, advice in ZIP_CONTENTS:
        if any(n.startswith(folder) for n in names):
            return FileKind("office", text, advice=advice)
    return FileKind("zip", "a zip archive", advice=ARCHIVE)


def _text_kind(head: bytes) -> FileKind | None:
    if b"\x00" in head:
        return None
    for cut in range(4):  # the head may end inside a multi-byte character
        try:
            text = head[:len(head) - cut].decode("utf-8")
            break
        except UnicodeDecodeError:
            continue
    else:
        return None
    start = text.lstrip().lower()
    if start.startswith(("<!doctype html", "<html")):
        return FileKind("html", "a web page (HTML)", advice=DOCUMENT)
    if start.startswith(("<?xml", "<svg")):
        return FileKind("xml", "an XML or SVG file", advice=DOCUMENT)
    if start.startswith(("{", "[")):
        return FileKind("json", "a JSON text file", advice=DOCUMENT)
    return FileKind("text", "a text file", advice=DOCUMENT)


def sniff(data: bytes) -> FileKind:
    """The kind of file ``data`` is, from its first bytes."""
    head = data[:HEAD]
    if not head:
        return FileKind("empty", "empty (0 bytes)", advice="Upload the image file itself.")
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return PNG
    if head.startswith(b"\xff\xd8\xff"):
        return JPEG
    if head[128:132] == b"DICM":
        return DICOM
    nifti = _nifti(head)
    if nifti:
        return NIFTI if nifti == "single" else FileKind(
            "nifti-pair", "the header half of a NIfTI .hdr/.img pair",
            advice="Save the volume as one .nii or .nii.gz file (e.g. in 3D Slicer) and "
                   "upload that.")
    if head.startswith(b"\x1f\x8b"):
        inner = _gunzip_head(data)
        if _nifti(inner) == "single":
            return NIFTI_GZ
        return FileKind("gzip", "a gzip-compressed file that is not a NIfTI volume",
                        advice=ARCHIVE)
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return _zip_kind(data)
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in (b"heic", b"heix", b"mif1", b"msf1", b"hevc", b"avif"):
            return FileKind("heic", "a HEIC/AVIF photo (a phone camera format)", advice=PICTURE)
        return FileKind("video", "a video (MP4/MOV)",
                        advice="Export the frame you want as PNG and upload that.")
    if head[:2] == b"BM" and len(head) >= 18 and \
            int.from_bytes(head[14:18], "little") in (12, 40, 52, 56, 64, 108, 124):
        return FileKind("bmp", "a BMP image", advice=PICTURE)
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return FileKind("webp", "a WebP image", advice=PICTURE)
    for offset, signature, kind in SIGNATURES:
        if head[offset:offset + len(signature)] == signature:
            return kind
    return _text_kind(head) or FileKind(
        "unknown", "a file of no known format (its first bytes match no image or document "
                   "format)", advice="")
