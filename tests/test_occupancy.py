"""`tilesolve.solver.occupancy` against NVIDIA's occupancy calculator (`cuda_occupancy.h`).

Two layers:
- the worked examples of cuda_occupancy.h run on them (numbers returned by the header);
- a differential test: `tests/occupancy_harness.cpp` is compiled against the real header
  (host code only, no GPU) and every launch of a deterministic set of edge cases and random
  launches is compared field by field: blocks per SM, each per-resource limit, the limiting
  factor set, and the registers / shared memory allocated per block.

The SM limits are those of the CUDA C++ Programming Guide ("Technical Specifications per
Compute Capability"), written out here per compute capability (the harness holds the
device-property half of the same table).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tilesolve.solver.hardware import SmLimits
from tilesolve.solver.occupancy import Limiter, OccupancyArrays, occupancy, occupancy_arrays

KIB = 1024
INT_MAX = 2**31 - 1

# CUDA C++ Programming Guide, "Technical Specifications per Compute Capability": thr/SM,
# blocks/SM, smem/SM max (KiB), smem/block opt-in (KiB),
# smem allocation granularity (B), reserved smem/block (B), carveout options (KiB).
_PART1: dict[str, tuple[int, int, int, int, int, int, tuple[int, ...]]] = {
    "7.0": (2048, 32, 96, 96, 256, 0, (0, 8, 16, 32, 64, 96)),
    "7.5": (1024, 16, 64, 64, 256, 0, (32, 64)),
    "8.0": (2048, 32, 164, 163, 128, 1024, (0, 8, 16, 32, 64, 100, 132, 164)),
    "8.6": (1536, 16, 100, 99, 128, 1024, (0, 8, 16, 32, 64, 100)),
    "8.7": (1536, 16, 164, 163, 128, 1024, (0, 8, 16, 32, 64, 100, 132, 164)),
    "8.9": (1536, 24, 100, 99, 128, 1024, (0, 8, 16, 32, 64, 100)),
    "9.0": (2048, 32, 228, 227, 128, 1024, (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)),
    "10.0": (2048, 32, 228, 227, 128, 1024, (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)),
    "12.0": (1536, 24, 100, 99, 128, 1024, (0, 8, 16, 32, 64, 100)),
}

# The compute capabilities the brief requires, plus the other Part 1 rows the header knows.
DIFFERENTIAL_CCS = ["7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "8.7", "10.0", "12.0"]
MIN_LAUNCHES_PER_CC = 300

# cudaOccLimitingFactor (cuda_occupancy.h).
OCC_LIMIT_WARPS = 0x01
OCC_LIMIT_REGISTERS = 0x02
OCC_LIMIT_SHARED_MEMORY = 0x04
OCC_LIMIT_BLOCKS = 0x08
OCC_LIMIT_BARRIERS = 0x10
OCC_LIMIT_VIRTUAL_RESOURCES = 0x20
_LIMITER_BITS = {
    Limiter.WARPS: OCC_LIMIT_WARPS,
    Limiter.REGISTERS: OCC_LIMIT_REGISTERS,
    Limiter.SHARED_MEMORY: OCC_LIMIT_SHARED_MEMORY,
    Limiter.BLOCKS: OCC_LIMIT_BLOCKS,
}


def sm_limits(cc: str) -> SmLimits:
    """The SM limits of one compute capability (CUDA C++ Programming Guide, "Technical
    Specifications per Compute Capability")."""
    thr_sm, blocks_sm, smem_sm_kib, optin_kib, gran, reserved, carveouts = _PART1[cc]
    return SmLimits(
        compute_capability=cc,
        warp_size_threads=32,
        max_threads_per_block=1024,
        max_threads_per_sm=thr_sm,
        max_blocks_per_sm=blocks_sm,
        regs_per_sm=65536,
        max_regs_per_block=65536,
        max_regs_per_thread=255,
        reg_alloc_unit_regs=256,
        reg_file_subpartitions=4,
        smem_per_sm_bytes=smem_sm_kib * KIB,
        smem_per_block_default_bytes=48 * KIB,
        smem_per_block_optin_bytes=optin_kib * KIB,
        smem_alloc_granularity_bytes=gran,
        reserved_smem_per_block_bytes=reserved,
        smem_carveout_options_kib=carveouts,
    )


# ---------------------------------------------------------------------------------------
# Worked examples, cuda_occupancy.h run on them
# ---------------------------------------------------------------------------------------

SMEM = Limiter.SHARED_MEMORY
REGS = Limiter.REGISTERS


@pytest.mark.parametrize(
    ("cc", "threads", "regs", "smem", "fields"),
    [
        (
            "8.0", 128, 96, 48 * KIB,
            dict(blocks_per_sm=3, limiters=(SMEM,), limit_warps=16, limit_registers=5,
                 limit_shared_memory=3, limit_blocks=32, regs_per_block=12288,
                 smem_per_block_bytes=50176, smem_per_sm_config_bytes=167936,
                 active_warps_per_sm=12, max_warps_per_sm=64),
        ),
        (
            "8.0", 256, 128, 80 * KIB,
            dict(blocks_per_sm=2, limiters=(REGS, SMEM), limit_warps=8, limit_registers=2,
                 limit_shared_memory=2, limit_blocks=32, regs_per_block=32768,
                 smem_per_block_bytes=82944, active_warps_per_sm=16),
        ),
        (
            "9.0", 384, 168, 200 * KIB,
            dict(blocks_per_sm=1, limiters=(REGS, SMEM), limit_warps=5, limit_registers=1,
                 limit_shared_memory=1, limit_blocks=32, regs_per_block=64512,
                 smem_per_block_bytes=205824, smem_per_sm_config_bytes=233472,
                 active_warps_per_sm=12),
        ),
    ],
)  # fmt: skip
def test_worked_examples_table(cc: str, threads: int, regs: int, smem: int, fields: dict) -> None:
    occ = occupancy(sm_limits(cc), threads, regs, smem)
    for name, expected in fields.items():
        assert getattr(occ, name) == expected, name


def test_worked_examples_occupancy_fraction() -> None:
    assert occupancy(sm_limits("8.0"), 128, 96, 48 * KIB).occupancy_fraction == 0.1875
    assert occupancy(sm_limits("8.0"), 256, 128, 80 * KIB).occupancy_fraction == 0.25
    assert occupancy(sm_limits("9.0"), 384, 168, 200 * KIB).occupancy_fraction == 0.1875


@pytest.mark.parametrize(
    ("cc", "threads", "regs", "smem", "carveout", "blocks", "limiters"),
    [
        # A100 carveouts: 50 % -> 82 KiB -> 100 KiB config; 25 % / 0 % -> smallest config
        # holding one 49 KiB block (64 KiB) -> 1.
        ("8.0", 128, 96, 48 * KIB, 50, 2, (SMEM,)),
        ("8.0", 128, 96, 48 * KIB, 25, 1, (SMEM,)),
        ("8.0", 128, 96, 48 * KIB, 0, 1, (SMEM,)),
        ("8.0", 128, 96, 48 * KIB, 100, 3, (SMEM,)),
        # A100: 163 KiB dynamic is the largest that fits (cap = 163 KiB + 1 KiB reserved).
        ("8.0", 128, 96, 163 * KIB, -1, 1, (SMEM,)),
        ("8.0", 128, 96, 164 * KIB, -1, 0, (SMEM,)),
        ("8.6", 128, 96, 48 * KIB, -1, 2, (SMEM,)),
        ("8.9", 128, 255, 64 * KIB, -1, 1, (SMEM,)),
        ("7.0", 256, 64, 48 * KIB, -1, 2, (SMEM,)),
        ("7.5", 128, 128, 32 * KIB, -1, 2, (SMEM,)),
        ("10.0", 128, 128, 100 * KIB, -1, 2, (SMEM,)),
        ("12.0", 128, 128, 48 * KIB, -1, 2, (SMEM,)),
        ("9.0", 128, 255, 0, -1, 2, (REGS,)),
        ("9.0", 128, 256, 0, -1, 2, (REGS,)),
    ],
)
def test_extra_checks(
    cc: str,
    threads: int,
    regs: int,
    smem: int,
    carveout: int,
    blocks: int,
    limiters: tuple[Limiter, ...],
) -> None:
    occ = occupancy(sm_limits(cc), threads, regs, smem, carveout)
    assert occ.blocks_per_sm == blocks
    assert occ.limiters == limiters


def test_extra_check_details() -> None:
    # cc 8.9, 255 regs: registers alone would allow 2 blocks.
    assert occupancy(sm_limits("8.9"), 128, 255, 64 * KIB).limit_registers == 2
    # A100: the reserved 1 KiB is charged even without user smem -> 164 blocks by smem.
    zero = occupancy(sm_limits("8.0"), 128, 32, 0)
    assert zero.limit_shared_memory == 164
    assert zero.smem_per_block_bytes == 1024
    # Volta has no reserved smem: no smem at all is unlimited (-1 in the scalar form).
    assert occupancy(sm_limits("7.0"), 128, 32, 0).limit_shared_memory == -1
    # No registers is unlimited too.
    assert occupancy(sm_limits("8.0"), 128, 0, 0).limit_registers == -1
    # Hardware check (Part 2 key point 2): 9 warps x 200 regs is charged as 12 warps.
    assert occupancy(sm_limits("8.0"), 288, 200, 0).blocks_per_sm == 0
    assert occupancy(sm_limits("8.0"), 256, 200, 0).blocks_per_sm == 1
    # More than 256 registers per thread is rejected (256 itself is accepted).
    assert occupancy(sm_limits("8.0"), 32, 257, 0).limit_registers == 0
    assert occupancy(sm_limits("8.0"), 32, 256, 0).limit_registers == 8
    # Too many threads per block.
    assert occupancy(sm_limits("8.0"), 1025, 32, 0).limit_warps == 0


# ---------------------------------------------------------------------------------------
# Differential test against cuda_occupancy.h
# ---------------------------------------------------------------------------------------


def _header_dirs() -> list[Path]:
    dirs: list[Path] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            dirs.append(Path(os.environ[var]) / "include")
    dirs.append(Path("/usr/local/cuda/include"))
    nvcc = shutil.which("nvcc")
    if nvcc:
        dirs.append(Path(nvcc).parent.parent / "include")
        dirs.append(Path(nvcc).resolve().parent.parent / "include")
        # nvcc may be a wrapper script that execs the real one (e.g. /usr/local/bin/nvcc).
        try:
            text = Path(nvcc).read_text(encoding="utf-8", errors="ignore")[:4096]
        except OSError:
            text = ""
        for word in text.split():
            if word.endswith("/bin/nvcc"):
                dirs.append(Path(word).parent.parent / "include")
    return dirs


def _find_occupancy_header() -> Path | None:
    for folder in _header_dirs():
        if (folder / "cuda_occupancy.h").is_file():
            return folder
    return None


@pytest.fixture(scope="session")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`tests/occupancy_harness.cpp` compiled against the real `cuda_occupancy.h`."""
    include = _find_occupancy_header()
    compiler = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if include is None:
        pytest.skip(
            "cuda_occupancy.h not found (looked in $CUDA_HOME/include, $CUDA_PATH/include, "
            "/usr/local/cuda/include, <nvcc dir>/../include)"
        )
    if compiler is None:
        pytest.skip("no C++ compiler (g++, c++ or clang++) on PATH to build the harness")
    source = Path(__file__).with_name("occupancy_harness.cpp")
    binary = tmp_path_factory.mktemp("occupancy") / "occupancy_harness"
    proc = subprocess.run(
        [compiler, "-std=c++17", "-O1", f"-I{include}", str(source), "-o", str(binary)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"harness did not compile against {include}:\n{proc.stderr}")
    return binary


def _run_harness(harness: Path, cc: str, launches: np.ndarray) -> np.ndarray:
    """One subprocess call for all launches of a cc; returns the header's result rows."""
    major, minor = cc.split(".")
    lines = [f"{major} {minor} {t} {r} {s} {c}\n" for t, r, s, c in launches.tolist()]
    proc = subprocess.run(
        [str(harness)], input="".join(lines), capture_output=True, text=True, check=True
    )
    out = proc.stdout.splitlines()
    assert len(out) == len(launches), "the harness must answer every launch"
    errors = [(launches[i].tolist(), line) for i, line in enumerate(out) if line.startswith("ERR")]
    assert not errors, (
        f"cc {cc}: the header rejected {len(errors)} valid launches, "
        f"e.g. (threads, regs, smem, carveout) -> status: {errors[:5]}"
    )
    assert all(line.startswith("OK ") for line in out)
    rows = np.array(" ".join(line[3:] for line in out).split(), dtype=np.int64)
    return rows.reshape(len(out), 10)


def _launches(cc: str) -> np.ndarray:
    """Deterministic launches (threads, regs, dyn smem bytes, carveout %) for one cc."""
    sm = sm_limits(cc)
    optin = sm.smem_per_block_optin_bytes
    reserved = sm.reserved_smem_per_block_bytes
    gran = sm.smem_alloc_granularity_bytes
    threads_edges = [
        1, 2, 31, 32, 33, 63, 64, 65, 96, 100, 127, 128, 129, 160, 192, 224, 255, 256, 257,
        288, 320, 352, 384, 416, 480, 500, 511, 512, 513, 544, 640, 672, 768, 800, 896, 960,
        992, 1000, 1023, 1024, 1025, 1056, 2048,
    ]  # fmt: skip
    regs_edges = [
        0, 1, 2, 7, 8, 9, 16, 24, 32, 33, 40, 48, 56, 63, 64, 65, 72, 80, 96, 104, 112, 128,
        136, 152, 160, 168, 184, 192, 200, 208, 224, 232, 240, 248, 254, 255, 256, 257, 300,
    ]  # fmt: skip
    smem_edges = {0, 1, gran - 1, gran, gran + 1, 1023, 1024, 1025, 2048, 4096}
    for kib in (*sm.smem_carveout_options_kib, 48, optin // KIB):
        for base in (kib * KIB, kib * KIB - reserved):  # config sizes, with/without reserve
            smem_edges.update(x for x in (base - gran, base - 1, base, base + 1) if x >= 0)
        for blocks in (2, 3, 4, 5, 7):  # exactly n blocks in a config, and one byte more
            per_block = kib * KIB // blocks - reserved
            per_block -= per_block % gran
            smem_edges.update(x for x in (per_block, per_block + 1) if x >= 0)
    smem_edges.update({optin - 1, optin, optin + 1, optin + gran, optin + 1024, optin + 2048})
    smem_list = sorted(x for x in smem_edges if 0 <= x <= optin + 2048)
    carveouts = [-1, 0, 1, 10, 25, 33, 49, 50, 51, 66, 75, 99, 100]

    rows: list[tuple[int, int, int, int]] = []
    # 1. every threads x regs pair, without and with a typical smem, default carveout.
    for t in threads_edges:
        for r in regs_edges:
            rows.append((t, r, 0, -1))
            rows.append((t, r, 48 * KIB, -1))
    # 2. every smem edge under every carveout, for a few block shapes.
    for t, r in [(32, 32), (128, 96), (128, 255), (256, 128), (384, 168), (1024, 64)]:
        for s in smem_list:
            for c in carveouts:
                rows.append((t, r, s, c))
    # 3. random launches (fixed seed per cc), half of them with a random carveout.
    rng = np.random.default_rng(20_261_129 + int(cc.replace(".", "")))
    n = 4000
    rand_threads = rng.integers(1, 1025, n)
    rand_threads[: n // 4] = rng.integers(1, 33, n // 4) * 32  # whole warps
    rand_regs = rng.integers(0, 258, n)
    rand_smem = rng.integers(0, optin + 2049, n)
    rand_smem[: n // 8] = rng.choice(smem_list, n // 8)
    rand_carve = np.where(rng.random(n) < 0.5, rng.integers(-1, 101, n), -1)
    rows.extend(zip(rand_threads, rand_regs, rand_smem, rand_carve, strict=True))
    return np.array(rows, dtype=np.int64)


def _ours(sm: SmLimits, launches: np.ndarray) -> OccupancyArrays:
    """`occupancy_arrays` over all launches (one call per distinct carveout), in input order."""
    n = len(launches)
    fields = {name: np.zeros(n, dtype=np.int64) for name in OccupancyArrays.__dataclass_fields__}
    for carveout in np.unique(launches[:, 3]):
        idx = np.nonzero(launches[:, 3] == carveout)[0]
        part = occupancy_arrays(
            sm, launches[idx, 0], launches[idx, 1], launches[idx, 2], int(carveout)
        )
        for name in fields:
            fields[name][idx] = getattr(part, name)
    return OccupancyArrays(**fields)


def _assert_same(cc: str, what: str, ours: np.ndarray, header: np.ndarray, launches) -> None:
    bad = np.nonzero(ours != header)[0]
    if len(bad):
        examples = [
            f"(threads, regs, smem, carveout)={tuple(launches[i].tolist())}: "
            f"ours {ours[i]} header {header[i]}"
            for i in bad[:8]
        ]
        pytest.fail(
            f"cc {cc}: {what} differs from cuda_occupancy.h on {len(bad)} of {len(ours)} "
            "launches:\n  " + "\n  ".join(examples)
        )


def _clip_unlimited(values: np.ndarray) -> np.ndarray:
    """The header reports an unlimited resource as INT_MAX; ours uses a larger sentinel."""
    return np.minimum(values, INT_MAX)


@pytest.mark.parametrize("cc", DIFFERENTIAL_CCS)
def test_matches_cuda_occupancy_header(harness: Path, cc: str) -> None:
    sm = sm_limits(cc)
    launches = _launches(cc)
    assert len(launches) >= MIN_LAUNCHES_PER_CC
    header = _run_harness(harness, cc, launches)
    (
        h_blocks, h_factors, h_regs, h_smem, h_warps, h_blocks_lim,
        h_barriers, h_virtual, h_alloc_regs, h_alloc_smem,
    ) = header.T  # fmt: skip
    ours = _ours(sm, launches)

    _assert_same(cc, "blocks_per_sm", ours.blocks_per_sm, h_blocks, launches)
    _assert_same(cc, "limit_registers", _clip_unlimited(ours.limit_registers), h_regs, launches)
    _assert_same(
        cc, "limit_shared_memory", _clip_unlimited(ours.limit_shared_memory), h_smem, launches
    )
    _assert_same(cc, "limit_warps", _clip_unlimited(ours.limit_warps), h_warps, launches)
    _assert_same(cc, "limit_blocks", _clip_unlimited(ours.limit_blocks), h_blocks_lim, launches)
    _assert_same(cc, "regs_per_block", ours.regs_per_block, h_alloc_regs, launches)
    _assert_same(cc, "smem_per_block_bytes", ours.smem_per_block_bytes, h_alloc_smem, launches)

    # The model has no barrier or virtual-resource limit: neither may ever bind. (On cc >= 9
    # the header computes a barrier limit from the block limit; on 12.0 it equals it, so the
    # BARRIERS bit may accompany BLOCKS without lowering the result.)
    assert np.all(h_virtual == INT_MAX)
    assert np.all(h_barriers >= h_blocks_lim)
    assert not np.any(h_factors & OCC_LIMIT_VIRTUAL_RESOURCES)
    barrier_bit = (h_factors & OCC_LIMIT_BARRIERS) != 0
    assert np.all(~barrier_bit | (h_barriers == h_blocks))

    # Limiting factors: the vectorised set for every launch ...
    our_bits = np.zeros(len(launches), dtype=np.int64)
    for limit, bit in [
        (ours.limit_warps, OCC_LIMIT_WARPS),
        (ours.limit_registers, OCC_LIMIT_REGISTERS),
        (ours.limit_shared_memory, OCC_LIMIT_SHARED_MEMORY),
        (ours.limit_blocks, OCC_LIMIT_BLOCKS),
    ]:
        our_bits |= np.where(limit == ours.blocks_per_sm, bit, 0)
    _assert_same(cc, "limiting factors", our_bits, h_factors & 0x0F, launches)
    # ... and through the public `limiters()` / scalar `occupancy()` API on a sample.
    for i in range(0, len(launches), 7):
        bits = sum(_LIMITER_BITS[name] for name in ours.limiters(i))
        assert bits == h_factors[i] & 0x0F, (cc, launches[i].tolist())
    for i in range(0, len(launches), 37):
        t, r, s, c = (int(x) for x in launches[i])
        occ = occupancy(sm, t, r, s, c)
        assert occ.blocks_per_sm == h_blocks[i], (cc, launches[i].tolist())
        assert sum(_LIMITER_BITS[name] for name in occ.limiters) == h_factors[i] & 0x0F
        for ours_limit, header_limit in [
            (occ.limit_registers, h_regs[i]),
            (occ.limit_shared_memory, h_smem[i]),
            (occ.limit_warps, h_warps[i]),
            (occ.limit_blocks, h_blocks_lim[i]),
        ]:
            assert (INT_MAX if ours_limit == -1 else ours_limit) == header_limit

    zero = int(np.count_nonzero(h_blocks == 0))
    print(
        f"cc {cc}: {len(launches)} launches compared with cuda_occupancy.h ({zero} with 0 blocks)"
    )


def test_harness_reports_header_errors(harness: Path) -> None:
    """The harness surfaces the header's error status (invalid carveout, zero threads)."""
    proc = subprocess.run(
        [str(harness)],
        input="8 0 128 32 0 101\n8 0 0 32 0 -1\n8 0 128 32 0 -1\n",
        capture_output=True,
        text=True,
        check=True,
    )
    out = proc.stdout.splitlines()
    assert out[0] == "ERR 1"  # CUDA_OCC_ERROR_INVALID_INPUT
    assert out[1] == "ERR 1"
    assert out[2].startswith("OK ")
