"""Which samples a dataloader check loads: a stratified sample of each split instead of every
image once a split is large. Every class appears; each class contributes its first and last
image and a seeded random choice, up to ``per_class``; a split of ``whole`` images or fewer is
checked entirely. What the check decodes goes through the dataloader's cache, so training
does not decode those images again."""
from __future__ import annotations

import random
from collections.abc import Sequence

WHOLE_SPLIT = 200  # a split this small is checked image by image
PER_CLASS = 24     # otherwise, images per class (first, last and a seeded random choice)
SEED = 0


def stratified_sample(classes: Sequence[Sequence[str]], per_class: int | None = None,
                      whole: int | None = None, seed: int = SEED) -> list[int]:
    """Indices to check, in order. ``classes[i]`` lists the classes of item i (one for a
    single-label index, several or none for multi-label; an item with none is its own
    class ""): each class gets its first and last item and seeded random others, so the
    sample holds at most ``per_class`` x classes items and every class at least once."""
    per_class = PER_CLASS if per_class is None else per_class
    whole = WHOLE_SPLIT if whole is None else whole
    n = len(classes)
    if n <= whole:
        return list(range(n))
    by_class: dict[str, list[int]] = {}
    for i, names in enumerate(classes):
        for name in (names or [""]):
            by_class.setdefault(str(name), []).append(i)
    rng = random.Random(seed)
    chosen: set[int] = set()
    for name in sorted(by_class):
        members = by_class[name]
        if len(members) <= per_class:
            chosen.update(members)
            continue
        picks = {members[0], members[-1]}
        inner = members[1:-1]
        picks.update(rng.sample(inner, min(len(inner), max(0, per_class - 2))))
        chosen.update(picks)
    return sorted(chosen)
