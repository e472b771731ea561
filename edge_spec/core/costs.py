"""What one target forward over n tokens costs: a profile's table, refined by measured steps.

Measured step times are noisy (on a busy CPU one size's steps spread by tens of percent), and
the controller picks the size with the best expected tokens per ms. A separate estimate per size
would let one slow step make that size look worse than its neighbours, and the controller
would then avoid it and never measure it again. So the table's shape is trusted, and what is
learned is shared: the 1-token cost (plain decoding's step), one scale for every multi-token
size (the machine's speed and load now), and a smooth correction of the table's shape around
powers of two that only moves after many steps (a profile measured on another machine).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping

import numpy as np


class VerifyCosts:
    """Predicted ms of one forward over n tokens, n = 1..max_n + 1, learned from steps."""

    def __init__(
        self,
        table: Mapping[int, float],
        max_n: int,
        smoothing: float,
        shape_weight: float,
        shape_decay: float,
        size_weight: float,
    ) -> None:
        self._table = sorted((int(n), float(ms)) for n, ms in table.items())
        self._xs = [x for x, _ in self._table]
        self._base = np.asarray([0.0] + [self.table_ms(n) for n in range(1, max_n + 2)])
        self._s, self._w0, self._decay = smoothing, shape_weight, shape_decay
        self._one = float(self._base[1])
        self._log_scale = 0.0
        self._multi_seen = False
        # The shape correction lives on nodes at n = 2, 4, ..., 2^j, interpolated in log2(n):
        # each size's step informs its two neighbouring nodes, so no size stands alone.
        x = np.log2(np.maximum(np.arange(max_n + 2), 2))
        lo = np.floor(x).astype(np.intp)
        self._node_lo, self._node_w = lo, x - lo
        n_nodes = int(lo[-1]) + 2
        self._sum = np.zeros(n_nodes)
        self._weight = np.zeros(n_nodes)
        # What a size's own steps say beyond the smooth curve (a kernel that is faster at
        # multiples of its tile width), shrunk toward the curve by `size_weight` steps, so
        # one slow step moves it little.
        self._size_w0 = size_weight
        self._size_sum = np.zeros(max_n + 2)
        self._size_weight = np.zeros(max_n + 2)
        self._vec: np.ndarray | None = None

    def table_ms(self, n: int) -> float:
        """The profile's table at n: interpolated, extrapolated linearly past its ends."""
        xs, table = self._xs, self._table
        i = bisect_left(xs, n)
        if i < len(xs) and xs[i] == n:
            return table[i][1]
        if i == 0:
            return table[0][1] * n / xs[0]
        if i == len(xs):
            if len(xs) == 1:
                return table[0][1] * n / xs[0]
            (x0, y0), (x1, y1) = table[-2], table[-1]
            return y1 + (y1 - y0) / (x1 - x0) * (n - x1)
        (x0, y0), (x1, y1) = table[i - 1], table[i]
        return y0 + (y1 - y0) * (n - x0) / (x1 - x0)

    def _shape(self) -> np.ndarray:
        """The learned log correction of the table's shape at every n (shrunk toward none)."""
        node = self._sum / (self._weight + self._w0)
        lo, w = self._node_lo, self._node_w
        own = self._size_sum / (self._size_weight + self._size_w0)
        return (1.0 - w) * node[lo] + w * node[lo + 1] + own

    def _curve_at(self, n: int) -> float:
        """The smooth part of `_shape()` at one size (its two nodes), without the whole vector."""
        lo, w, w0 = int(self._node_lo[n]), float(self._node_w[n]), self._w0
        s, wt = self._sum, self._weight
        return (1.0 - w) * float(s[lo]) / (float(wt[lo]) + w0) + w * float(s[lo + 1]) / (
            float(wt[lo + 1]) + w0
        )

    def vector(self) -> np.ndarray:
        """ms for every n (index n; index 0 unused), never below the 1-token cost."""
        if self._vec is None:
            multi = self._base * np.exp(self._log_scale + self._shape())
            vec = np.maximum(multi, self._one)
            vec[1] = self._one
            self._vec = vec
        return self._vec

    def ms(self, n: int) -> float:
        """Predicted ms of a forward over n tokens."""
        if n == 1:
            return self._one
        vec = self.vector()
        if n < len(vec):
            return float(vec[n])
        return max(self._one, self.table_ms(n) * math.exp(self._log_scale))

    def observe(self, n: int, ms: float) -> None:
        """Learn from one measured forward over n tokens."""
        if ms <= 0 or n < 1:
            return
        self._vec = None
        if n == 1:
            self._one += self._s * (ms - self._one)
            if not self._multi_seen:  # until a multi-token step is seen, scale like one token
                self._log_scale = math.log(self._one / self._base[1])
            return
        gap = math.log(ms / self.table_ms(n))
        if n >= len(self._base):
            self._log_scale += self._s * (gap - self._log_scale)
            return
        own = float(self._size_sum[n]) / (float(self._size_weight[n]) + self._size_w0)
        shape = self._curve_at(n) + own
        if not self._multi_seen:
            self._multi_seen, self._log_scale = True, gap - shape
        else:
            self._log_scale += self._s * (gap - shape - self._log_scale)
        lo, w = self._node_lo[n], self._node_w[n]
        self._sum *= self._decay
        self._weight *= self._decay
        resid = gap - self._log_scale
        self._sum[lo] += (1.0 - w) * resid
        self._sum[lo + 1] += w * resid
        self._weight[lo] += 1.0 - w
        self._weight[lo + 1] += w
        self._size_sum *= self._decay
        self._size_weight *= self._decay
        self._size_sum[n] += resid - self._curve_at(n)
        self._size_weight[n] += 1.0


__all__ = ["VerifyCosts"]
