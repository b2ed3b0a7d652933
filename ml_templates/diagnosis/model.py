"""Diagnosis networks (MONAI, by name) wrapped for the Transformers Trainer.

``forward(pixel_values, labels=None) -> {"loss", "logits"}``; class weights counter imbalance;
multi-label targets use BCE. ``pretrained_path`` loads a local state dict (no downloads).

``temperature`` (a saved buffer, 1 while training) is the calibration fitted on validation after
training; ``Probabilities`` — the inference and exported form — divides the logits by it.
"""
from __future__ import annotations

from pathlib import Path

import torch
from monai.networks import nets
from torch import nn

NETWORKS = {
    # small default: trains in about a minute on 2 CPU cores at 96x96
    "densenet_small": lambda sd, ic, oc: nets.DenseNet(
        spatial_dims=sd, in_channels=ic, out_channels=oc, init_features=16, growth_rate=12,
        block_config=(3, 6, 6), dropout_prob=0.1),
    "densenet121": lambda sd, ic, oc: nets.DenseNet121(spatial_dims=sd, in_channels=ic,
                                                       out_channels=oc),
    "resnet18": lambda sd, ic, oc: nets.resnet18(spatial_dims=sd, n_input_channels=ic,
                                                 num_classes=oc),
    "resnet50": lambda sd, ic, oc: nets.resnet50(spatial_dims=sd, n_input_channels=ic,
                                                 num_classes=oc),
    "efficientnet-b0": lambda sd, ic, oc: nets.EfficientNetBN(
        "efficientnet-b0", pretrained=False, spatial_dims=sd, in_channels=ic, num_classes=oc),
}
DEFAULT_CPU, DEFAULT_GPU = "densenet_small", "densenet121"


class DiagnosisModel(nn.Module):
    def __init__(self, network: str, spatial_dims: int, in_channels: int, num_classes: int,
                 multi_label: bool = False, class_weights: list[float] | None = None,
                 pretrained_path: str | None = None):
        super().__init__()
        if network not in NETWORKS:
            raise ValueError(f"unknown network {network!r}; choose one of {sorted(NETWORKS)}")
        self.net = NETWORKS[network](spatial_dims, in_channels, num_classes)
        self.multi_label = multi_label
        weights = torch.tensor(class_weights, dtype=torch.float32) if class_weights else None
        self.register_buffer("class_weights",
                             weights if weights is not None else torch.ones(num_classes))
        self.register_buffer("temperature", torch.ones(()))
        self.register_load_state_dict_pre_hook(_uncalibrated_default)
        if pretrained_path:
            self.load_pretrained(pretrained_path)

    def load_pretrained(self, path: str) -> None:
        state = torch.load(Path(path), map_location="cpu", weights_only=True)
        state = state.get("state_dict", state)
        own = self.net.state_dict()
        usable = {k: v for k, v in state.items() if k in own and own[k].shape == v.shape}
        if not usable:
            raise ValueError(f"no weights in {path} fit the network (check the network name)")
        self.net.load_state_dict(usable, strict=False)

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor | None = None, **_):
        logits = self.net(pixel_values)
        out = {"logits": logits}
        if labels is not None:
            if self.multi_label:
                out["loss"] = nn.functional.binary_cross_entropy_with_logits(
                    logits, labels.float(), pos_weight=self.class_weights)
            else:
                out["loss"] = nn.functional.cross_entropy(logits, labels,
                                                          weight=self.class_weights)
        return out


def _uncalibrated_default(module, state_dict, prefix, *_):
    """Models saved before calibration existed load with temperature 1."""
    state_dict.setdefault(prefix + "temperature", torch.ones(()))


class Probabilities(torch.nn.Module):
    """The exported form: images in, class probabilities out."""

    def __init__(self, model: DiagnosisModel):
        super().__init__()
        self.model = model

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        logits = self.model(pixel_values=pixel_values)["logits"] / self.model.temperature
        return torch.sigmoid(logits) if self.model.multi_label else torch.softmax(logits, dim=1)
