"""Safe zip extraction (core.datasets.uploads) against crafted malicious zips: zip-slip, links, special
files, bombs (central directory and streaming), lying headers, damaged and encrypted entries.
After every refusal nothing remains under <home>/datasets/uploads and nothing outside it."""
from __future__ import annotations

import io
import os
import stat
import struct
import zipfile
from pathlib import Path

import pytest

from core.datasets.uploads import (MiB, UploadError, UploadLimits, _stream, extract_zip, member_path,
                          remove_upload, unregistered_uploads, uploads_dir)
from tests.conftest import tree_digest

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010800000000"
                    "3a7e9b550000000a49444154789c6360000000020001e221bc330000000049454e44ae426082")


def make_zip(entries: list[tuple], compression=zipfile.ZIP_DEFLATED) -> bytes:
    """entries: (name, data) or (ZipInfo, data)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return buffer.getvalue()


def unix_info(name: str, mode: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = mode << 16
    return info


def patch_headers(data: bytes, entry: int, **fields) -> bytes:
    """Rewrite fields of one entry in both its local header and its central directory record:
    flags, crc, compress_size, file_size."""
    data = bytearray(data)
    local = {"flags": (6, "<H"), "crc": (14, "<I"), "compress_size": (18, "<I"),
             "file_size": (22, "<I")}
    central = {"flags": (8, "<H"), "crc": (16, "<I"), "compress_size": (20, "<I"),
               "file_size": (24, "<I")}
    for signature, table in ((b"PK\x03\x04", local), (b"PK\x01\x02", central)):
        pos = -1
        for _ in range(entry + 1):
            pos = data.index(signature, pos + 1)
        for key, value in fields.items():
            offset, fmt = table[key]
            struct.pack_into(fmt, data, pos + offset, value)
    return bytes(data)


def leftovers(settings) -> list[str]:
    folder = uploads_dir(settings)
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def refused(settings, data: bytes, match: str, limits: UploadLimits | None = None,
            name: str = "bad data") -> UploadError:
    with pytest.raises(UploadError, match=match) as info:
        extract_zip(io.BytesIO(data), settings, name, limits)
    assert leftovers(settings) == [], "a refused upload must leave nothing behind"
    return info.value


# ------------------------------------------------------------------------------ good zips
def test_good_zip_unpacks_byte_identical_with_single_top_folder_as_root(settings, tmp_path):
    src = tmp_path / "chest"
    for label in ("NORMAL", "PNEUMONIA"):
        (src / label).mkdir(parents=True)
        for i in range(3):
            (src / label / f"patient{i}_{label}.png").write_bytes(PNG + bytes([i]))
    archive = tmp_path / "chest.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(src.rglob("*")):
            zf.write(path, Path("chest") / path.relative_to(src))
        zf.writestr("__MACOSX/chest/._NORMAL", b"resource fork")
        zf.writestr("chest/.DS_Store", b"finder")
    out = extract_zip(archive, settings, "Ward chest X-ray")
    assert out.folder == uploads_dir(settings) / "Ward_chest_X-ray"
    assert out.dataset_root == out.folder / "chest"
    assert tree_digest(out.dataset_root) == tree_digest(src)
    assert out.files == 6 and out.bytes == sum(p.stat().st_size for p in src.rglob("*.png"))
    assert sorted(out.skipped) == ["__MACOSX/chest/._NORMAL", "chest/.DS_Store"]
    assert [p.name for p in uploads_dir(settings).iterdir()] == ["Ward_chest_X-ray"]
    modes = {stat.S_IMODE(p.stat().st_mode) & 0o111 for p in out.folder.rglob("*.png")}
    assert modes == {0}, "unpacked files are never executable"


def test_zip_without_top_folder_is_its_own_root(settings):
    out = extract_zip(io.BytesIO(make_zip([("A/x.png", PNG), ("B/y.png", PNG)])), settings,
                      "flat")
    assert out.dataset_root == out.folder
    assert sorted(p.name for p in out.folder.iterdir()) == ["A", "B"]


# ------------------------------------------------------------------------------ zip-slip
@pytest.mark.parametrize("name, match", [
    ("../evil.png", r"outside the dataset folder"),
    ("data/../../evil.png", r"outside the dataset folder"),
    ("..\\evil.png", r"outside the dataset folder"),
    ("/tmp/evil.png", r"absolute path"),
    ("C:\\evil.png", r"absolute path"),
    ("C:/evil.png", r"absolute path"),
    ("\\\\server\\share\\evil.png", r"absolute path"),
    ("data/evil\x01.png", r"control characters"),
])
def test_zip_slip_names_are_refused(settings, tmp_path, name, match):
    data = make_zip([("data/ok.png", PNG), (zipfile.ZipInfo(name), PNG)])
    refused(settings, data, match)
    assert not list(tmp_path.rglob("evil*")), "nothing may be written outside the uploads"
    assert not list(settings.home.rglob("evil*"))


@pytest.mark.parametrize("kind, mode, match", [
    ("symlink", stat.S_IFLNK | 0o777, r"symbolic link"),
    ("fifo", stat.S_IFIFO | 0o644, r"special file"),
    ("device", stat.S_IFCHR | 0o644, r"special file"),
])
def test_links_and_special_files_are_refused(settings, kind, mode, match):
    data = make_zip([("data/ok.png", PNG), (unix_info(f"data/{kind}", mode), "/etc/passwd")])
    refused(settings, data, match)


def test_member_path_rules():
    assert str(member_path("a/./b//c.png")) == "a/b/c.png"
    assert member_path("__MACOSX/a/._b.png") is None
    assert member_path("a/.DS_Store") is None
    assert member_path("./") is None
    with pytest.raises(UploadError):
        member_path("a/" + "x" * 256 + ".png")


# ------------------------------------------------------------------------------ bombs
def test_ratio_bomb_is_refused_from_the_central_directory(settings):
    data = make_zip([("data/ok.png", PNG), ("data/zeros.nii", bytes(20 * MiB))])
    assert len(data) < 100_000  # ~1000:1
    error = refused(settings, data, r"expands .* times .*zip-bomb guard")
    assert "data/zeros.nii" in str(error)


def test_ratio_limit_is_configurable(settings):
    data = make_zip([("data/ok.png", PNG), ("data/zeros.nii", bytes(4 * MiB))])
    out = extract_zip(io.BytesIO(data), settings, "genuine masks",
                      UploadLimits(max_ratio=5000))
    assert (out.dataset_root / "zeros.nii").stat().st_size == 4 * MiB


def test_total_unpacked_size_is_refused_from_the_central_directory(settings):
    blob = os.urandom(MiB)  # incompressible: ratio 1
    data = make_zip([(f"data/{i}.bin", blob) for i in range(3)], zipfile.ZIP_STORED)
    refused(settings, data, r"unpacks to more than 2\.0 MB",
            UploadLimits(max_unpacked_bytes=2 * MiB))


def test_too_many_entries_is_refused(settings):
    data = make_zip([(f"data/{i}.png", PNG) for i in range(6)])
    refused(settings, data, r"6 entries, more than the limit of 5", UploadLimits(max_files=5))


def test_oversized_zip_is_refused_before_reading(settings):
    data = make_zip([("data/a.bin", os.urandom(300_000))], zipfile.ZIP_STORED)
    refused(settings, data, r"over the .* limit", UploadLimits(max_zip_bytes=100_000))


def test_lying_central_directory_is_caught_while_streaming(settings):
    """The directory says 1,000 bytes; the entry inflates to 3 MB. Streaming never writes more
    than the declared size, the CRC check fails, and the partial folder is removed."""
    data = make_zip([("data/a.png", PNG), ("data/b.bin", bytes(3 * MiB))])
    data = patch_headers(data, 1, file_size=1000)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert zf.getinfo("data/b.bin").file_size == 1000  # passes the directory checks
    refused(settings, data, r"damaged \(Bad CRC-32 for file 'data/b.bin'\)|inflates to more")


def test_streaming_counts_the_bytes_really_inflated(settings, tmp_path):
    """The streaming guard stops at the unpacked budget however the archive is labelled."""
    data = make_zip([("b.bin", os.urandom(3 * MiB))], zipfile.ZIP_STORED)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        info = zf.getinfo("b.bin")
        target = tmp_path / "out.bin"
        budget = [9 * MiB]  # already used by earlier entries
        with pytest.raises(UploadError, match="unpacks to more than"):
            _stream(zf, info, target, budget, UploadLimits(max_unpacked_bytes=10 * MiB))
        assert budget[0] <= 10 * MiB + MiB  # stopped within one chunk of the limit
        target.unlink()
        with pytest.raises(UploadError, match="expands more than"):
            _stream(zf, info, target, [0], UploadLimits(max_ratio=0.5))


# ------------------------------------------------------------------------------ damaged zips
def test_not_a_zip_is_refused(settings):
    refused(settings, b"name,label\na.png,1\n" * 10, r"not a readable zip")


def test_empty_file_is_refused(settings):
    refused(settings, b"", r"empty")


def test_zip_with_no_files_is_refused(settings):
    refused(settings, make_zip([("data/", b""), ("__MACOSX/x", b"y")]), r"holds no files")


def test_encrypted_entry_is_refused(settings):
    data = patch_headers(make_zip([("data/a.png", PNG)]), 0, flags=0x1)
    refused(settings, data, r"encrypted")


def test_duplicate_entries_are_refused(settings):
    with pytest.warns(UserWarning, match="Duplicate name"):
        data = make_zip([("data/a.png", PNG), ("data/a.png", PNG + b"x")])
    refused(settings, data, r"appears twice")


def test_corrupt_second_entry_leaves_nothing(settings):
    """The first entry is written before the second fails its CRC: the partial folder goes."""
    data = make_zip([("data/a.png", PNG), ("data/b.png", PNG + b"more")],
                    zipfile.ZIP_STORED)
    data = patch_headers(data, 1, crc=0xDEADBEEF)
    refused(settings, data, r"damaged \(Bad CRC-32 for file 'data/b.png'\)")


def test_existing_upload_name_is_refused_and_kept(settings):
    data = make_zip([("data/a.png", PNG)])
    first = extract_zip(io.BytesIO(data), settings, "same")
    before = tree_digest(first.folder)
    with pytest.raises(UploadError, match="already exists"):
        extract_zip(io.BytesIO(make_zip([("data/other.png", PNG)])), settings, "same")
    assert tree_digest(first.folder) == before
    assert leftovers(settings) == ["same"]


def test_bad_name_is_refused(settings):
    refused(settings, make_zip([("data/a.png", PNG)]), r"name must be", name="../up")


# ------------------------------------------------------------------------------ housekeeping
def test_remove_upload_only_removes_upload_folders(settings, tmp_path):
    out = extract_zip(io.BytesIO(make_zip([("data/a.png", PNG)])), settings, "keep me")
    outside = tmp_path / "outside"
    outside.mkdir()
    with pytest.raises(UploadError, match="not an upload folder"):
        remove_upload(settings, outside)
    with pytest.raises(UploadError):
        remove_upload(settings, out.dataset_root)  # inside an upload, not the upload itself
    assert outside.is_dir() and out.dataset_root.is_dir()
    assert unregistered_uploads(settings, []) == [out.folder]
    assert unregistered_uploads(settings, [str(out.dataset_root)]) == []
    assert remove_upload(settings, out.folder) and leftovers(settings) == []
