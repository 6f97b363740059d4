"""A metric of the user's, outside zdebias (test_eval_metric_registry loads it by dotted path
``toy_metric:EntailmentShare``): the share of the predictions that are entailment."""

from __future__ import annotations

from zdebias.evaluation.registry import Metric, Scored


class EntailmentShare(Metric):
    """Share of the predictions that are entailment."""

    name = "entailment-share"
    primary = "entailment share"
    tested = True

    def compute(self, scored: Scored) -> dict[str, float]:
        preds = list(scored.preds)
        return {self.key(scored.suite): sum(p == "entailment" for p in preds) / len(preds)}
