"""An artifact measure the z-filter did not use: how well a partial-input model of another
family predicts the label (issue 55 item 5).

The z-filter's own ``hypo-only-pred`` feature comes from a cross-fitted naive Bayes (or SGD,
or a trained transformer) on hypothesis n-grams, and the filter removes rows until that
feature and the n-grams are no longer significant. Whether a reader can still guess the label
without the task is a separate question, answered here by another model: a logistic
regression (L2, Newton-CG) on the binary bag of word unigrams and bigrams, scored by
stratified k-fold cross-validation. Pairs: the model sees the hypothesis only, so accuracy
above the majority share is an annotation artifact. Single text: it sees the text itself, and
then part of what it predicts *is* the task (the words of a review carry its sentiment); the
number says how predictable the label is from words, not how biased the set is.

:func:`artifact_accuracy` is pure: records in, an :class:`ArtifactResult` out; scikit-learn
is imported inside it. For a given seed the result is the same on every run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from zdebias.data.schema import Record
from zdebias.errors import DataError
from zdebias.settings import DEFAULT_SEED

DEFAULT_FOLDS = 5
#: the model, as reports name it
MODEL = "logistic regression (L2, C=1) on binary word uni+bigrams"
#: the regularisation strength and iteration cap of the logistic regression (Newton-CG: the
#: exact optimum in about 7 iterations on snli_20k, where L-BFGS needs 130)
_C, _MAX_ITER = 1.0, 200
PAIR_NOTE = (
    "hypothesis only: accuracy above the majority share is what a reader predicts without "
    "the premise (an annotation artifact)"
)
SINGLE_NOTE = (
    "single text: the model sees the whole text, so part of what it predicts is the task "
    "itself; this is how predictable the label is from words, not a bias measure alone"
)


@dataclass(frozen=True)
class ArtifactResult:
    """Cross-validated accuracy of the partial-input model against the majority share.

    ``fold_accuracies``: one per fold, in fold order; ``accuracy`` their mean and
    ``accuracy_std`` their (population) standard deviation; ``macro_f1`` over the
    out-of-fold predictions of all rows; ``above_majority`` in percentage points.
    """

    accuracy: float
    accuracy_std: float
    fold_accuracies: tuple[float, ...]
    macro_f1: float
    majority_share: float
    majority_label: str
    n_rows: int
    n_skipped: int
    folds: int
    seed: int
    input: str  # "hypothesis" or "text"
    model: str = MODEL

    @property
    def above_majority(self) -> float:
        """Accuracy minus the majority share, in percentage points."""
        return 100.0 * (self.accuracy - self.majority_share)

    def report(self) -> dict[str, Any]:
        """The JSON block (``artifact_model`` in the stats report)."""
        return {
            "accuracy": round(self.accuracy, 4),
            "accuracy_std": round(self.accuracy_std, 4),
            "fold_accuracies": [round(a, 4) for a in self.fold_accuracies],
            "macro_f1": round(self.macro_f1, 4),
            "majority_share": round(self.majority_share, 4),
            "majority_label": self.majority_label,
            "above_majority_points": round(self.above_majority, 2),
            "n_rows": self.n_rows,
            "n_skipped": self.n_skipped,
            "folds": self.folds,
            "seed": self.seed,
            "input": self.input,
            "model": self.model,
            "note": PAIR_NOTE if self.input == "hypothesis" else SINGLE_NOTE,
        }


def _bag(texts: list[str], tokenize: Callable[[str], list[str]]) -> Any:
    """``[N, V]`` binary CSR matrix of the unigrams and bigrams of each text (one empty
    column when no text has a token: the model then learns the label shares alone)."""
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import CountVectorizer

    grams = []
    for text in texts:
        toks = tokenize(text)
        grams.append(toks + [f"{a} {b}" for a, b in pairwise(toks)])
    if not any(grams):
        return sp.csr_matrix((len(texts), 1), dtype=np.float64)
    bag = CountVectorizer(analyzer=list, binary=True, dtype=np.float64)
    return bag.fit_transform(grams).tocsr()


def artifact_accuracy(
    records: Sequence[Record],
    *,
    labels: Sequence[str] | None = None,
    folds: int = DEFAULT_FOLDS,
    seed: int = DEFAULT_SEED,
    tokenize: Callable[[str], list[str]] | None = None,
) -> ArtifactResult:
    """Stratified ``folds``-fold cross-validated accuracy of :data:`MODEL` on the hypothesis
    (pairs) or the text (single text) of ``records``, and the majority share.

    ``labels``: the label set (default: the records' task); rows with another label are
    skipped and counted. ``tokenize``: the word tokeniser (default: the project's,
    :func:`zdebias.features.tokenize.tokenize`); the vocabulary is built once over all rows,
    which for a binary bag and L2 logistic regression gives the same predictions as one
    built per training fold (a word absent from the training folds gets weight 0).
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score
    from sklearn.model_selection import StratifiedKFold
    from threadpoolctl import threadpool_limits

    from zdebias.data.labels import infer_task

    if tokenize is None:
        from zdebias.features.tokenize import tokenize as default_tokenize

        tokenize = default_tokenize
    records = list(records)
    labels = tuple(labels) if labels is not None else infer_task(records).labels
    index = {label: i for i, label in enumerate(labels)}
    used = [r for r in records if r.label in index]
    pair = not used or used[0].is_pair
    y = np.fromiter((index[r.label] for r in used), dtype=np.int64, count=len(used))
    counts = np.bincount(y, minlength=len(labels))
    present = int((counts > 0).sum())
    if present < 2 or int(counts[counts > 0].min()) < folds:
        raise DataError(
            f"artifact model: {folds}-fold cross-validation needs at least {folds} rows of "
            f"each of 2 or more labels; these rows have "
            + ", ".join(f"{labels[i]} {int(c)}" for i, c in enumerate(counts) if c)
            + (
                f" ({len(records) - len(used)} rows with other labels skipped)"
                if len(records) > len(used)
                else ""
            )
        )
    texts = [(r.hypothesis if r.is_pair else r.text) or "" for r in used]
    x = _bag(texts, tokenize)
    predicted = np.empty_like(y)
    accuracies: list[float] = []
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    # one thread: the same sums in the same order on every machine, and on a busy machine
    # 8x faster than scikit-learn's threads fighting over the cores
    with threadpool_limits(limits=1):
        for train, test in splitter.split(np.zeros(len(y)), y):
            model = LogisticRegression(C=_C, solver="newton-cg", max_iter=_MAX_ITER)
            model.fit(x[train], y[train])
            predicted[test] = model.predict(x[test])
            accuracies.append(float((predicted[test] == y[test]).mean()))
    top = int(counts.argmax())
    return ArtifactResult(
        accuracy=float(np.mean(accuracies)),
        accuracy_std=float(np.std(accuracies)),
        fold_accuracies=tuple(accuracies),
        macro_f1=float(f1_score(y, predicted, average="macro", labels=np.flatnonzero(counts))),
        majority_share=float(counts[top] / len(y)),
        majority_label=labels[top],
        n_rows=len(used),
        n_skipped=len(records) - len(used),
        folds=folds,
        seed=seed,
        input="hypothesis" if pair else "text",
    )


__all__ = ["DEFAULT_FOLDS", "MODEL", "ArtifactResult", "artifact_accuracy"]
