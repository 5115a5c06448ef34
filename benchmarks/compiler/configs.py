"""The names the harness's modules share: compile targets, problem variants and tiles (no
Triton needed, so the plan and the comparison load without it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilesolve.solver.families.triton_compiler.target import CompilerTarget


@dataclass(frozen=True)
class Target:
    """A compile target: Triton's GPUTarget arguments."""

    name: str  # sm80, gfx942, ...
    backend: str  # "cuda" or "hip"
    arch: int | str  # compute capability as Triton writes it (80) or the gfx name
    warp_size: int

    def compiler_target(self) -> CompilerTarget:
        """The triton family's description of this target (`triton_compiler.target`)."""
        from tilesolve.solver.families.triton_compiler.target import CompilerTarget

        if isinstance(self.arch, str):
            return CompilerTarget.amd(self.arch)
        return CompilerTarget.cuda(self.arch // 10, self.arch % 10)


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("sm75", "cuda", 75, 32),
        Target("sm80", "cuda", 80, 32),
        Target("sm86", "cuda", 86, 32),
        Target("sm89", "cuda", 89, 32),
        Target("sm90", "cuda", 90, 32),
        Target("sm100", "cuda", 100, 32),
        Target("sm120", "cuda", 120, 32),
        Target("gfx942", "hip", "gfx942", 64),
        Target("gfx950", "hip", "gfx950", 64),
    )
}


def padded_head_dim(head_dim: int) -> int:
    """tl.arange needs a power of two >= 16: the head dim the kernel's tiles use."""
    return max(16, 1 << (head_dim - 1).bit_length())


@dataclass(frozen=True)
class Variant:
    """The problem as the kernel sees it: head dim (before padding), dtype, causal mask."""

    head_dim: int
    dtype: str
    causal: bool

    @property
    def padded_head_dim(self) -> int:
        """The head dim the kernel's tiles use (`padded_head_dim`)."""
        return padded_head_dim(self.head_dim)


@dataclass(frozen=True)
class Tile:
    """One configuration of the triton family. Forward: block_m x block_n. Backward: block_m
    x block_n is the dK/dV loop's tile (BLOCK_M1 streamed query rows x BLOCK_N1 resident
    keys), dq_block_m x dq_block_n the dQ loop's (BLOCK_M2 resident x BLOCK_N2 streamed)."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    dq_block_m: int = 0
    dq_block_n: int = 0


def from_row(row: Mapping[str, Any]) -> tuple[Variant, Tile]:
    """The variant and tile of a plan or data row (a dict of its CSV columns)."""
    variant = Variant(int(row["head_dim"]), str(row["dtype"]), bool(int(row["causal"])))
    tile = Tile(
        int(row["block_m"]),
        int(row["block_n"]),
        int(row["num_warps"]),
        int(row["num_stages"]),
        int(row.get("dq_block_m") or 0),
        int(row.get("dq_block_n") or 0),
    )
    return variant, tile
