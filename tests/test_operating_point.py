"""Operating points (core.evaluation.operating_point): the rule read from plain words, the
threshold chosen on validation scores (Youden's J or a target rate), and the decision's rates on
test data agreeing with scikit-learn's confusion matrix. The case that opened issue 13 (a
perfect ranking whose probabilities all sit above 0.5, so argmax says one class for every case)
gets its accuracy back from the threshold."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import confusion_matrix

from core.evaluation.operating_point import (OperatingPointError, Rule, choose_threshold,
                                             decision_rates, operating_point, parse_rule,
                                             positive_index)


@pytest.mark.parametrize("text,rule", [
    (None, Rule()), ("", Rule()), ("youden", Rule()),
    ("at 95% sensitivity", Rule("sensitivity", 0.95)),
    ("at 95 % sensitivity", Rule("sensitivity", 0.95)),
    ("sensitivity 0.9", Rule("sensitivity", 0.9)),
    ("90% specificity please", Rule("specificity", 0.9)),
    ("specificity of at least 98%", Rule("specificity", 0.98)),
    ("recall 80", Rule("sensitivity", 0.8))])
def test_rules_are_read_from_plain_words(text, rule):
    assert parse_rule(text) == rule


def test_unreadable_rules_say_what_to_write():
    with pytest.raises(OperatingPointError, match="at 95% sensitivity"):
        parse_rule("make it good")
    with pytest.raises(OperatingPointError, match="not a rate"):
        parse_rule("sensitivity 150%")


def test_the_positive_class_is_the_finding_not_the_normal():
    assert positive_index(["NORMAL", "PNEUMONIA"]) == 1
    assert positive_index(["malignant", "normal or benign"]) == 0
    assert positive_index(["No DR", "Referable DR"]) == 1
    assert positive_index(["AD", "CN"]) == 0
    assert positive_index(["cat", "dog"]) == 1           # neither: the second
    with pytest.raises(OperatingPointError, match="two classes"):
        positive_index(["a", "b", "c"])


def test_youden_and_target_rates_on_known_scores():
    y = np.array([0, 0, 0, 0, 1, 0, 1, 1, 1, 1])
    s = np.array([.1, .2, .3, .4, .45, .5, .6, .7, .8, .9])
    t = choose_threshold(y, s)                           # J = 0.8 at 0.6 (and at 0.45)
    assert decision_rates(y, s, t)["sensitivity"] - (1 - decision_rates(y, s, t)[
        "specificity"]) == pytest.approx(0.8)
    assert .4 < t < .6 and not np.any(np.isclose(s, t))  # never on a validation score
    high = choose_threshold(y, s, Rule("sensitivity", 1.0))
    assert decision_rates(y, s, high)["sensitivity"] == 1.0 and .4 < high < .45
    strict = choose_threshold(y, s, Rule("specificity", 1.0))
    assert decision_rates(y, s, strict)["specificity"] == 1.0 and .5 < strict <= .6
    with pytest.raises(OperatingPointError, match="one class only"):
        choose_threshold(np.ones(4), np.linspace(0, 1, 4))


def test_rates_agree_with_sklearn():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    s = np.clip(y * 0.3 + rng.normal(0.4, 0.2, 200), 0, 1)
    rates = decision_rates(y, s, 0.55)
    tn, fp, fn, tp = confusion_matrix(y, s >= 0.55).ravel()
    assert rates == pytest.approx({"sensitivity": tp / (tp + fn), "specificity": tn / (tn + fp),
                                   "ppv": tp / (tp + fp), "npv": tn / (tn + fn),
                                   "accuracy": (tp + tn) / 200})


def test_a_perfect_ranking_above_one_half_gets_its_accuracy_from_the_threshold():
    """Issue 13's case: AUC 1.0, every probability > 0.5, argmax accuracy 0.5."""
    rng = np.random.default_rng(1)
    val_y, test_y = np.repeat([0, 1], 10), np.repeat([0, 1], 15)
    val_s = np.where(val_y == 1, rng.uniform(.8, .9, 20), rng.uniform(.6, .7, 20))
    test_s = np.where(test_y == 1, rng.uniform(.8, .9, 30), rng.uniform(.6, .7, 30))
    assert ((test_s >= .5) == test_y).mean() == .5
    point = operating_point(val_y, val_s, test_y, test_s)
    assert .7 < point["threshold"] < .8 and point["rule"] == "youden"
    assert point["test"] == {"sensitivity": 1.0, "specificity": 1.0, "ppv": 1.0, "npv": 1.0,
                             "accuracy": 1.0}
    assert point["ci95"]["accuracy"] == [1.0, 1.0]
    target = operating_point(val_y, val_s, test_y, test_s, parse_rule("at 95% sensitivity"))
    assert target["validation"]["sensitivity"] >= .95 and target["target"] == .95
    assert "95%" in target["rule_text"]
