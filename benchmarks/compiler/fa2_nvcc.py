"""Registers and static shared memory of FlashAttention-2's CUDA kernels as nvcc compiles them,
per kernel instantiation, from FA2's own source distribution (the `flash-attn` sdist on PyPI).

    nice -n 15 .venv/bin/python benchmarks/compiler/fa2_nvcc.py \\
        --scratch /tmp/tilesolve-fa2 --out benchmarks/data/compiler/fa2_nvcc.csv

Everything FA2's code needs lives in --scratch, outside the repository, and nothing of it is
committed: a scratch virtual environment with torch 2.13.0 (CPU wheel: its headers, which
FA2's launch templates include, and the metadata step of FA2's setup.py), `pip download` of
the sdist, its unpacked sources (FA2's kernels and the CUTLASS headers it bundles), and one
generated header the CPU torch wheel lacks (`c10/cuda/impl/cuda_cmake_macros.h`, which a CUDA
build of torch generates; an empty definition here).

Each launch-template file (`flash_{fwd,bwd}_hdim{H}_{fp16,bf16}[_causal]_sm80.cu`) holds
every tile FA2 ships for that head dim: the launch template picks one at run time from the
device's shared memory, so one compile per file and architecture reports them all. Compiled
with setup.py's nvcc flags, for the architectures given (sm_80, sm_86, sm_90), with dropout,
ALiBi, softcap, uneven K and local attention compiled out (FLASHATTENTION_DISABLE_*: the plain
kernels only, a fraction of the instantiations and of the compile time). Output: one CSV row per
kernel instantiation and architecture, its Kernel_traits decoded from the demangled name.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

FLASH_ATTN = "flash-attn==2.8.3.post2"
TORCH = "torch==2.13.0"
NVCC_FLAGS = (
    "-O3",
    "-std=c++17",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_HALF2_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "--use_fast_math",
    "-DFLASHATTENTION_DISABLE_DROPOUT",
    "-DFLASHATTENTION_DISABLE_ALIBI",
    "-DFLASHATTENTION_DISABLE_SOFTCAP",
    "-DFLASHATTENTION_DISABLE_UNEVEN_K",
    "-DFLASHATTENTION_DISABLE_LOCAL",
)
COLUMNS = (
    "kernel",
    "arch",
    "head_dim",
    "dtype",
    "causal",
    "block_m",
    "block_n",
    "num_warps",
    "traits",
    "kernel_flags",
    "regs",
    "stack_bytes",
    "spill_store_bytes",
    "spill_load_bytes",
    "static_shared_bytes",
    "source_file",
    "nvcc",
    "flash_attn",
)
_ENTRY = re.compile(r"Compiling entry function '(\w+)' for '(sm_\d+)'")
_SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")
_TRAITS = re.compile(r"Flash_(fwd|bwd)_kernel_traits<([^>]*)>")
MAIN_KERNELS = ("flash_fwd_kernel", "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel")


def run(
    cmd: list[str], env: dict[str, str] | None = None, capture: bool = False
) -> subprocess.CompletedProcess[str]:
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, check=True, text=True, env=env, capture_output=capture)


def prepare(scratch: Path) -> Path:
    """The unpacked FA2 sources in scratch (made once; reused when present)."""
    venv = scratch / "venv"
    python = venv / "bin/python"
    if not python.exists():
        run([sys.executable, "-m", "venv", str(venv)])
        run([str(python), "-m", "pip", "install", "-q", TORCH, "setuptools", "wheel",
             "packaging", "ninja", "psutil"])  # fmt: skip
    sdists = sorted(scratch.glob("flash_attn-*.tar.gz"))
    if not sdists:
        env = {**os.environ, "FLASH_ATTENTION_SKIP_CUDA_BUILD": "TRUE"}
        run([str(python), "-m", "pip", "download", "--no-deps", "--no-build-isolation",
             "--no-binary", ":all:", "-d", str(scratch), FLASH_ATTN], env=env)  # fmt: skip
        sdists = sorted(scratch.glob("flash_attn-*.tar.gz"))
    source = scratch / sdists[-1].name.removesuffix(".tar.gz")
    if not source.exists():
        with tarfile.open(sdists[-1]) as archive:
            archive.extractall(scratch, filter="data")
    stub = scratch / "stub/c10/cuda/impl/cuda_cmake_macros.h"
    stub.parent.mkdir(parents=True, exist_ok=True)
    stub.write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    return source


def torch_include(scratch: Path) -> Path:
    found = sorted((scratch / "venv/lib").glob("python3*/site-packages/torch/include"))
    if not found:
        raise SystemExit(f"no torch headers under {scratch}/venv")
    return found[-1]


def demangle(names: list[str]) -> list[str]:
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    return out.stdout.splitlines()


def parse(log: str) -> list[dict[str, str]]:
    """One record per compiled entry function of a ptxas -v log."""
    records: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = {"mangled": m.group(1), "arch": m.group(2)}
            records.append(current)
        elif current is not None and (m := _SPILLS.search(line)):
            current |= {"stack_bytes": m.group(1), "spill_store_bytes": m.group(2),
                        "spill_load_bytes": m.group(3)}  # fmt: skip
        elif current is not None and (m := _USED.search(line)):
            current |= {"regs": m.group(1), "static_shared_bytes": m.group(2) or "0"}
    for record, name in zip(records, demangle([r["mangled"] for r in records]), strict=True):
        record["demangled"] = name
    return records


def decode(record: dict[str, str]) -> dict[str, str] | None:
    """Tile traits of a main kernel (forward or backward), None for helper kernels.

    `void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<256, 64,
    32, 8, 4, 1, 2, true, true, cutlass::half_t, Flash_kernel_traits<...> >, false, ...>(...)`:
    head dim, block_m, block_n, warps, then the traits up to the element type (backward:
    AtomLayoutMSdP, AtomLayoutNdKV, AtomLayoutMdQ, Is_V_in_regs, No_double_buffer; forward:
    Is_Q_in_regs, Share_Q_K_smem), then the kernel's own bool flags."""
    name = record["demangled"]
    if not any(f"::{kernel}<" in name for kernel in MAIN_KERNELS):
        return None
    traits = _TRAITS.search(name)
    if traits is None:
        return None
    args = [a.strip() for a in traits.group(2).split(",")]
    element = next(i for i, a in enumerate(args) if "cutlass::" in a)
    tail = name[name.index("> >", traits.start()) + 3 : name.rindex(">(")]
    return {
        "kernel": traits.group(1),
        "head_dim": args[0],
        "block_m": args[1],
        "block_n": args[2],
        "num_warps": args[3],
        "traits": " ".join(args[4:element]),
        "kernel_flags": " ".join(f.strip() for f in tail.split(",") if f.strip()),
    }


def compile_file(source: Path, scratch: Path, cu: str, archs: list[str]) -> str:
    include = torch_include(scratch)
    python_include = subprocess.run(
        [sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    cmd = [
        "nvcc", *NVCC_FLAGS, *gencode, "--resource-usage",
        "-I", str(source / "csrc/flash_attn"), "-I", str(source / "csrc/flash_attn/src"),
        "-I", str(source / "csrc/cutlass/include"), "-I", str(scratch / "stub"),
        "-I", str(include), "-I", str(include / "torch/csrc/api/include"),
        "-I", python_include,
        "-c", str(source / "csrc/flash_attn/src" / cu), "-o", str(scratch / "out.o"),
    ]  # fmt: skip
    done = run(cmd, capture=True)
    return done.stdout + done.stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/tilesolve-fa2"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--archs", nargs="+", default=["80", "86", "90"])
    parser.add_argument("--kernels", nargs="+", default=["bwd", "fwd"], choices=["fwd", "bwd"])
    parser.add_argument("--head-dims", nargs="+", type=int, default=[64, 128, 192, 256])
    parser.add_argument("--dtypes", nargs="+", default=["fp16"], choices=["fp16", "bf16"])
    parser.add_argument("--causal", action="store_true", help="the causal files instead")
    args = parser.parse_args(argv)
    args.scratch.mkdir(parents=True, exist_ok=True)
    source = prepare(args.scratch)
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
    nvcc_version = re.search(r"V(\d+\.\d+\.\d+)", nvcc)
    new = not args.out.exists()
    with args.out.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        if new:
            writer.writeheader()
        for kernel in args.kernels:
            for head_dim in args.head_dims:
                for dtype in args.dtypes:
                    suffix = "_causal" if args.causal else ""
                    cu = f"flash_{kernel}_hdim{head_dim}_{dtype}{suffix}_sm80.cu"
                    start = time.monotonic()
                    log = compile_file(source, args.scratch, cu, args.archs)
                    print(f"{cu}: {time.monotonic() - start:.0f} s", file=sys.stderr)
                    for record in parse(log):
                        tile = decode(record)
                        if tile is None:
                            continue
                        writer.writerow(
                            tile | {
                                "arch": record["arch"], "dtype": dtype,
                                "causal": int(args.causal), "regs": record["regs"],
                                "stack_bytes": record["stack_bytes"],
                                "spill_store_bytes": record["spill_store_bytes"],
                                "spill_load_bytes": record["spill_load_bytes"],
                                "static_shared_bytes": record["static_shared_bytes"],
                                "source_file": cu,
                                "nvcc": nvcc_version.group(1) if nvcc_version else "",
                                "flash_attn": source.name.removeprefix("flash_attn-"),
                            }
                        )  # fmt: skip
                    f.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
