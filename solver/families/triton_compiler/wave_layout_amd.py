"""How Triton's AMD backend lays the waves of a workgroup over the two chained dots of an
attention loop (S = Q K^T, then O += P V), and the work each wave does there (docs/model.md
19.10: the register estimate's "wave layout" and "The waves' copies").

AccelerateAMDMatmul's `warpsPerTile` for chained dots (read off the compiled TTGIR): the first
dot puts all w waves along its rows, so a wave holds max(rows / w, m) rows of S (m the MFMA
edge) and every column; the second puts w_m = min(w, ceil(rows / m)) waves along the rows and
w / w_m along dv, a wave holding rows / w_m rows and max(dv / (w / w_m), m) columns of O. Where
the waves outnumber the MFMA tiles along a dim, the extra waves compute copies: each issues the
MFMAs (and the softmax) of its rows and columns whether another wave has them too. The
per-wave MFMA count this gives matches every compiled forward loop of
`benchmarks/data/compiler/amd_load_cover.csv` (`tests/test_triton_rocm.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...space import FloatArray


@dataclass(frozen=True)
class ChainedDotLayout:
    """A wave's share of the two chained dots of a `rows`-row block whose second dot has
    `out_cols` columns, over `warps` waves (arrays over the candidates, elements)."""

    rows: FloatArray
    out_cols: FloatArray
    warps: FloatArray
    rows_first: FloatArray  # rows of S a wave holds (all of its columns)
    rows_second: FloatArray  # rows of O a wave holds
    cols_second: FloatArray  # columns of O a wave holds

    @classmethod
    def of(
        cls,
        rows: FloatArray,
        out_cols: FloatArray,
        warps: FloatArray,
        m_first: FloatArray,
        m_second: FloatArray,
    ) -> ChainedDotLayout:
        """The layout; `m_first`, `m_second` the MFMA edges of the two dots."""
        waves_m = np.minimum(warps, np.ceil(rows / m_second))  # along the second dot's rows
        return cls(
            rows,
            out_cols,
            warps,
            np.asarray(np.maximum(rows / warps, m_first)),
            np.asarray(rows / waves_m),
            np.asarray(np.maximum(out_cols / (warps / waves_m), m_second)),
        )

    @property
    def copies(self) -> tuple[FloatArray, FloatArray]:
        """The work the waves do over the work there is, per dot (>= 1): the first dot's w x
        rows_first rows of S against its rows, the second's w x rows_second x cols_second
        elements of O against rows x out_cols."""
        first = self.warps * self.rows_first / self.rows
        second = self.warps * self.rows_second * self.cols_second / (self.rows * self.out_cols)
        return np.asarray(first), np.asarray(second)
