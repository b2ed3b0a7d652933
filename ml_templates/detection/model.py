"""Detection networks (MONAI RetinaNet, 2D and 3D) by name, wrapped for the Transformers Trainer.

* ``build_detector(...)`` -> MONAI ``RetinaNetDetector``: a ``RetinaNet`` on a ResNet-FPN
  feature extractor, anchors from ``AnchorGeneratorWithAnchorShape``, the ATSS matcher, a hard
  negative sampler and a GIoU box loss (the settings of MONAI's LUNA16 detection recipe).
* ``DetectionModel``: ``forward(images, targets) -> {"loss", "loss_cls", "loss_box"}`` for the
  Trainer; ``predict(images) -> [{"boxes", "labels", "scores"}]`` in eval mode.
* ``save_detection_model`` / ``load_detection_model``: ``Logout/model/`` = ``config.json`` (all
  that is needed to rebuild the network) + ``model.safetensors``.

Names: ``retinanet_small`` (CPU default: basic ResNet blocks, 2 pyramid levels + pooling, thin
FPN) and ``retinanet_resnet50`` (GPU: bottleneck ResNet-50 via ``resnet_fpn_feature_extractor``).
``pretrained_path`` loads local backbone weights (a ResNet state dict; never downloads).

Without a working torchvision (CPU machines here), MONAI's FPN code lacks two torchvision helpers;
:func:`_torchvision_fallback` supplies equivalents with the same state-dict layout.
"""
from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from monai.apps.detection.networks import retinanet_detector, retinanet_network
from monai.apps.detection.networks.retinanet_detector import RetinaNetDetector
from monai.apps.detection.networks.retinanet_network import RetinaNet, resnet_fpn_feature_extractor
from monai.apps.detection.utils.anchor_utils import AnchorGeneratorWithAnchorShape
from monai.losses.giou_loss import BoxGIoULoss
from monai.networks.blocks import backbone_fpn_utils
from monai.networks.blocks.backbone_fpn_utils import BackboneWithFPN
from monai.networks.nets import resnet
from monai.utils import optional_import
from torch import nn

NETWORKS = {
    "retinanet_small": {"block": "basic", "layers": [1, 2, 1, 1], "inplanes": [16, 32, 64, 128],
                        "returned_layers": [1, 2], "fpn_channels": 32, "conv1_3d": 3},
    "retinanet_resnet50": {"block": "bottleneck", "layers": [3, 4, 6, 3],
                           "inplanes": [64, 128, 256, 512], "returned_layers": [1, 2, 3],
                           "fpn_channels": 256, "conv1_3d": 7},
}
DEFAULT_CPU, DEFAULT_GPU = "retinanet_small", "retinanet_resnet50"


class _LayerGetter(nn.ModuleDict):
    """torchvision's IntermediateLayerGetter: run the children in order, return chosen outputs."""

    def __init__(self, model: nn.Module, return_layers: dict[str, str]):
        wanted, layers = dict(return_layers), OrderedDict()
        for name, module in model.named_children():
            layers[name] = module
            wanted.pop(name, None)
            if not wanted:
                break
        super().__init__(layers)
        self.return_layers = dict(return_layers)

    def forward(self, x):
        out = OrderedDict()
        for name, module in self.items():
            x = module(x)
            if name in self.return_layers:
                out[self.return_layers[name]] = x
        return out


class _Absent:
    """Stands in for torchvision's Matcher/BalancedPositiveNegativeSampler (never used here)."""


def _torchvision_fallback() -> None:
    if optional_import("torchvision.models")[1]:
        return  # a working torchvision: MONAI uses it as is
    backbone_fpn_utils.torchvision_models = SimpleNamespace(
        _utils=SimpleNamespace(IntermediateLayerGetter=_LayerGetter))
    retinanet_network._validate_trainable_layers = (
        lambda pretrained, trainable, max_value, default_value:
        max_value if not pretrained else (default_value if trainable is None else trainable))
    retinanet_detector.Matcher = retinanet_detector.BalancedPositiveNegativeSampler = _Absent


def default_anchor_shapes(spatial_dims: int) -> list[list[float]]:
    return [[s] * spatial_dims for s in (8.0, 12.0, 16.0)]


def _feature_extractor(spec: dict, spatial_dims: int, in_channels: int, pretrained_path):
    backbone = resnet.ResNet(block=spec["block"], layers=spec["layers"],
                             block_inplanes=spec["inplanes"], n_input_channels=in_channels,
                             spatial_dims=spatial_dims, conv1_t_stride=2,
                             conv1_t_size=7 if spatial_dims == 2 else spec["conv1_3d"],
                             feed_forward=False)
    if pretrained_path:
        state = torch.load(Path(pretrained_path), map_location="cpu", weights_only=True)
        state = state.get("state_dict", state)
        own = backbone.state_dict()
        usable = {k.removeprefix("module."): v for k, v in state.items()}
        usable = {k: v for k, v in usable.items() if k in own and own[k].shape == v.shape}
        if not usable:
            raise ValueError(f"no weights in {pretrained_path} fit the backbone")
        backbone.load_state_dict(usable, strict=False)
    if spec["fpn_channels"] == 256:  # MONAI's standard extractor (FPN width 256)
        return resnet_fpn_feature_extractor(backbone, spatial_dims,
                                            pretrained_backbone=bool(pretrained_path),
                                            returned_layers=spec["returned_layers"])
    expansion = 4 if spec["block"] == "bottleneck" else 1  # a thinner FPN for CPU
    layers = spec["returned_layers"]
    return BackboneWithFPN(backbone, {f"layer{k}": str(v) for v, k in enumerate(layers)},
                           [spec["inplanes"][k - 1] * expansion for k in layers],
                           spec["fpn_channels"], spatial_dims=spatial_dims)


def build_detector(network: str, spatial_dims: int, in_channels: int, num_classes: int,
                   anchor_shapes: list[list[float]] | None = None,
                   pretrained_path: str | None = None) -> RetinaNetDetector:
    if network not in NETWORKS:
        raise ValueError(f"unknown network {network!r}; choose one of {sorted(NETWORKS)}")
    _torchvision_fallback()
    spec = NETWORKS[network]
    levels = len(spec["returned_layers"]) + 1  # + the extra max-pooled level
    anchors = AnchorGeneratorWithAnchorShape(
        feature_map_scales=[2 ** i for i in range(levels)],
        base_anchor_shapes=anchor_shapes or default_anchor_shapes(spatial_dims))
    net = RetinaNet(spatial_dims=spatial_dims, num_classes=num_classes,
                    num_anchors=anchors.num_anchors_per_location()[0],
                    feature_extractor=_feature_extractor(spec, spatial_dims, in_channels,
                                                         pretrained_path),
                    size_divisible=2 * 2 * 2 ** max(spec["returned_layers"]))
    detector = RetinaNetDetector(network=net, anchor_generator=anchors)
    detector.set_atss_matcher(num_candidates=4, center_in_gt=False)
    detector.set_hard_negative_sampler(batch_size_per_image=64, positive_fraction=0.3,
                                       pool_size=20, min_neg=16)
    detector.set_target_keys(box_key="boxes", label_key="labels")
    detector.set_box_regression_loss(BoxGIoULoss(reduction="mean"), encode_gt=False,
                                     decode_pred=True)
    detector.set_box_selector_parameters(score_thresh=0.02, topk_candidates_per_level=1000,
                                         nms_thresh=0.22, detections_per_img=100)
    return detector


class DetectionModel(nn.Module):
    """The Trainer's view of a RetinaNetDetector: lists of images and target dicts in, loss out."""

    def __init__(self, config: dict):
        super().__init__()
        self.detector_config = dict(config)  # not "config": the Trainer reads that as an HF config
        self.detector = build_detector(
            config["network"], config["spatial_dims"], config["in_channels"],
            len(config["label_names"]), config.get("anchor_shapes"), config.get("pretrained_path"))

    def forward(self, images: list[torch.Tensor], targets: list[dict]):
        losses = self.detector(images, targets)
        cls, box = losses[self.detector.cls_key], losses[self.detector.box_reg_key]
        return {"loss": cls + box, "loss_cls": cls.detach(), "loss_box": box.detach()}

    @torch.no_grad()
    def predict(self, images: list[torch.Tensor]) -> list[dict]:
        was_training = self.training
        self.eval()
        out = self.detector(images, use_inferer=False)
        self.train(was_training)
        key = self.detector.pred_score_key
        return [{"boxes": o["boxes"].float().cpu(), "labels": o["labels"].long().cpu(),
                 "scores": o[key].float().cpu()} for o in out]


def save_detection_model(model: DetectionModel, out_dir: Path) -> Path:
    from safetensors.torch import save_file
    out_dir.mkdir(parents=True, exist_ok=True)
    config = {k: v for k, v in model.detector_config.items() if k != "pretrained_path"}
    (out_dir / "config.json").write_text(json.dumps(config, indent=2))
    path = out_dir / "model.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return path


def load_detection_model(model_dir: str | Path) -> DetectionModel:
    from safetensors.torch import load_file
    model_dir = Path(model_dir)
    model = DetectionModel(json.loads((model_dir / "config.json").read_text()))
    model.load_state_dict(load_file(str(model_dir / "model.safetensors")))
    return model.eval()


def predict(model: DetectionModel, dataset, dl, device, batch_size: int = 8) -> list[dict]:
    """Detections per item, boxes mapped back to the stored image's coordinates."""
    out = []
    for start in range(0, len(dataset), batch_size):
        items = [dataset[j] for j in range(start, min(start + batch_size, len(dataset)))]
        for item, det in zip(items, model.predict([it["image"].to(device) for it in items])):
            boxes = dl.to_original(det["boxes"], item["original_size"], item["image_size"])
            out.append({"image_path": item["image_path"], "boxes": np.asarray(boxes, np.float64),
                        "scores": det["scores"].numpy(), "labels": det["labels"].numpy()})
    return out
