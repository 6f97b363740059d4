"""Two-tailed t-tests between methods over runs (seeds), per suite (GD-NLI §5.1: 95% level).

>>> ttest([0.80, 0.81, 0.79], [0.83, 0.84, 0.82])["significant"]
True
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

from zdebias.classify.settings import CompareSettings
from zdebias.errors import ConfigError
from zdebias.evaluation.suites import summarize


def _flat(values: Sequence[float]) -> bool:
    """True when all values are equal up to floating-point round-off."""
    lo, hi = min(values), max(values)
    return hi - lo <= 1e-12 * max(1.0, abs(hi), abs(lo))


def ttest(
    a: Sequence[float], b: Sequence[float], *, equal_var: bool = True, alpha: float = 0.05
) -> dict[str, Any]:
    """Two-tailed two-sample t-test of ``b`` against ``a``.

    Student's test by default (as the paper); Welch's with ``equal_var=False``. ``t`` and ``p``
    are None (and ``reason`` says why) when a side has fewer than two runs or both sides have
    zero variance.
    """
    from scipy import stats

    out: dict[str, Any] = {
        "t": None,
        "p": None,
        "significant": False,
        "alpha": alpha,
        "test": "student" if equal_var else "welch",
    }
    if len(a) < 2 or len(b) < 2:
        out["reason"] = "a t-test needs at least two runs on each side"
        return out
    if _flat(a) and _flat(b):  # scipy would divide round-off noise by round-off noise
        out["reason"] = "both sides have zero variance"
        return out
    with warnings.catch_warnings():  # one side may have zero variance: scipy warns, t is fine
        warnings.simplefilter("ignore", RuntimeWarning)
        result = stats.ttest_ind(list(b), list(a), equal_var=equal_var)
    t, p = float(result.statistic), float(result.pvalue)
    if math.isnan(t) or math.isnan(p):
        out["reason"] = "both sides have zero variance"
        return out
    out.update({"t": t, "p": p, "significant": p < alpha})
    if hasattr(result, "df"):
        out["df"] = float(result.df)
    return out


def compare_results(
    docs: Sequence[dict[str, Any]],
    *,
    keys: Sequence[str] | None = None,
    alpha: float = 0.05,
    equal_var: bool = True,
    average: bool = False,
) -> dict[str, Any]:
    """Test every document against the first (the baseline), suite by suite.

    ``keys``: metric names to test (default: the suites, each suite's macro-F1 and balanced
    accuracy where the baseline's runs have them, plus ``Avg.`` of the suites with
    ``average``).
    Returns ``{"baseline": name, "comparisons": [{"name", "tests": {key: {...}}}]}`` where each
    test holds both sides' mean/std/runs, the difference of means and the t-test.
    """
    from zdebias.evaluation.metrics import tested_keys
    from zdebias.evaluation.tables import suite_names

    if len(docs) < 2:
        raise ValueError("compare needs a baseline and at least one other results document")
    names = list(keys) if keys is not None else suite_names(docs[:1])

    def values(doc: dict[str, Any], key: str) -> list[float] | None:
        runs = doc.get("runs", [])
        if key == "Avg.":
            per_run = []
            for run in runs:
                vals = [run["metrics"].get(k) for k in names if k != "Avg."]
                if not vals or any(v is None for v in vals):
                    return None
                per_run.append(sum(vals) / len(vals))
            return per_run
        vals = [run["metrics"].get(key) for run in runs]
        return None if not vals or any(v is None for v in vals) else [float(v) for v in vals]

    tested = [*names, *(tested_keys(docs[0], names) if keys is None else [])]
    if average and "Avg." not in names:
        tested.append("Avg.")
    gap = "reliance-gap"  # zdebias.evaluation.reliance.GAP: tested, never averaged
    if keys is None and gap in docs[0].get("summary", {}) and gap not in tested:
        tested.append(gap)
    base = docs[0]
    comparisons = []
    for doc in docs[1:]:
        tests: dict[str, Any] = {}
        for key in tested:
            a, b = values(base, key), values(doc, key)
            if a is None or b is None:
                continue
            sa, sb = summarize(a), summarize(b)
            tests[key] = {
                "baseline": {k: sa[k] for k in ("mean", "std", "n_runs")},
                "other": {k: sb[k] for k in ("mean", "std", "n_runs")},
                "difference": sb["mean"] - sa["mean"],
                **ttest(a, b, equal_var=equal_var, alpha=alpha),
            }
        comparisons.append({"name": doc.get("name"), "tests": tests})
    return {
        "baseline": base.get("name"),
        "alpha": alpha,
        "test": "student" if equal_var else "welch",
        "comparisons": comparisons,
    }


def compare_files(
    paths: Sequence[str], settings: CompareSettings | None = None, **overrides: Any
) -> tuple[dict[str, Any], str]:
    """t-tests of ``zdebias evaluate`` results files against the first: the comparison (with
    its ``table``) and its Markdown text."""
    from zdebias.evaluation.suites import read_results
    from zdebias.evaluation.tables import suite_names, summary_table, table_markdown

    cfg = CompareSettings.of(settings, **overrides)
    if len(paths) < 2:
        raise ConfigError("compare needs at least two results files: BASELINE OTHER...")
    docs = [read_results(p) for p in paths]
    keys = list(docs[0].get("summary", {})) if cfg.detail else None
    comparison = compare_results(
        docs, keys=keys, alpha=cfg.alpha, equal_var=not cfg.welch, average=cfg.average
    )
    table = summary_table(
        docs, columns=suite_names(docs[:1]), average=cfg.average, comparison=comparison
    )
    note = (
        f"* p < {cfg.alpha} (two-tailed {comparison['test']} t-test against "
        f"{comparison['baseline']}); accuracy in %, mean±std over runs. The t-tests below "
        "also test each suite's macro-F1 and balanced accuracy."
    )
    parts = [table_markdown(table), "", note, "", comparison_markdown(comparison), ""]
    from zdebias.evaluation.reliance import reliance_markdown

    reliance = reliance_markdown(docs, comparison)
    if reliance:
        parts += [reliance, ""]
    return {"table": table, **comparison}, "\n".join(parts)


def comparison_markdown(comparison: dict[str, Any]) -> str:
    """One line per (method, suite): difference in points, t, p, significant or not."""
    lines = [
        "| method | suite | baseline | method | Δ (points) | t | p | significant |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for item in comparison["comparisons"]:
        for key, test in item["tests"].items():

            def pct(side: dict[str, Any]) -> str:
                text = f"{100 * side['mean']:.2f}"
                return text + (f"±{100 * side['std']:.2f}" if side["n_runs"] > 1 else "")

            t = "–" if test["t"] is None else f"{test['t']:.3f}"
            p = "–" if test["p"] is None else f"{test['p']:.4f}"
            sig = (
                "yes"
                if test["significant"]
                else ("no" if test["p"] is not None else test.get("reason", "–"))
            )
            lines.append(
                f"| {item['name']} | {key} | {pct(test['baseline'])} | {pct(test['other'])} | "
                f"{100 * test['difference']:+.2f} | {t} | {p} | {sig} |"
            )
    return "\n".join(lines)
