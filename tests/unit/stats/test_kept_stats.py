"""The two views of "z after filtering": as filtered, and as `zdebias stats` sees kept.jsonl."""

from __future__ import annotations

import numpy as np
import pytest

from zdebias.data.schema import Record
from zdebias.stats.measure import measure, stats_of_kept
from zdebias.stats.settings import ZFilterSettings
from zdebias.stats.zfilter import z_filter

LABELS = ("entailment", "neutral", "contradiction")


def _data() -> list[Record]:
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(25)]
    out = []
    for i in range(300):
        label = LABELS[i % 3]
        hyp = " ".join(rng.choice(words, size=3))
        if label == "contradiction" and rng.random() < 0.6:
            hyp += " nobody"
        out.append(Record(f"r{i}", label, "a premise", hyp))
    return out


def test_stats_of_kept_is_what_stats_reports_on_the_kept_records() -> None:
    settings = ZFilterSettings(biased_k=3, zfilter_batch_size=50)
    result = z_filter(_data(), settings, labels=LABELS)
    view = stats_of_kept(result.kept, settings, labels=LABELS)
    direct = measure(result.kept, labels=LABELS).report  # `zdebias stats`, default settings
    assert view is not None and 0 < len(result.kept) < 300
    assert view["n_features"] == direct["n_features"]
    assert view["z_critical"] == pytest.approx(direct["z_critical"])
    assert view["n_significant"] == direct["n_significant"]
    for label in LABELS:
        assert view["top_z"][label] == direct["top"][label][0]
    # the filter's own "after" counts features against the input's Bonferroni count
    assert result.summary["n_features"] >= view["n_features"]
    assert stats_of_kept([], settings, labels=LABELS) is None


def _pairs_with_repeats() -> list[Record]:
    """Pairs with repeated hypotheses (the hypothesis-only model fits on distinct texts), some
    ``meta.hypo_only_pred`` given, and premises shared across rows."""
    rng = np.random.default_rng(5)
    words = [f"w{i}" for i in range(12)]
    out = []
    for i in range(400):
        label = LABELS[i % 3]
        hyp = " ".join(rng.choice(words, size=2 + i % 3))
        if label == "contradiction" and rng.random() < 0.5:
            hyp = "nobody " + hyp
        meta = {"hypo_only_pred": LABELS[(i // 3) % 3]} if i % 17 == 0 else {}
        out.append(Record(f"p{i}", label, f"a premise {i % 9}", hyp, meta=meta))
    return out


def _texts() -> list[Record]:
    rng = np.random.default_rng(6)
    words = [f"t{i}" for i in range(20)]
    out = []
    for i in range(300):
        label = ("positive", "negative")[i % 2]
        text = " ".join(rng.choice(words, size=4)) + (" awful" if label == "negative" else "")
        out.append(Record(f"s{i}", label, text=text))
    return out


@pytest.mark.parametrize(
    ("make", "features"),
    [
        (_data, None),
        (_pairs_with_repeats, None),
        (_pairs_with_repeats, ("ngrams", "hypo-only", "lex-overlap", "null")),
        (_texts, None),
    ],
)
def test_kept_stats_from_the_matrix_equal_extracting_again(make, features) -> None:  # type: ignore[no-untyped-def]
    """The one-process `zdebias filter` takes `stats_of_kept` from the input's matrix (the
    hypothesis-only feature refitted on the kept rows from their hypothesis n-grams): the
    same numbers as extracting every feature again on the kept records."""
    from zdebias.stats.execution.kept import kept_summary_of, matrix_describes_kept

    records = make()
    settings = ZFilterSettings(biased_k=3, zfilter_batch_size=50, features=features)
    assert matrix_describes_kept(settings)
    result = z_filter(records, settings)
    assert 0 < len(result.kept) < len(records)
    again = stats_of_kept(result.kept, settings, labels=result.summary["labels"])
    assert kept_summary_of(result, records, settings) == again


def test_kept_stats_need_the_matrix_to_hold_them() -> None:
    from zdebias.stats.execution.kept import matrix_describes_kept

    assert not matrix_describes_kept(ZFilterSettings(hypo_only_model="some/model"))
    assert not matrix_describes_kept(ZFilterSettings(ngram_fields=("premise",)))
    assert not matrix_describes_kept(ZFilterSettings(features=("unigrams", "hypo-only")))
    assert matrix_describes_kept(ZFilterSettings(features=("unigrams", "bigrams", "hypo-only")))
