"""A synthetic NLI-shaped set whose shortcuts are fully known (docs/design.md §13's checks of a
shortcut split): every premise and hypothesis is random filler words, labels are drawn
independently of them, and only a few planted hypothesis words (:data:`ARTIFACTS`) predict a
label. In the test set half the rows carry exactly one planted word, half of those with its
label (truly *aligned*) and half with another (truly *conflicting*); the other half carry
none (truly *free*). ``meta.truth`` holds that slice, ``meta.planted`` the word.

The same seed gives the same records on every run.

>>> c = make_truth_corpus(seed=1, n_train=30, n_test=8)
>>> sorted({r.meta["truth"] for r in c["test"]})
['aligned', 'conflicting', 'free']
"""

from __future__ import annotations

import random
from typing import Any

from zdebias.data.schema import Record

LABELS = ("entailment", "neutral", "contradiction")
#: planted hypothesis word → the label it predicts
ARTIFACTS = {"zebra": "entailment", "violin": "neutral", "comet": "contradiction"}
_ONSETS = "bdfgklmnprstv"
_VOWELS = "aeiou"


def filler_words() -> list[str]:
    """The filler vocabulary: every two-syllable consonant-vowel word (``bada`` ...), 4,225
    words, none of them a planted one."""
    syllables = [c + v for c in _ONSETS for v in _VOWELS]
    words = [a + b for a in syllables for b in syllables]
    assert not set(words) & set(ARTIFACTS)
    return words


def _words(rng: random.Random, vocab: list[str], low: int, high: int) -> list[str]:
    return [rng.choice(vocab) for _ in range(rng.randint(low, high))]


def _pair(
    rng: random.Random, vocab: list[str], i: int, split: str, label: str, planted: str | None
) -> Record:
    hyp = _words(rng, vocab, 4, 8)
    if planted is not None:
        hyp.insert(rng.randrange(len(hyp) + 1), planted)
    premise = " ".join(_words(rng, vocab, 8, 12)) + "."
    return Record(
        f"{split}-{i}",
        label,
        premise,
        " ".join(hyp) + ".",
        meta={"planted": [planted] if planted else []},
    )


def make_truth_corpus(
    seed: int = 0,
    n_train: int = 6000,
    n_test: int = 1200,
    *,
    rate: float = 0.08,
    strength: float = 0.9,
    vocab_size: int = 2000,
) -> dict[str, Any]:
    """``{"train": [...], "test": [...], "labels", "artifacts"}``. Training rows carry one
    planted word each with probability ``rate`` per word (else none); such a row has the
    word's label with probability ``strength`` (else another, uniformly), every other row a
    uniform label. Test rows: ``n_test // 4`` truly aligned, as many truly conflicting, the
    rest free (no planted word, uniform label), shuffled."""
    rng = random.Random(seed)
    vocab = filler_words()[:vocab_size]
    words = list(ARTIFACTS)
    train = []
    for i in range(n_train):
        draw = rng.random()
        planted = words[int(draw / rate)] if draw < rate * len(words) else None
        if planted is None:
            label = rng.choice(LABELS)
        elif rng.random() < strength:
            label = ARTIFACTS[planted]
        else:
            label = rng.choice([lab for lab in LABELS if lab != ARTIFACTS[planted]])
        train.append(_pair(rng, vocab, i, "train", label, planted))
    plan: list[tuple[str, str | None]] = []
    quarter = n_test // 4
    for k in range(2 * quarter):
        plan.append(("aligned" if k < quarter else "conflicting", words[k % len(words)]))
    plan.extend(("free", None) for _ in range(n_test - 2 * quarter))
    rng.shuffle(plan)
    test = []
    for i, (truth, planted) in enumerate(plan):
        if planted is None:
            label = rng.choice(LABELS)
        elif truth == "aligned":
            label = ARTIFACTS[planted]
        else:
            label = rng.choice([lab for lab in LABELS if lab != ARTIFACTS[planted]])
        r = _pair(rng, vocab, i, "test", label, planted)
        test.append(r.replace(meta={**r.meta, "truth": truth}))
    return {"train": train, "test": test, "labels": LABELS, "artifacts": dict(ARTIFACTS)}


__all__ = ["ARTIFACTS", "LABELS", "filler_words", "make_truth_corpus"]
