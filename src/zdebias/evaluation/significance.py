"""Tests of methods against a baseline, per suite, with a 95 % interval for every difference
and Holm's correction within a declared family (docs/design.md §13 "Statistics").

Which test a difference gets:

- ``paired-t``: both methods have runs with the same seeds (two or more in common): a paired
  t-test over those seeds (``scipy.stats.ttest_rel``) and the t interval of the mean
  difference. Runs whose seed the other side lacks are left out and counted (``n_unpaired``).
- ``welch``: the runs do not pair (no seeds, different seeds) but each side has two or more:
  Welch's t-test (unequal variances) and the Welch–Satterthwaite t interval.
- ``mcnemar``: one run on each side, scored on the same rows of a suite (the results keep each
  row's outcome): McNemar's exact test on the rows one model gets right and the other wrong,
  and a paired bootstrap over rows (percentile interval) for the accuracy difference.
- ``student``: only when asked for (``student=True``; the paper's unpaired test).

``p_holm`` is Holm's step-down adjustment within the test's family: ``primary`` (default: each
suite's accuracy, for every method against every baseline) or ``secondary`` (everything else
tested: macro-F1, balanced accuracy, the average, the reliance gap, per-heuristic cells).
``significant`` (the mark ``*`` in every table) means ``p_holm < alpha``.

>>> holm([0.01, 0.04, 0.03])
[0.03, 0.06, 0.06]
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from zdebias.errors import ConfigError
from zdebias.evaluation.settings import CompareSettings
from zdebias.evaluation.suites import summarize

#: confidence level of every interval
LEVEL = 0.95
#: resamples of the paired bootstrap over rows (fixed seed: the same interval every time)
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
#: what each test's name in the outputs means
TEST_NAMES = {
    "paired-t": "paired t-test over seeds",
    "welch": "Welch's t-test (runs do not pair)",
    "student": "Student's t-test (asked for; unpaired, equal variances)",
    "mcnemar": "McNemar's exact test over rows, paired bootstrap interval",
}


def _flat(values: Sequence[float]) -> bool:
    """True when all values are equal up to floating-point round-off."""
    lo, hi = min(values), max(values)
    return hi - lo <= 1e-12 * max(1.0, abs(hi), abs(lo))


def _round(value: float) -> float:
    return float(f"{value:.12g}")


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input's order: the i-th smallest of m is
    multiplied by m − i + 1, kept non-decreasing, capped at 1."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = _round(running)
    return out


def t_interval(mean: float, se: float, df: float, level: float = LEVEL) -> list[float]:
    """``mean ± t(1 − (1 − level)/2, df) · se``."""
    from scipy import stats

    half = float(stats.t.ppf(0.5 + level / 2, df)) * se
    return [mean - half, mean + half]


def _empty(test: str | None, alpha: float) -> dict[str, Any]:
    return {"test": test, "t": None, "p": None, "ci": None, "significant": False, "alpha": alpha}


def ttest(
    a: Sequence[float], b: Sequence[float], *, equal_var: bool = False, alpha: float = 0.05
) -> dict[str, Any]:
    """Two-tailed two-sample t-test of ``b`` against ``a`` (unpaired) with the interval of
    ``mean(b) − mean(a)``.

    Welch's test by default (Welch–Satterthwaite degrees of freedom); Student's with
    ``equal_var=True`` (pooled variance). ``t`` and ``p`` are None (and ``reason`` says why)
    when a side has fewer than two runs or both sides have zero variance. ``significant`` is
    the unadjusted ``p < alpha``; :func:`adjust` replaces it by Holm's.
    """
    from scipy import stats

    out = _empty("student" if equal_var else "welch", alpha)
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
    na, nb = len(a), len(b)
    va, vb = statistics.variance(a), statistics.variance(b)
    diff = sum(b) / nb - sum(a) / na
    if equal_var:
        df = na + nb - 2.0
        se = math.sqrt(((na - 1) * va + (nb - 1) * vb) / df * (1 / na + 1 / nb))
    else:
        qa, qb = va / na, vb / nb
        df = (qa + qb) ** 2 / (qa**2 / (na - 1) + qb**2 / (nb - 1))
        se = math.sqrt(qa + qb)
    out.update({"t": t, "p": p, "df": float(df), "significant": p < alpha})
    out["ci"] = t_interval(diff, se, df)
    return out


def paired_ttest(a: Sequence[float], b: Sequence[float], *, alpha: float = 0.05) -> dict[str, Any]:
    """Two-tailed paired t-test of ``b`` against ``a`` (``a[i]`` and ``b[i]`` share a seed) and
    the t interval of the mean difference ``mean(b − a) ± t(n − 1) · sd / √n``."""
    from scipy import stats

    out = _empty("paired-t", alpha)
    if len(a) != len(b):
        raise ValueError(f"{len(a)} baseline values for {len(b)} paired ones")
    out["n_pairs"] = len(a)
    if len(a) < 2:
        out["reason"] = "a paired t-test needs at least two seeds on both sides"
        return out
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    if _flat(diffs):
        out["reason"] = "the per-seed differences are all equal (zero variance)"
        return out
    result = stats.ttest_rel(list(b), list(a))
    t, p = float(result.statistic), float(result.pvalue)
    n = len(diffs)
    mean = sum(diffs) / n
    se = math.sqrt(statistics.variance(diffs) / n)
    out.update({"t": t, "p": p, "df": float(n - 1), "significant": p < alpha})
    out["ci"] = t_interval(mean, se, n - 1)
    return out


def mcnemar(a: Sequence[bool], b: Sequence[bool], *, alpha: float = 0.05) -> dict[str, Any]:
    """McNemar's exact test of two models' per-row outcomes on the same rows (``a[i]``:
    the baseline got row i right): a two-sided binomial test on the discordant rows, and the
    accuracy difference with a paired bootstrap percentile interval over rows."""
    from scipy import stats

    if len(a) != len(b):
        raise ValueError(f"{len(a)} baseline rows for {len(b)} rows of the other model")
    n = len(a)
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    out = _empty("mcnemar", alpha)
    out.update({"n_rows": n, "only_baseline": only_a, "only_other": only_b})
    if n == 0:
        out["reason"] = "no rows"
        return out
    discordant = only_a + only_b
    p = 1.0 if discordant == 0 else float(stats.binomtest(only_b, discordant, 0.5).pvalue)
    out.update({"p": p, "significant": p < alpha, "ci": bootstrap_interval(only_b, only_a, n)})
    return out


def bootstrap_interval(only_b: int, only_a: int, n: int) -> list[float]:
    """Percentile interval of the accuracy difference (b − a) under the paired bootstrap over
    ``n`` rows: each resample draws n rows with replacement, so the counts of rows only b got
    right, only a got right and the rest are multinomial (exactly resampling the rows)."""
    import numpy as np

    rng = np.random.default_rng(BOOTSTRAP_SEED)
    draws = rng.multinomial(
        n, [only_b / n, only_a / n, 1 - (only_a + only_b) / n], size=BOOTSTRAP_RESAMPLES
    )
    diffs = (draws[:, 0] - draws[:, 1]) / n
    lo, hi = np.quantile(diffs, [0.5 - LEVEL / 2, 0.5 + LEVEL / 2])
    return [float(lo), float(hi)]


def _seeds(doc: Mapping[str, Any]) -> list[Any] | None:
    """The runs' seeds, or None when a run has none or two runs share one (they do not pair)."""
    seeds = [run.get("seed") for run in doc.get("runs", [])]
    if not seeds or any(s is None for s in seeds) or len(set(map(str, seeds))) < len(seeds):
        return None
    return seeds


def _outcomes(doc: Mapping[str, Any], key: str) -> tuple[str, str] | None:
    """The single run's per-row outcomes on suite ``key`` (``"0110…"``) and the rows' digest,
    when the results keep them."""
    runs = doc.get("runs", [])
    result = runs[0].get("results", {}).get(key) if len(runs) == 1 else None
    if not isinstance(result, dict) or not result.get("outcomes") or not result.get("rows"):
        return None
    return str(result["outcomes"]), str(result["rows"])


def difference_test(
    base: Mapping[str, Any],
    other: Mapping[str, Any],
    key: str,
    a: list[float],
    b: list[float],
    *,
    alpha: float = 0.05,
    student: bool = False,
    welch: bool = False,
) -> dict[str, Any]:
    """The test of ``other`` against ``base`` on metric ``key`` (per-run values ``a``, ``b``
    in run order): paired t over shared seeds, Welch, McNemar over rows, or Student's when
    asked for (see the module's docstring)."""
    if student:
        return ttest(a, b, equal_var=True, alpha=alpha)
    if len(a) == 1 and len(b) == 1:
        rows_a, rows_b = _outcomes(base, key), _outcomes(other, key)
        suite = all(key in doc["runs"][0].get("results", {}) for doc in (base, other))
        if not suite:
            out = _empty(None, alpha)
            out["reason"] = (
                f"one run on each side: McNemar's test over rows applies to a suite's "
                f"accuracy, not to {key!r}; train more seeds for a t-test"
            )
            return out
        if rows_a is None or rows_b is None:
            out = _empty(None, alpha)
            out["reason"] = (
                "one run on each side: McNemar's test over rows needs each row's outcome, "
                "which these results do not keep (written by zdebias evaluate before it kept "
                "them); evaluate again, or train more seeds"
            )
            return out
        if rows_a[1] != rows_b[1] or len(rows_a[0]) != len(rows_b[0]):
            out = _empty(None, alpha)
            out["reason"] = "one run on each side, but not scored on the same rows"
            return out
        return mcnemar([c == "1" for c in rows_a[0]], [c == "1" for c in rows_b[0]], alpha=alpha)
    seeds_a, seeds_b = _seeds(base), _seeds(other)
    if not welch and seeds_a is not None and seeds_b is not None:
        index_b = {str(s): i for i, s in enumerate(seeds_b)}
        pairs = [(i, index_b[str(s)]) for i, s in enumerate(seeds_a) if str(s) in index_b]
        if len(pairs) >= 2:
            out = paired_ttest([a[i] for i, _ in pairs], [b[j] for _, j in pairs], alpha=alpha)
            out["n_unpaired"] = len(a) + len(b) - 2 * len(pairs)
            return out
    return ttest(a, b, equal_var=False, alpha=alpha)


def adjust(comparisons: Sequence[dict[str, Any]], family: Sequence[str] | None = None) -> None:
    """Holm-adjust every test of ``comparisons`` (in place) within its family, over all the
    comparisons together: ``primary`` = the metrics in ``family`` (default: each comparison's
    suites), ``secondary`` = every other tested metric. Sets each test's ``family``,
    ``p_holm`` (None where no p) and ``significant`` (``p_holm < alpha``), and each
    comparison's ``families`` (members and size) and ``legend``."""
    if family is not None:
        tested = {key for c in comparisons for item in c["comparisons"] for key in item["tests"]}
        unknown = [key for key in family if key not in tested]
        if unknown:
            raise ConfigError(
                f"family: {', '.join(map(repr, unknown))} not among the tested metrics "
                f"({', '.join(sorted(tested)) or 'none'})"
            )
    members: dict[str, list[dict[str, Any]]] = {"primary": [], "secondary": []}
    first: dict[tuple[frozenset[str], str], dict[str, Any]] = {}
    repeats: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for c in comparisons:
        primary = set(family if family is not None else c.get("suites", []))
        for item in c["comparisons"]:
            for key, test in item["tests"].items():
                test["family"] = "primary" if key in primary else "secondary"
                test["p_holm"] = None
                test["significant"] = False
                if test["p"] is None:
                    continue
                pair = (frozenset((str(c["baseline"]), str(item["name"]))), key)
                if pair in first:  # B against A after A against B: the same test, counted once
                    repeats.append((test, first[pair]))
                    continue
                first[pair] = test
                members[test["family"]].append(test)
    for tests in members.values():
        for test, p in zip(tests, holm([t["p"] for t in tests]), strict=True):
            test["p_holm"] = p
            test["significant"] = p < test["alpha"]
    for test, earlier in repeats:
        test["p_holm"], test["significant"] = earlier["p_holm"], earlier["significant"]
    for c in comparisons:
        keys = list(family) if family is not None else list(c.get("suites", []))
        c["families"] = {
            "primary": {"metrics": keys, "size": len(members["primary"])},
            "secondary": {"size": len(members["secondary"])},
        }
    baselines = list(dict.fromkeys(str(c["baseline"]) for c in comparisons))
    for c in comparisons:
        c["tests_used"] = used_tests(comparisons)
        c["legend"] = legend(c, comparisons, baselines)


def used_tests(comparisons: Sequence[dict[str, Any]]) -> list[str]:
    """The names of the tests that gave a p-value in ``comparisons``, sorted."""
    return sorted(
        {
            t["test"]
            for c in comparisons
            for item in c["comparisons"]
            for t in item["tests"].values()
            if t.get("test") and t.get("p") is not None
        }
    )


def legend(
    comparison: dict[str, Any],
    together: Sequence[dict[str, Any]] | None = None,
    baselines: Sequence[str] | None = None,
) -> str:
    """What the mark and the columns mean, printed once under a comparison's tables
    (``together``: the comparisons adjusted with it, against ``baselines``)."""
    fam = comparison["families"]
    used = used_tests(together or [comparison])
    against = ", ".join(baselines) if baselines else str(comparison["baseline"])
    tests = "; ".join(f"{name}: {TEST_NAMES[name]}" for name in used) or "none could be run"
    metrics = ", ".join(fam["primary"]["metrics"]) or "–"
    return (
        f"* Holm-adjusted p < {comparison['alpha']} (two-tailed) against "
        f"{against}, within the test's family: primary = {metrics} "
        f"({fam['primary']['size']} tests, every method against every baseline), secondary = "
        f"every other metric tested ({fam['secondary']['size']} tests). Tests: {tests}. "
        f"CI: {round(100 * LEVEL)} % interval of the difference, in points."
    )


def compare_results(
    docs: Sequence[Mapping[str, Any]],
    *,
    keys: Sequence[str] | None = None,
    alpha: float = 0.05,
    equal_var: bool = False,
    welch: bool = False,
    average: bool = False,
    family: Sequence[str] | None = None,
    adjusted: bool = True,
) -> dict[str, Any]:
    """Test every document against the first (the baseline), metric by metric.

    ``keys``: metric names to test (default: the suites, each suite's macro-F1 and balanced
    accuracy where the baseline's runs have them, plus ``Avg.`` of the suites with
    ``average``). ``equal_var``: Student's test everywhere (the paper's); ``welch``: Welch's
    even where the seeds pair. ``family``: the primary family's metrics (default: the
    suites); ``adjusted=False`` leaves Holm to the caller (:func:`adjust` over several
    comparisons). Returns ``{"baseline", "alpha", "suites", "comparisons": [{"name",
    "tests": {key: {...}}}], "families", "legend"}``; each test holds both sides'
    mean/std/runs, the difference of means, its interval ``ci``, the test, ``p``, ``p_holm``
    and ``significant``.
    """
    from zdebias.evaluation.catalogue import tested_keys
    from zdebias.evaluation.tables import suite_names

    if len(docs) < 2:
        raise ValueError("compare needs a baseline and at least one other results document")
    names = list(keys) if keys is not None else suite_names(docs[:1])

    def values(doc: Mapping[str, Any], key: str) -> list[float] | None:
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
                **difference_test(
                    base, doc, key, a, b, alpha=alpha, student=equal_var, welch=welch
                ),
            }
        comparisons.append({"name": doc.get("name"), "tests": tests})
    out = {
        "baseline": base.get("name"),
        "alpha": alpha,
        "level": LEVEL,
        "test": "student" if equal_var else ("welch" if welch else "auto"),
        "suites": suite_names(docs[:1]),
        "comparisons": comparisons,
    }
    if adjusted:
        adjust([out], family)
    return out


def compare_files(
    paths: Sequence[str], settings: CompareSettings | None = None, **overrides: Any
) -> tuple[dict[str, Any], str]:
    """Tests of ``zdebias evaluate`` results files against the first: the comparison (with
    its ``table``) and its Markdown text."""
    from zdebias.evaluation.suites import read_results
    from zdebias.evaluation.tables import suite_names, summary_table, table_markdown

    cfg = CompareSettings.of(settings, **overrides)
    if len(paths) < 2:
        raise ConfigError("compare needs at least two results files: BASELINE OTHER...")
    docs = [read_results(p) for p in paths]
    keys = list(docs[0].get("summary", {})) if cfg.detail else None
    comparison = compare_results(
        docs,
        keys=keys,
        alpha=cfg.alpha,
        equal_var=cfg.student,
        welch=cfg.welch,
        average=cfg.average,
        family=cfg.family,
    )
    table = summary_table(
        docs, columns=suite_names(docs[:1]), average=cfg.average, comparison=comparison
    )
    note = (
        "Accuracy in %, mean±std over runs. The tests below also test each suite's macro-F1 "
        "and balanced accuracy."
    )
    parts = [table_markdown(table), "", note, "", comparison_markdown(comparison), ""]
    parts += [comparison["legend"], ""]
    from zdebias.evaluation.reliance import reliance_markdown

    reliance = reliance_markdown(docs, comparison)
    if reliance:
        parts += [reliance, ""]
    return {"table": table, **comparison}, "\n".join(parts)


def _points(value: float | None, sign: str = "+") -> str:
    return "–" if value is None else f"{100 * value:{sign}.2f}"


def comparison_markdown(comparison: dict[str, Any]) -> str:
    """One line per (method, metric): both sides, the difference in points with its 95 %
    interval, the test, t, p, Holm-adjusted p and the mark (``*``: Holm-adjusted p < α; the
    legend is :func:`legend`)."""
    lines = [
        "| method | metric | baseline | method | Δ (points) | 95 % CI | test | t | p | "
        "p (Holm) | |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---|",
    ]
    for item in comparison["comparisons"]:
        for key, test in item["tests"].items():

            def pct(side: dict[str, Any]) -> str:
                text = f"{100 * side['mean']:.2f}"
                return text + (f"±{100 * side['std']:.2f}" if side["n_runs"] > 1 else "")

            ci = test.get("ci")
            interval = "–" if not ci else f"[{_points(ci[0])}, {_points(ci[1])}]"
            t = "–" if test.get("t") is None else f"{test['t']:.3f}"
            p = "–" if test["p"] is None else f"{test['p']:.4f}"
            holm_p = "–" if test.get("p_holm") is None else f"{test['p_holm']:.4f}"
            name = test.get("test") or "–"
            if test.get("n_pairs") is not None and test["p"] is not None:
                name += f" ({test['n_pairs']} seeds)"
            mark = "*" if test.get("significant") else ""
            if test["p"] is None:
                mark = test.get("reason", "–")
            lines.append(
                f"| {item['name']} | {key} | {pct(test['baseline'])} | {pct(test['other'])} | "
                f"{100 * test['difference']:+.2f} | {interval} | {name} | {t} | {p} | "
                f"{holm_p} | {mark} |"
            )
    return "\n".join(lines)
