"""MVFA: multi-level visual feature adaptation of a frozen local CLIP for medical anomaly
detection and localisation (zero-shot and few-shot). See ``model.py`` and ``train.py``."""
