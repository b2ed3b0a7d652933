"""The generality check's public-dataset layouts (bench/generality, written from each dataset's
documentation by someone who had not read the readers) stay read correctly: each case that
reads right today is registered through the CLI exactly as the bench does it and must still
be read right. A case that starts reading right is added to READ_RIGHT (a ratchet)."""
from __future__ import annotations

import pytest

from bench.generality.run import cases_for, register_case

pytestmark = [pytest.mark.slow]

READ_RIGHT = {
    # batch 1 (first run, before any fix: 0/10)
    "nih_cxr14", "rsna_pneumonia", "luna16", "brats2021", "acdc", "montgomery_tb", "ham10000",
    "busi", "picai", "roco",
    # batch 2 (first run: 2/10)
    "kermany_pneumonia", "aptos2019", "padchest", "deeplesion", "ct_rate", "totalsegmentator",
    "siim_acr_ptx", "drive", "oasis1",
    # batch 3 (first run: 0/10)
    "cvc_clinicdb", "node21", "fracatlas", "camus", "mura", "odir5k", "stoic2021", "isles2022",
    # batch 4 (first run: 1/10)
    "rsna_mammo", "covid_radiography", "idrid_seg", "hc18", "bccd", "mosmeddata", "siim_covid",
    "rsna_mgmt",
    # batch 5 (first run: 1/10)
    "panda", "isic2020", "pddca", "object_cxr", "rfmid",
}
CASES = [c for c in cases_for("all") if c.key in READ_RIGHT]


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    return tmp_path_factory.mktemp("generality-data"), tmp_path_factory.mktemp("gen-home")


@pytest.mark.parametrize("case", CASES, ids=[c.key for c in CASES])
def test_a_public_layout_is_still_read_right(places, case):
    data, home = places
    result = register_case(case, data, home, seed=0)
    assert result["verdict"] == "correct", (result.get("verdict"), result.get("reason"))
