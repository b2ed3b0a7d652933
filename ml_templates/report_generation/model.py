"""Image-conditioned report generator (2D or 3D) wrapped for the Transformers Trainer.

* Encoder: a MONAI ``ResNet`` trunk (conv stem + 4 stages, no pooling head) whose last feature
  map is pooled to a fixed grid (4x4 in 2D, 3x3x3 in 3D), flattened to a sequence of image tokens,
  projected to the decoder width and given a learned positional embedding.
* Decoder: ``torch.nn.TransformerDecoder`` (causal self-attention over the report tokens,
  cross-attention to the image tokens at every layer), learned positions, a linear LM head.

``forward(pixel_values, input_ids, labels=None) -> {"loss", "logits"}`` (next-token cross-entropy,
the model shifts ``labels`` itself, -100 ignored); ``generate(pixel_values, max_new_tokens)`` is
greedy decoding that stops at [EOS]; ``load_trained(Logout/model)`` rebuilds a trained one
(weights, ``report_config.json``) for inference. Networks by name: ``report_small`` (CPU default)
and ``report_base`` (ResNet-18 trunk, GPU). ``pretrained_path`` loads local encoder weights (a
MONAI / MedicalNet ResNet state dict; never downloads).
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from monai.networks import nets
from torch import nn

from ml_templates.report_generation.tokenizer import decode_report

NETWORKS = {
    # layers / channels of the ResNet trunk, decoder width, layers, heads
    "report_small": {"layers": [1, 1, 1, 1], "planes": [16, 32, 64, 128], "d_model": 128,
                     "decoder_layers": 2, "heads": 4, "dropout": 0.1},
    "report_base": {"layers": [2, 2, 2, 2], "planes": [64, 128, 256, 512], "d_model": 384,
                    "decoder_layers": 4, "heads": 6, "dropout": 0.1},
}
DEFAULT_CPU, DEFAULT_GPU = "report_small", "report_base"


class ImageEncoder(nn.Module):
    """(B, C, *spatial) -> (B, grid tokens, d_model)."""

    def __init__(self, spatial_dims: int, in_channels: int, layers: list[int],
                 planes: list[int], d_model: int):
        super().__init__()
        self.trunk = nets.ResNet(block="basic", layers=layers, block_inplanes=planes,
                                 spatial_dims=spatial_dims, n_input_channels=in_channels,
                                 conv1_t_size=7, conv1_t_stride=2, no_max_pool=True,
                                 feed_forward=False)
        self.trunk.avgpool = nn.Identity()  # the grid is kept, not averaged away
        grid = 4 if spatial_dims == 2 else 3
        pool = nn.AdaptiveAvgPool2d if spatial_dims == 2 else nn.AdaptiveAvgPool3d
        self.pool = pool(grid)
        self.proj = nn.Sequential(nn.Linear(planes[-1], d_model), nn.LayerNorm(d_model))
        self.pos = nn.Parameter(torch.zeros(1, grid ** spatial_dims, d_model))
        nn.init.trunc_normal_(self.pos, std=0.02)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        t = self.trunk
        x = t.act(t.bn1(t.conv1(pixel_values)))
        x = t.layer4(t.layer3(t.layer2(t.layer1(x))))
        x = self.pool(x).flatten(2).transpose(1, 2)  # (B, tokens, channels)
        return self.proj(x) + self.pos


class ReportGenerator(nn.Module):
    def __init__(self, network: str, spatial_dims: int, in_channels: int, vocab_size: int,
                 max_tokens: int, pad_token_id: int, bos_token_id: int, eos_token_id: int,
                 pretrained_path: str | None = None):
        super().__init__()
        if network not in NETWORKS:
            raise ValueError(f"unknown network {network!r}; choose one of {sorted(NETWORKS)}")
        spec = NETWORKS[network]
        d = spec["d_model"]
        self.report_config = {"network": network, "spatial_dims": spatial_dims,
                       "in_channels": in_channels, "vocab_size": vocab_size,
                       "max_tokens": max_tokens, "pad_token_id": pad_token_id,
                       "bos_token_id": bos_token_id, "eos_token_id": eos_token_id}
        self.encoder = ImageEncoder(spatial_dims, in_channels, spec["layers"], spec["planes"], d)
        self.embed = nn.Embedding(vocab_size, d, padding_idx=pad_token_id)
        self.pos = nn.Parameter(torch.zeros(1, max_tokens, d))
        nn.init.trunc_normal_(self.pos, std=0.02)
        layer = nn.TransformerDecoderLayer(d, spec["heads"], dim_feedforward=4 * d,
                                           dropout=spec["dropout"], batch_first=True,
                                           norm_first=True)
        self.decoder = nn.TransformerDecoder(layer, spec["decoder_layers"],
                                             norm=nn.LayerNorm(d))
        self.lm_head = nn.Linear(d, vocab_size)
        if pretrained_path:
            self.load_pretrained(pretrained_path)

    def load_pretrained(self, path: str) -> None:
        """Encoder weights from a local file: keys of a MONAI ResNet (``module.`` / ``trunk.``
        prefixes stripped); tensors whose shapes do not fit are skipped."""
        state = torch.load(Path(path), map_location="cpu", weights_only=True)
        state = state.get("state_dict", state)
        own = self.encoder.trunk.state_dict()
        usable = {}
        for key, value in state.items():
            for prefix in ("module.", "encoder.", "trunk."):
                key = key.removeprefix(prefix)
            if key in own and own[key].shape == value.shape:
                usable[key] = value
        if not usable:
            raise ValueError(f"no weights in {path} fit the encoder (check the network name)")
        self.encoder.trunk.load_state_dict(usable, strict=False)

    def decode(self, input_ids: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        """Logits (B, L, vocab) for every prefix of ``input_ids`` given the image tokens."""
        length = input_ids.shape[1]
        x = self.embed(input_ids) + self.pos[:, :length]
        causal = nn.Transformer.generate_square_subsequent_mask(length, device=x.device,
                                                                dtype=x.dtype)
        return self.lm_head(self.decoder(x, memory, tgt_mask=causal, tgt_is_causal=True))

    def forward(self, pixel_values: torch.Tensor, input_ids: torch.Tensor,
                labels: torch.Tensor | None = None, **_) -> dict:
        logits = self.decode(input_ids, self.encoder(pixel_values))
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                ignore_index=-100)
        return out

    @torch.no_grad()
    def generate(self, pixel_values: torch.Tensor, max_new_tokens: int | None = None,
                 ) -> torch.Tensor:
        """Greedy decoding from [BOS]; returns (B, n) new token ids ([EOS] then padding)."""
        cfg = self.report_config
        max_new = min(max_new_tokens or cfg["max_tokens"] - 1, cfg["max_tokens"] - 1)
        memory = self.encoder(pixel_values)
        batch = pixel_values.shape[0]
        ids = torch.full((batch, 1), cfg["bos_token_id"], dtype=torch.long,
                         device=pixel_values.device)
        done = torch.zeros(batch, dtype=torch.bool, device=pixel_values.device)
        for _ in range(max_new):
            next_id = self.decode(ids, memory)[:, -1].argmax(-1)
            next_id = torch.where(done, torch.full_like(next_id, cfg["pad_token_id"]), next_id)
            ids = torch.cat([ids, next_id[:, None]], dim=1)
            done |= next_id == cfg["eos_token_id"]
            if bool(done.all()):
                break
        return ids[:, 1:]


def load_trained(model_dir: str | Path) -> ReportGenerator:
    """A trained generator from train.py's ``Logout/model/`` (eval mode, on the CPU)."""
    from safetensors.torch import load_file
    model_dir = Path(model_dir)
    cfg = json.loads((model_dir / "report_config.json").read_text())
    model = ReportGenerator(**{k: cfg[k] for k in (
        "network", "spatial_dims", "in_channels", "vocab_size", "max_tokens", "pad_token_id",
        "bos_token_id", "eos_token_id")})
    model.load_state_dict(load_file(str(model_dir / "model.safetensors")))
    return model.eval()


def generate_reports(model: ReportGenerator, dataset, tokenizer, device, max_new_tokens: int,
                     batch_size: int = 32) -> list[str]:
    model.eval()
    texts = []
    for i in range(0, len(dataset), batch_size):
        pixels = torch.stack([dataset[j]["pixel_values"]
                              for j in range(i, min(i + batch_size, len(dataset)))]).to(device)
        ids = model.generate(pixels, max_new_tokens).cpu()
        texts += [decode_report(tokenizer, row) for row in ids]
    return texts
