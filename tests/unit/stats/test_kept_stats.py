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
