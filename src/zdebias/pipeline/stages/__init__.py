"""The built-in stage kinds, one module per area: settings and a thin adapter to its API.

Importing this package registers them all (:mod:`zdebias.pipeline.catalogue` does).

Every adapter reads its inputs, calls one public function of ``zdebias.stats``,
``zdebias.classify``, ``zdebias.generation``, ``zdebias.counterfactual`` or
``zdebias.evaluation``, and writes what it returns into the stage folder (atomic writers
only). Heavy libraries are imported inside the functions.

Stage kinds (``stage:`` in a recipe):

=========================  ===============================================================
demo-data                  the built-in synthetic NLI corpus with planted artifacts
stats                      z-statistics, top biased features, Gardner-plot points
filter                     z-filtering Z(D) or Z(D | seed)
train-generator            fine-tune a causal LM into a generator (L_MLE + λ·consistency)
debias-generator           fine-tune it on Z(D0) with α·masked unlikelihood on Z⁻(D0)
sample                     sample the generator (resumable shards)
transform                  rule-made HANS transforms of real pairs (inversion, passive, ...)
confidence-filter          keep samples an NLI model gives p(label) > τ
combine                    Z-Aug, Par-Z or Seq-Z
concat                     concatenate datasets (e.g. original + counterfactuals)
subset                     a seeded random subset (N, or the size of another dataset)
train-classifier           fine-tune a classifier (CE, PoE, learned-mixin, conf-reg), 1+ seeds
evaluate                   accuracy tables (GD-NLI Tables 2-5 shape)
counterfactual-rationales  AutoCAD rationale spans by gradient saliency
counterfactual-train       label-controlled infiller training
counterfactual-generate    counterfactuals + post-selection
counterfactual-metrics     flip rate, distinct-n, perplexity
=========================  ===============================================================
"""

from __future__ import annotations

from zdebias.pipeline.stages import classify, counterfactual, data, generation, stats

__all__ = ["classify", "counterfactual", "data", "generation", "stats"]
