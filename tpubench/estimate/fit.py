"""The efficiency fit: pure numpy, no pandas, no I/O.

Each calibration row i (a published or measured operating point) gives

    y_i = log(efficiency_i) = log(roofline seconds_i / observed seconds_i)

and the model is linear in a few interpretable terms x_i (`features.TERMS`: an intercept, log
concurrency, log chips, the roofline's prefill share of the time, log of the roofline decode step),
with coefficients per chip family f that are partially pooled across families:

    y_i = x_i . (beta + delta_f(i))

beta is shared by every family and unpenalised; each family's own deviation delta_f is penalised by
`ridge` * |delta_f|^2, so a family with few rows keeps close to the pooled fit and one with many
rows earns its own coefficients (for an intercept-only model, family f's level is the pooled one
plus n_f / (n_f + ridge) of the gap to its own mean). Solved as ordinary least squares over the rows
augmented with sqrt(ridge) pseudo-rows for every delta. A term that does not vary over the
calibration rows (every row on 8 chips) cannot be told from the intercept: it is held at 0 and
`Fit.held` names it.

The prediction interval is split-conformal in spirit but uses every row: leave-one-out residuals
(each row predicted by a fit without it, or without its whole group, `loo_residuals`), and a half-width in log space equal to
the ceil((n + 1) * coverage)-th smallest |residual| (`conformal_halfwidth`), which covers a new
exchangeable point with probability >= coverage. With fewer rows than that rank needs (n < 9 for
90%), the largest residual is used and the interval is marked below nominal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

DEFAULT_RIDGE = 4.0   # pseudo-rows' weight: a family's own coefficients count after ~4 rows of its own
_CONSTANT = 1e-9      # a term whose spread over the rows is below this is held at 0


@dataclass(frozen=True)
class Fit:
    terms: tuple[str, ...]
    pooled: np.ndarray                       # beta
    deviations: dict[str, np.ndarray]        # delta_f, one per family seen in the rows
    rows: dict[str, int]                     # calibration rows per family
    ridge: float
    held: tuple[str, ...] = field(default=())  # terms held at 0 (no spread over the rows)

    def coefficients(self, family: str | None) -> np.ndarray:
        """beta + delta_f; a family the rows never saw gets the pooled beta."""
        return self.pooled + self.deviations.get(family or "", np.zeros_like(self.pooled))

    def predict(self, x: Sequence[float], family: str | None) -> float:
        """Predicted log efficiency of one point."""
        return float(np.dot(np.asarray(x, dtype=float), self.coefficients(family)))


def fit_efficiency(X, y, families: Sequence[str], *, terms: Sequence[str] | None = None,
                   ridge: float = DEFAULT_RIDGE) -> Fit:
    """Fit y ~ X . (beta + delta_family) with ridge-penalised family deviations (module notes).

    X: (n, p) with the intercept as column 0; y: (n,); families: n labels."""
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    n, p = X.shape
    if n == 0 or len(y) != n or len(families) != n:
        raise ValueError(f"need matching rows: X {X.shape}, y {y.shape}, families {len(families)}")
    if ridge <= 0:
        raise ValueError(f"ridge must be positive, got {ridge}")
    names = tuple(terms) if terms is not None else tuple(f"x{j}" for j in range(p))
    free = [0] + [j for j in range(1, p) if np.ptp(X[:, j]) > _CONSTANT]
    fams = sorted(set(families))
    q = len(free)
    # Columns: beta (q), then delta_f (q) per family.
    design = np.zeros((n + q * len(fams), q * (1 + len(fams))))
    target = np.concatenate([y, np.zeros(q * len(fams))])   # pseudo-rows pull delta to 0
    Xf = X[:, free]
    design[:n, :q] = Xf
    for k, fam in enumerate(fams):
        cols = slice(q * (1 + k), q * (2 + k))
        mask = np.array([f == fam for f in families])
        design[:n, cols] = np.where(mask[:, None], Xf, 0.0)
        design[n + q * k: n + q * (k + 1), cols] = math.sqrt(ridge) * np.eye(q)
    solution = _least_squares(design, target)

    def expand(part: np.ndarray) -> np.ndarray:
        full = np.zeros(p)
        full[free] = part
        return full

    return Fit(terms=names, pooled=expand(solution[:q]),
               deviations={fam: expand(solution[q * (1 + k): q * (2 + k)]) for k, fam in enumerate(fams)},
               rows={fam: sum(1 for f in families if f == fam) for fam in fams}, ridge=ridge,
               held=tuple(names[j] for j in range(p) if j not in free))


def _least_squares(design: np.ndarray, target: np.ndarray) -> np.ndarray:
    """argmin |design x - target|^2 through the normal equations: the design is a few hundred rows
    by a few dozen columns, where numpy's lstsq (an SVD through LAPACK) spent 60 ms a solve on a
    busy 2-core machine in BLAS threads that fought each other, against 0.1 ms here. A relative
    1e-12 on the diagonal keeps a column that no row or pseudo-row constrains from making the system
    singular; with full rank the answer is lstsq's to rounding."""
    gram = design.T @ design
    scale = float(np.trace(gram)) / max(len(gram), 1) or 1.0
    try:
        return np.linalg.solve(gram + 1e-12 * scale * np.eye(len(gram)), design.T @ target)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(design, target, rcond=None)[0]


def loo_residuals(X, y, families: Sequence[str], *, ridge: float = DEFAULT_RIDGE,
                  groups: Sequence | None = None) -> np.ndarray:
    """y_i minus the prediction of a fit on every row but i (with `groups`, on every row outside
    i's group): what the model gets wrong on a row it never saw. Needs at least 2 groups."""
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    n = len(y)
    labels = np.arange(n) if groups is None else np.asarray(groups)
    if len(labels) != n or len(set(labels.tolist())) < 2:
        raise ValueError("leave-one-out needs at least 2 rows (groups) and one label per row")
    out = np.empty(n)
    for g in dict.fromkeys(labels.tolist()):
        keep = labels != g
        fit = fit_efficiency(X[keep], y[keep], [f for f, k in zip(families, keep) if k], ridge=ridge)
        for i in np.flatnonzero(~keep):
            out[i] = y[i] - fit.predict(X[i], families[i])
    return out


def conformal_halfwidth(residuals, coverage: float = 0.9) -> tuple[float, bool]:
    """(half-width in log space, nominal): the ceil((n+1) coverage)-th smallest |residual|, nominal
    True; when n is too small for that rank, the largest |residual| and nominal False."""
    r = np.sort(np.abs(np.asarray(residuals, dtype=float)))
    n = len(r)
    if n == 0:
        raise ValueError("no residuals")
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must lie in (0, 1), got {coverage}")
    rank = math.ceil((n + 1) * coverage)
    if rank > n:
        return float(r[-1]), False
    return float(r[rank - 1]), True


__all__ = ["DEFAULT_RIDGE", "Fit", "conformal_halfwidth", "fit_efficiency", "loo_residuals"]
