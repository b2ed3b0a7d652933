"""Segmentation networks (MONAI, by name, 2D or 3D) wrapped for the Transformers Trainer.

``forward(pixel_values, labels=None) -> {"loss", "logits"}`` with ``DiceCELoss`` (softmax over
``out_channels`` classes, background included; integer masks of shape (B, 1, *spatial)).
``pretrained_path`` loads a local state dict, keeping only keys whose shapes match (a different
number of input channels or classes leaves those layers freshly initialised); never downloads.
"""
from __future__ import annotations

from pathlib import Path

import torch
from monai.losses import DiceCELoss
from monai.networks import nets
from torch import nn

NETWORKS = {
    # small CPU default: ~0.1-0.3 s a step of 4 patches of 32x32x16 on 2 CPU cores
    "unet_small": lambda sd, ic, oc: nets.UNet(
        spatial_dims=sd, in_channels=ic, out_channels=oc, channels=(8, 16, 32, 64),
        strides=(2, 2, 2), num_res_units=1),
    "unet": lambda sd, ic, oc: nets.UNet(
        spatial_dims=sd, in_channels=ic, out_channels=oc, channels=(32, 64, 128, 256, 320),
        strides=(2, 2, 2, 2), num_res_units=2, dropout=0.1),
    "segresnet": lambda sd, ic, oc: nets.SegResNet(
        spatial_dims=sd, in_channels=ic, out_channels=oc, init_filters=16,
        blocks_down=(1, 2, 2, 4), blocks_up=(1, 1, 1), dropout_prob=0.1),
}
DEFAULT_CPU, DEFAULT_GPU = "unet_small", "segresnet"
# how many times each network halves the patch: ROI sides must be multiples of this
DOWNSAMPLING = {"unet_small": 8, "unet": 16, "segresnet": 8}


class SegmentationModel(nn.Module):
    def __init__(self, network: str, spatial_dims: int, in_channels: int, out_channels: int,
                 pretrained_path: str | None = None):
        super().__init__()
        if network not in NETWORKS:
            raise ValueError(f"unknown network {network!r}; choose one of {sorted(NETWORKS)}")
        self.net = NETWORKS[network](spatial_dims, in_channels, out_channels)
        self.num_classes = out_channels
        self.loss = DiceCELoss(to_onehot_y=True, softmax=True, batch=True)
        if pretrained_path:
            self.load_pretrained(pretrained_path)

    def load_pretrained(self, path: str) -> dict:
        """Load the shape-matching part of a local state dict (or ``{"state_dict": ...}``)."""
        file = Path(path)
        if file.suffix == ".safetensors":
            from safetensors.torch import load_file
            state = load_file(str(file))
        else:
            state = torch.load(file, map_location="cpu", weights_only=True)
            state = state.get("state_dict", state)
        own = self.net.state_dict()
        state = {k.removeprefix("net."): v for k, v in state.items()}
        usable = {k: v for k, v in state.items() if k in own and own[k].shape == v.shape}
        if not usable:
            raise ValueError(f"no weights in {path} fit the network (check the network name)")
        self.net.load_state_dict(usable, strict=False)
        return {"loaded": len(usable), "of": len(own)}

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor | None = None, **_):
        logits = self.net(pixel_values)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = self.loss(logits, labels)
        return out
