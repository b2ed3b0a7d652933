"""Report tokenizer: a local pretrained one by path, or a small one trained on the training
reports only (never the test set), both as a ``transformers.PreTrainedTokenizerFast``.

The trained tokenizer is word-level (the HF ``tokenizers`` library): lower-cased, split on
whitespace and punctuation, words seen at least ``min_frequency`` times, special tokens
``[PAD] [BOS] [EOS] [UNK]``. Radiology reports have small vocabularies, so whole words keep the
sequences short and a small decoder learns quickly; ``kind="bpe"`` gives sub-words instead for
large, varied corpora (its merges are not reproducible run to run: reuse the saved one).
Sequences are framed ``[BOS] ... [EOS]`` by :func:`encode_report`, so a
pretrained tokenizer without those tokens works too (they are added to it).
"""
from __future__ import annotations

import re
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

SPECIAL = {"pad_token": "[PAD]", "bos_token": "[BOS]", "eos_token": "[EOS]", "unk_token": "[UNK]"}


def report_text(findings: str | None, impression: str | None) -> str:
    """The training target: both sections, each under its heading."""
    return f"FINDINGS: {(findings or '').strip()} IMPRESSION: {(impression or '').strip()}"


def train_tokenizer(texts: list[str], kind: str = "wordlevel", min_frequency: int = 1,
                    vocab_size: int = 8000) -> PreTrainedTokenizerFast:
    """Fit a tokenizer on ``texts`` (the training reports)."""
    specials = list(SPECIAL.values())
    if kind == "wordlevel":
        tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
        trainer = trainers.WordLevelTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                            special_tokens=specials, show_progress=False)
    elif kind == "bpe":
        tok = Tokenizer(models.BPE(unk_token="[UNK]", end_of_word_suffix="</w>"))
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                      special_tokens=specials, end_of_word_suffix="</w>",
                                      show_progress=False)
    else:
        raise ValueError(f"unknown tokenizer kind {kind!r}; use 'wordlevel' or 'bpe'")
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    # WordLevel: join words with spaces and tidy " ." -> "."; BPE: rebuild words from "</w>"
    tok.decoder = (decoders.WordPiece(prefix="##", cleanup=True) if kind == "wordlevel"
                   else decoders.BPEDecoder(suffix="</w>"))
    tok.train_from_iterator(sorted(texts), trainer=trainer)  # sorted: same vocabulary every run
    return PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIAL)


def ensure_special_tokens(tokenizer) -> PreTrainedTokenizerFast:
    """A pretrained tokenizer may lack pad/bos/eos (GPT-2 has no pad): add what is missing."""
    missing = {k: v for k, v in SPECIAL.items() if getattr(tokenizer, k, None) is None}
    if missing:
        tokenizer.add_special_tokens(missing)
    return tokenizer


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerFast:
    """A tokenizer saved with ``save_pretrained`` in a local folder (never downloads)."""
    if not Path(path).is_dir():
        raise FileNotFoundError(f"tokenizer folder {path} does not exist")
    return ensure_special_tokens(AutoTokenizer.from_pretrained(str(path), local_files_only=True))


def get_tokenizer(train_texts: list[str], tokenizer_path: str | None = None,
                  save_dir: str | Path | None = None, **train_kwargs) -> PreTrainedTokenizerFast:
    """The local pretrained tokenizer when a path is given, else one trained on
    ``train_texts``; saved to ``save_dir`` (e.g. Logout/tokenizer/) when given."""
    tokenizer = (load_tokenizer(tokenizer_path) if tokenizer_path
                 else train_tokenizer(train_texts, **train_kwargs))
    if save_dir:
        tokenizer.save_pretrained(str(save_dir))
    return tokenizer


def encode_report(tokenizer, text: str, max_tokens: int) -> tuple[list[int], list[int], int]:
    """``[BOS] text [EOS]`` truncated and right-padded to ``max_tokens``.

    Returns (input_ids, labels with padding as -100, number of real tokens before padding)."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    ids = [tokenizer.bos_token_id] + ids[:max_tokens - 2] + [tokenizer.eos_token_id]
    n = len(ids)
    pad = max_tokens - n
    return ids + [tokenizer.pad_token_id] * pad, ids + [-100] * pad, n


def decode_report(tokenizer, ids) -> str:
    """Generated ids -> text, cut at the first [EOS], special tokens dropped."""
    ids = [int(i) for i in ids]
    if tokenizer.eos_token_id in ids:
        ids = ids[:ids.index(tokenizer.eos_token_id)]
    text = tokenizer.decode(ids, skip_special_tokens=True).strip()
    text = re.sub(r"\s+([:.,;!?])", r"\1", text)  # "word ." -> "word."
    return re.sub(r"\b(findings|impression):", lambda m: m.group(0).upper(), text)
