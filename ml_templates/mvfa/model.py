"""MVFA (Huang et al., CVPR 2024): multi-level visual feature adaptation of a frozen CLIP for
medical anomaly detection and localisation, on Hugging Face ``transformers.CLIPModel``.

* Residual adapters (bottleneck MLPs, ``adapted = (1 - r) * h + r * adapter(h)``) on the patch
  tokens of several levels of the CLIP vision transformer (``output_hidden_states=True``); two
  per level as in the paper: a *seg* adapter (pixel-level map) and a *det* adapter (the
  paper's image-level branch, trained with BCE; mixed into the score with ``det_weight``).
* Each adapted level goes through CLIP's own (frozen) ``post_layernorm`` and
  ``visual_projection`` into the joint image-text space and is compared, patch by patch, with the
  text embeddings of the "normal" / "abnormal" prompt ensembles (frozen CLIP text encoder):
  ``softmax(scale * [cos(normal), cos(abnormal)])[abnormal]`` per patch, upsampled to the image
  and averaged over levels (zero-shot map). Image score = mean of the top-k fraction of the map.
* Few-shot: a memory bank of adapted patch features of k normal support images; anomaly =
  1 - max cosine similarity to the bank, per level, averaged and combined with the zero-shot map.
* Training loss (adapters only; CLIP stays frozen): per level, focal + Dice of the seg map
  against the mask, plus BCE of the det branch's image score against the image label.

Never downloads: :func:`load_clip` reads a local folder only. :func:`tiny_clip_config` and
:func:`build_char_tokenizer` give a random tiny CLIP and a character-level CLIP tokenizer for tests
and for machines without CLIP weights.
"""
from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from transformers import CLIPConfig, CLIPModel, CLIPTokenizer

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)

# Prompt ensembles in the spirit of the paper's (state words x templates x object name).
NORMAL_STATES = ["normal {}", "flawless {}", "healthy {}", "{} without lesion", "unremarkable {}"]
ABNORMAL_STATES = ["abnormal {}", "damaged {}", "{} with lesion", "{} with anomaly",
                   "diseased {}"]
TEMPLATES = ["a photo of a {}.", "a medical image of a {}.", "a scan of the {}.", "{}."]


class CLIPNotFoundError(FileNotFoundError):
    """The local CLIP folder is missing or incomplete (nothing is ever downloaded)."""


def tiny_clip_config(image_size: int = 64, patch_size: int = 8, vocab_size: int = 520,
                     projection_dim: int = 32) -> CLIPConfig:
    """A randomly initialised tiny CLIP (vision 64 wide, 4 layers; text 64 wide, 2 layers)."""
    return CLIPConfig(
        text_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, vocab_size=vocab_size, max_position_embeddings=40,
                         bos_token_id=vocab_size - 2, eos_token_id=vocab_size - 1,
                         pad_token_id=vocab_size - 1),
        vision_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                           num_attention_heads=4, image_size=image_size, patch_size=patch_size),
        projection_dim=projection_dim)


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2 / CLIP byte-to-printable-character table."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def build_char_tokenizer(folder: str | Path, vocab_size: int = 520) -> CLIPTokenizer:
    """Write a character-level CLIP BPE vocabulary (no merges) into ``folder`` and load it.

    Ids: the 256 byte characters, the same with ``</w>``, then ``<|startoftext|>`` =
    vocab_size - 2 and ``<|endoftext|>`` = vocab_size - 1 (matches :func:`tiny_clip_config`)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    chars = list(_bytes_to_unicode().values())
    tokens = chars + [c + "</w>" for c in chars]
    if len(tokens) + 2 > vocab_size:
        raise ValueError(f"vocab_size must be at least {len(tokens) + 2}")
    vocab = {t: i for i, t in enumerate(tokens)}
    for i in range(len(tokens), vocab_size - 2):
        vocab[f"<|unused{i}|>"] = i
    vocab["<|startoftext|>"] = vocab_size - 2
    vocab["<|endoftext|>"] = vocab_size - 1
    tok = CLIPTokenizer(vocab=vocab, merges=[])
    tok.save_pretrained(str(folder))
    return tok


def load_clip(path: str | Path) -> CLIPModel:
    """``CLIPModel.from_pretrained`` on a local folder only (never downloads)."""
    folder = Path(path) if path else None
    if folder is None or not folder.is_dir() or not (folder / "config.json").exists():
        raise CLIPNotFoundError(
            f"CLIP weights not found: expected a local folder with config.json and model weights "
            f"saved by CLIPModel.save_pretrained at {str(folder)!r}. M3Builder never downloads "
            f"weights; copy a CLIP checkpoint (e.g. ViT-L/14) there.")
    return CLIPModel.from_pretrained(str(folder), local_files_only=True)


def load_tokenizer(path: str | Path) -> CLIPTokenizer:
    folder = Path(path)
    if not ((folder / "tokenizer.json").exists() or (folder / "vocab.json").exists()):
        raise CLIPNotFoundError(
            f"no CLIP tokenizer in {str(folder)!r} (expected tokenizer.json or vocab.json + "
            f"merges.txt saved by CLIPTokenizer.save_pretrained); or pass precomputed text "
            f"embeddings")
    return CLIPTokenizer.from_pretrained(str(folder), local_files_only=True)


def prompt_ensembles(object_name: str = "chest") -> dict[str, list[str]]:
    return {"normal": [t.format(s.format(object_name)) for s in NORMAL_STATES for t in TEMPLATES],
            "abnormal": [t.format(s.format(object_name))
                         for s in ABNORMAL_STATES for t in TEMPLATES]}


def _pooled(out) -> torch.Tensor:
    return out if isinstance(out, torch.Tensor) else out.pooler_output


@torch.no_grad()
def encode_prompts(clip: CLIPModel, tokenizer: CLIPTokenizer,
                   prompts: dict[str, list[str]]) -> torch.Tensor:
    """[2, projection_dim]: the unit-norm mean embedding of each ensemble (normal, abnormal)."""
    rows = []
    max_len = clip.config.text_config.max_position_embeddings
    for key in ("normal", "abnormal"):
        enc = tokenizer(prompts[key], padding=True, truncation=True, max_length=max_len,
                        return_tensors="pt")
        feats = _pooled(clip.get_text_features(input_ids=enc["input_ids"],
                                               attention_mask=enc["attention_mask"]))
        feats = F.normalize(feats.float(), dim=-1).mean(0)
        rows.append(F.normalize(feats, dim=-1))
    return torch.stack(rows)


class ResidualAdapter(nn.Module):
    """Bottleneck MLP, as the paper's ClipAdapter (Linear-LeakyReLU-Linear-LeakyReLU)."""

    def __init__(self, dim: int, bottleneck: int):
        super().__init__()
        self.fc1 = nn.Sequential(nn.Linear(dim, bottleneck, bias=False), nn.LeakyReLU())
        self.fc2 = nn.Sequential(nn.Linear(bottleneck, dim, bias=False), nn.LeakyReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.fc1(x))


def default_levels(num_layers: int, n: int = 4) -> tuple[int, ...]:
    """Evenly spaced transformer layers (1-based), e.g. (6, 12, 18, 24) for ViT-L/14."""
    return tuple(sorted({max(1, round(num_layers * (i + 1) / n)) for i in range(n)}))


class MVFA(nn.Module):
    def __init__(self, clip: CLIPModel, levels: tuple[int, ...] | None = None,
                 prompts: dict[str, list[str]] | None = None,
                 tokenizer: CLIPTokenizer | None = None,
                 text_embeddings: torch.Tensor | None = None, residual_ratio: float = 0.5,
                 bottleneck: int | None = None, logit_scale: float = 100.0, top_k: float = 0.02,
                 few_shot_weight: float = 0.5, det_weight: float = 0.0):
        super().__init__()
        self.clip = clip
        for p in self.clip.parameters():
            p.requires_grad_(False)
        self.clip.eval()
        vcfg = clip.config.vision_config
        self.image_size, self.patch_size = int(vcfg.image_size), int(vcfg.patch_size)
        self.grid = self.image_size // self.patch_size
        self.levels = tuple(levels or default_levels(vcfg.num_hidden_layers))
        if max(self.levels) > vcfg.num_hidden_layers or min(self.levels) < 1:
            raise ValueError(f"levels must be within 1..{vcfg.num_hidden_layers}: {self.levels}")
        dim = int(vcfg.hidden_size)
        bottleneck = int(bottleneck or max(16, dim // 4))
        self.seg_adapters = nn.ModuleList(ResidualAdapter(dim, bottleneck) for _ in self.levels)
        self.det_adapters = nn.ModuleList(ResidualAdapter(dim, bottleneck) for _ in self.levels)
        self.residual_ratio, self.logit_scale = float(residual_ratio), float(logit_scale)
        self.top_k, self.few_shot_weight = float(top_k), float(few_shot_weight)
        self.det_weight = float(det_weight)
        if text_embeddings is None:
            if tokenizer is None:
                raise ValueError("MVFA needs a CLIP tokenizer or precomputed text_embeddings")
            text_embeddings = encode_prompts(clip, tokenizer, prompts or prompt_ensembles())
        text_embeddings = F.normalize(torch.as_tensor(text_embeddings).float(), dim=-1)
        if tuple(text_embeddings.shape) != (2, clip.config.projection_dim):
            raise ValueError(f"text_embeddings must be [2, {clip.config.projection_dim}] "
                             f"(normal, abnormal), got {tuple(text_embeddings.shape)}")
        self.register_buffer("text_embeddings", text_embeddings)
        self.memory: list[torch.Tensor] | None = None  # few-shot bank, one [M, P] per level

    # ------------------------------------------------------------------ parts
    def adapter_state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v for k, v in self.state_dict().items() if k.split(".")[0] in
                ("seg_adapters", "det_adapters")}

    def train(self, mode: bool = True):
        super().train(mode)
        self.clip.eval()  # the backbone never leaves eval mode
        return self

    @torch.no_grad()
    def backbone_features(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Frozen CLIP: [B, n_levels, n_patches, hidden] patch tokens of the chosen layers."""
        out = self.clip.vision_model(pixel_values=pixel_values, output_hidden_states=True)
        return torch.stack([out.hidden_states[i][:, 1:] for i in self.levels], dim=1)

    def _project(self, tokens: torch.Tensor) -> torch.Tensor:
        vm = self.clip.vision_model
        return F.normalize(self.clip.visual_projection(vm.post_layernorm(tokens)), dim=-1)

    def adapted(self, feats: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Per level: unit-norm joint-space patch features of the seg and det branches."""
        r = self.residual_ratio
        seg, det = [], []
        for i in range(len(self.levels)):
            h = feats[:, i]
            seg.append(self._project((1 - r) * h + r * self.seg_adapters[i](h)))
            det.append(self._project((1 - r) * h + r * self.det_adapters[i](h)))
        return seg, det

    def patch_probs(self, tokens: torch.Tensor) -> torch.Tensor:
        """[B, N] probability of "abnormal" per patch (softmax over the two prompts)."""
        logits = self.logit_scale * tokens @ self.text_embeddings.t()
        return logits.softmax(-1)[..., 1]

    def _to_image(self, patch_map: torch.Tensor) -> torch.Tensor:
        b = patch_map.shape[0]
        grid = patch_map.reshape(b, 1, self.grid, self.grid)
        return F.interpolate(grid, size=(self.image_size, self.image_size), mode="bilinear",
                             align_corners=False)[:, 0]

    def _topk_mean(self, values: torch.Tensor) -> torch.Tensor:
        flat = values.flatten(1)
        k = max(1, int(round(self.top_k * flat.shape[1])))
        return flat.topk(k, dim=1).values.mean(1)

    def _score(self, anomaly_map: torch.Tensor, det_scores: torch.Tensor) -> torch.Tensor:
        """Image score: mean of the top-k fraction of the map, optionally mixed with the det
        branch (``det_weight``; the paper's classifier head, which overfits small source sets)."""
        w = self.det_weight
        return (1 - w) * self._topk_mean(anomaly_map) + w * det_scores.mean(1)

    # ------------------------------------------------------------------ forward / loss
    def forward(self, pixel_values: torch.Tensor | None = None,
                features: torch.Tensor | None = None) -> dict:
        feats = self.backbone_features(pixel_values) if features is None else features
        seg, det = self.adapted(feats)
        level_maps = torch.stack([self._to_image(self.patch_probs(s)) for s in seg], 1)
        det_scores = torch.stack([self._topk_mean(self.patch_probs(d)) for d in det], 1)
        anomaly_map = level_maps.mean(1)
        out = {"level_maps": level_maps, "det_scores": det_scores, "zero_shot_map": anomaly_map,
               "zero_shot_score": self._score(anomaly_map, det_scores)}
        if self.memory is not None:
            fs = []
            for i, s in enumerate(seg):
                sim = s @ self.memory[i].t()                    # [B, N, M]
                fs.append(self._to_image(1 - sim.max(-1).values))
            fs_map = torch.stack(fs, 1).mean(1)
            w = self.few_shot_weight
            out["few_shot_map"] = fs_map
            out["anomaly_map"] = (1 - w) * anomaly_map + w * fs_map
            out["score"] = self._score(out["anomaly_map"], det_scores)
        else:
            out["anomaly_map"], out["score"] = anomaly_map, out["zero_shot_score"]
        return out

    @torch.no_grad()
    def build_memory(self, pixel_values: torch.Tensor | None = None,
                     features: torch.Tensor | None = None) -> None:
        """Few-shot: store the adapted seg-branch patch features of k normal support images."""
        feats = self.backbone_features(pixel_values) if features is None else features
        seg, _ = self.adapted(feats)
        self.memory = [s.reshape(-1, s.shape[-1]) for s in seg]

    def clear_memory(self) -> None:
        self.memory = None

    def loss(self, out: dict, masks: torch.Tensor, labels: torch.Tensor,
             gamma: float = 2.0) -> dict[str, torch.Tensor]:
        """Per level focal + Dice (map vs mask) + BCE (det score vs image label)."""
        masks = masks.float()
        eps = 1e-6
        focal = dice = bce = 0.0
        for i in range(out["level_maps"].shape[1]):
            p = out["level_maps"][:, i].clamp(eps, 1 - eps)
            pt = torch.where(masks > 0.5, p, 1 - p)
            focal = focal + (-(1 - pt) ** gamma * pt.log()).mean()
            inter = (p * masks).flatten(1).sum(1)
            union = p.flatten(1).sum(1) + masks.flatten(1).sum(1)
            dice = dice + (1 - (2 * inter + 1) / (union + 1)).mean()
            bce = bce + F.binary_cross_entropy(out["det_scores"][:, i].clamp(eps, 1 - eps),
                                               labels.float())
        total = focal + dice + bce
        return {"loss": total, "focal": focal, "dice": dice, "bce": bce}


def preprocess(image, size: int) -> torch.Tensor:
    """A 2D array (H, W) or (H, W, C) in [0, 1] → normalised CLIP input [3, size, size]."""
    x = torch.as_tensor(image, dtype=torch.float32)
    if x.ndim == 2:
        x = x[None].repeat(3, 1, 1)
    elif x.ndim == 3:
        x = x.permute(2, 0, 1)[:3]
        if x.shape[0] == 1:
            x = x.repeat(3, 1, 1)
    x = F.interpolate(x[None], size=(size, size), mode="bilinear", align_corners=False)[0]
    mean = torch.tensor(CLIP_MEAN)[:, None, None]
    std = torch.tensor(CLIP_STD)[:, None, None]
    return (x - mean) / std
