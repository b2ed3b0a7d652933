"""The records reading through the CLI: ``crew register --json`` lists every target a
one-column-per-finding table offers, with coverage and class counts; a recipe file with a
corrected value map (uncertain = the finding, the "U-Ones" policy) or a corrected field role
changes the card without code; a broken recipe gets a clear error and writes nothing."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.demo.record_families import RECORD_BY_NAME

REPO = Path(__file__).resolve().parents[1]


def _crew(home: Path, *args: str) -> tuple[int, dict]:
    env = {**os.environ, "M3B_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "crew", *args, "--home", str(home), "--json"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture(scope="module")
def chexpert(tmp_path_factory):
    family = RECORD_BY_NAME["chexpert_table"]
    return family.generate(tmp_path_factory.mktemp("cxp") / family.folder, scale=0.25)


def test_register_json_lists_every_finding_target_and_a_recipe_edit_changes_the_card(
        chexpert, tmp_path):
    home = tmp_path / "home"
    code, result = _crew(home, "register", str(chexpert), "--name", "CXP",
                         "--description", "Chest X-rays with one column per finding")
    assert code == 0 and result["status"] == "registered", result
    targets = {t["name"]: t for t in result["targets"]}
    for finding in ("Pleural Effusion", "Cardiomegaly", "Edema", "Atelectasis"):
        assert finding in targets, sorted(targets)
        t = targets[finding]
        assert 0 < t["coverage"] <= 1 and t["classes"] == [finding, f"no {finding}"]
        assert t["recipe"]["role"] == "finding" and t["recipe"]["fields"] == [finding]
    assert "findings" in targets and targets["findings"]["multi_label"]
    # no demographic, view or id field is offered as a target
    assert not {"Sex", "Age", "Frontal/Lateral", "AP/PA", "Path"} & set(targets)
    card = json.loads(Path(result["datacard_path"]).read_text())
    assert len(card["targets"]) == len(result["targets"])

    cardio = targets["Cardiomegaly"]
    before = cardio["class_counts"]["Cardiomegaly"]
    recipe = dict(cardio["recipe"], values=dict(cardio["recipe"]["values"],
                                                uncertain="Cardiomegaly"))
    path = tmp_path / "u_ones.json"
    path.write_text(json.dumps(recipe))
    code, edited = _crew(home, "register", str(chexpert), "--name", "CXP U-Ones",
                         "--recipe", str(path))
    assert code == 0 and edited["status"] == "registered", edited
    card = json.loads(Path(edited["datacard_path"]).read_text())
    assert card["class_counts"]["Cardiomegaly"] > before      # the uncertain rows joined
    assert [t["recipe"]["values"]["uncertain"] for t in card["targets"]] == ["Cardiomegaly"]

    # a corrected role: the Sex field read as the class (not offered by default)
    role = dict(cardio["recipe"], role="class", fields=["Sex"], values={}, name="Sex")
    path.write_text(json.dumps(role))
    code, by_sex = _crew(home, "register", str(chexpert), "--name", "CXP sex",
                         "--recipe", str(path))
    assert code == 0, by_sex
    card = json.loads(Path(by_sex["datacard_path"]).read_text())
    assert sorted(card["classes"]) == ["Female", "Male"]


def test_a_broken_recipe_is_refused_with_its_reason_and_nothing_saved(chexpert, tmp_path):
    home = tmp_path / "home"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"source": "CheXpert-v1.0-small/train.csv",
                                "image_field": "Path", "role": "finding",
                                "fields": ["Pleural Efusion"]}))
    code, result = _crew(home, "register", str(chexpert), "--name", "Bad", "--recipe",
                         str(path))
    assert code != 0 and result["status"] == "invalid"
    assert "Pleural Efusion" in result["errors"][0]
    assert not list((home / "datacards").glob("Bad*.json"))
    path.write_text(json.dumps({"source": "x.csv", "role": "guess"}))
    code, result = _crew(home, "register", str(chexpert), "--name", "Bad", "--recipe",
                         str(path))
    assert code != 0 and "image_field" in json.dumps(result)
