"""Composable Kernel's tile FMHA forward instances against a compiler, without a GPU: what CK's
own templates accept (legality) and what a compiled instance allocates (VGPR+AGPR, spills,
LDS), recorded for the ck family's model to be checked against (docs/model.md 19.4).

    .venv/bin/python benchmarks/compiler/ck_probe.py --ck /path/to/composable_kernel \\
        --rows rows.txt --out benchmarks/data/compiler/ck_gfx942.csv [--syntax-only] [--jobs 2]

A row of `rows.txt` is `dtype d block_m block_n block_k0 block_n1 block_k1 warps mfma
pipeline block_per_cu` (pipeline qr, qr_async or qs; block_per_cu -1 takes CK's own
kBlockPerCu, else it is the trait's override, which CK launches as
`__launch_bounds__(threads, block_per_cu)`). Each row is written as one instance file: our own
text over CK's public templates (`TileFmhaShape`, `TileFmhaTraits`, `BlockFmhaPipelineProblem`,
the pipeline, `FmhaFwdKernel`), head dim = head_dim_v = d, row-major V, no mask, bias, LSE or
dropout, padding as CK's codegen sets it per pipeline (qr_async pads seqlen_q and both head
dims; qr and qs pad nothing). Nothing of CK is copied here or committed.

The toolchain, none of it ROCm's own compiler (no package registry reachable from the project's
machines carries one):

- front end: Debian 12's `clang++-19` (`apt-get install clang-19 libamdhip64-dev
  rocm-device-libs`), HIP device code for gfx942 with ROCm's device libraries, at -O3 with
  `-Xclang -disable-llvm-passes` (unoptimised bitcode, no optnone) and -DNDEBUG (device
  asserts call printf through hostcalls, which would add calls and spills to every kernel);
  gfx950 is unknown to clang 19, so only gfx942 is probed;
- optimiser and code generator: AMD's LLVM (23.0.0git, the `libLLVM.so` of the
  `rocm-bindings-compiler` wheel, 10.0.0.0.1.2 on PyPI), driven through its C API: the
  `default<O3>` pipeline with the AMDGPU target machine, and the flags of CK's CMake files
  (`-amdgpu-early-inline-all=true -amdgpu-function-calls=false -enable-post-misched=0`);
- the figures: the code object's AMDGPU metadata (`llvm-readobj-19 --notes`: `.vgpr_count`,
  `.agpr_count`, `.vgpr_spill_count`, `.sgpr_count`, `.group_segment_fixed_size`,
  `.private_segment_fixed_size`) and the kernel's MFMA count (`llvm-objdump-19`).

The wheel's `libLLVM.so` links against two renamed system libraries (`librocm_sysdeps_z.so.1`,
`librocm_sysdeps_zstd.so.1`, symbol version AMDROCM_SYSDEPS_1.0) that another wheel carries;
this script builds stand-ins forwarding to the system's zlib and zstd with gcc. A syntax-only
row (`--syntax-only`) runs the front end alone: whether CK's static_asserts and tile
distributions accept the instance.
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

PIPELINES = {
    "qr": ("BlockFmhaPipelineQRKSVS", "QRKSVS"),
    "qr_async": ("BlockFmhaPipelineQRKSVSAsync", "QRKSVS_ASYNC"),
    "qs": ("BlockFmhaPipelineQSKSVS", "QSKSVS"),
}
CK_TYPES = {"bf16": "ck_tile::bf16_t", "fp16": "ck_tile::half_t", "fp8": "ck_tile::fp8_t"}
# A rows file's fields, in its order (see the module's docstring)
ROW_FIELDS = (
    "dtype",
    "head_dim",
    "block_m",
    "block_n",
    "block_k0",
    "block_n1",
    "block_k1",
    "num_warps",
    "mfma",
    "pipeline",
    "block_per_cu",
)
FIGURES = (
    "vgpr_count",
    "agpr_count",
    "vgpr_spill_count",
    "sgpr_count",
    "lds_bytes",
    "private_bytes",
    "mfma_count",
)
COLUMNS = ("sample", "probe", "target", *ROW_FIELDS, "status", *FIGURES, "error")
METADATA = {
    "vgpr_count": "vgpr_count",
    "agpr_count": "agpr_count",
    "vgpr_spill_count": "vgpr_spill_count",
    "sgpr_count": "sgpr_count",
    "group_segment_fixed_size": "lds_bytes",
    "private_segment_fixed_size": "private_bytes",
}
CK_FLAGS = (
    "-amdgpu-early-inline-all=true",
    "-amdgpu-function-calls=false",
    "-enable-post-misched=0",
)
SHIM = r"""
#include <dlfcn.h>
typedef long (*fn)(long, long, long, long, long, long);
#define WRAP(lib, name) long name(long a, long b, long c, long d, long e, long f) { \
    static fn p; if (!p) p = (fn)dlsym(dlopen(lib, RTLD_NOW), #name); return p(a, b, c, d, e, f); }
"""
ZLIB = ("compress2", "compressBound", "crc32", "uncompress")
ZSTD = (
    "ZSTD_CCtx_setParameter",
    "ZSTD_compress2",
    "ZSTD_compressBound",
    "ZSTD_createCCtx",
    "ZSTD_decompress",
    "ZSTD_freeCCtx",
    "ZSTD_getErrorName",
    "ZSTD_isError",
)


def row_name(row: dict[str, str]) -> str:
    """A file name for one instance."""
    return (
        f"{row['dtype']}_d{row['head_dim']}_{row['block_m']}x{row['block_n']}x{row['block_k0']}"
        f"x{row['block_n1']}x{row['block_k1']}_w{row['num_warps']}_m{row['mfma']}_"
        f"{row['pipeline']}_b{row['block_per_cu']}"
    )


def instance_source(row: dict[str, str]) -> str:
    """One forward instance over CK's templates (see the module's docstring)."""
    dtype, pipe = row["dtype"], row["pipeline"]
    m = int(row["mfma"])
    k0_warp = 32 if dtype == "fp8" else 16  # the warp tile's K: 32x32x16 16-bit, 32x32x32 fp8
    cls, enum = PIPELINES[pipe]
    pad = ("true", "false", "true", "true") if pipe == "qr_async" else ("false",) * 4
    squant = "true" if dtype == "fp8" else "false"
    d = row["head_dim"]
    tile = ", ".join(row[k] for k in ("block_m", "block_n", "block_k0", "block_n1", "block_k1"))
    w = row["num_warps"]
    return f"""// tilesolve's ck probe: one forward instance (no mask, bias, LSE or dropout)
#include "fmha_fwd.hpp"
using T = {CK_TYPES[dtype]};
using shape = ck_tile::TileFmhaShape<ck_tile::sequence<{tile}, {d}>,
    ck_tile::sequence<{w}, 1, 1>, ck_tile::sequence<{m}, {m}, {k0_warp}>,
    ck_tile::sequence<{w}, 1, 1>, ck_tile::sequence<{m}, {m}, {k0_warp}>, true>;
using traits = ck_tile::TileFmhaTraits<{", ".join(pad)}, ck_tile::BlockAttentionBiasEnum::NO_BIAS,
    false, false, false, {squant}, {row["block_per_cu"]}>;
using mask = ck_tile::SimplifiedGenericAttentionMask<false>;
using TC = FmhaFwdTypeConfig<T>;
using problem = ck_tile::BlockFmhaPipelineProblem<typename TC::QDataType, typename TC::KDataType,
    typename TC::VDataType, typename TC::SaccDataType, typename TC::SMPLComputeDataType,
    typename TC::BiasDataType, typename TC::RandValOutputDataType, typename TC::LSEDataType,
    typename TC::PDataType, typename TC::OaccDataType, typename TC::ODataType, shape, false,
    mask, traits>;
using pipeline = ck_tile::{cls}<problem>;
using epilogue = ck_tile::Default2DEpilogue<ck_tile::Default2DEpilogueProblem<
    typename TC::OaccDataType, typename TC::ODataType, {pad[0]}, {pad[3]}>>;
using partitioner = ck_tile::FmhaFwdTilePartitioner_SHB<shape>;
using kernel = ck_tile::FmhaFwdKernel<partitioner, pipeline, epilogue>;
using trait = fmha_fwd_traits_<{d}, T, false, {tile}, {d}, true,
    ck_tile::BlockFmhaPipelineEnum::{enum}, mask, ck_tile::BlockAttentionBiasEnum::NO_BIAS,
    false, false, false, {", ".join(pad)}>;
template <>
float fmha_fwd_<trait>(const ck_tile::stream_config& s, fmha_fwd_args a)
{{
    auto [kargs, grids] = fmha_fwd_create_kargs_and_grids<kernel>(a);
    constexpr dim3 blocks = kernel::BlockSize();
    return ck_tile::launch_kernel(
        s,
        ck_tile::make_kernel<blocks.x, kernel::kBlockPerCu>(kernel{{}}, grids, blocks, 0, kargs));
}}
"""


def device_libs(work: Path) -> Path:
    """ROCm 5.2's device libraries (Debian) as clang 19 wants them for gfx942: the gfx940 ISA
    version file stands in for gfx942's, which that release predates."""
    src = Path("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode")
    out = work / "device-libs"
    out.mkdir(exist_ok=True)
    for f in src.glob("*.bc"):
        link = out / f.name
        if not link.exists():
            link.symlink_to(f)
    isa = out / "oclc_isa_version_942.bc"
    if not isa.exists():
        isa.write_bytes((src / "oclc_isa_version_940.bc").read_bytes())
    return out


def amd_llvm(work: Path, wheel: Path | None) -> Path:
    """AMD's libLLVM.so from the rocm-bindings-compiler wheel, with its two renamed system
    libraries stood in for (see the module's docstring)."""
    lib_dir = work / "amd-llvm"
    lib = lib_dir / "libLLVM.so"
    if lib.exists():
        return lib
    lib_dir.mkdir(exist_ok=True)
    if wheel is None:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "-d",
                str(work),
                "rocm-bindings-compiler==10.0.0.0.1.2",
            ],
            check=True,
        )
        wheel = next(work.glob("rocm_bindings_compiler-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        lib.write_bytes(z.read("rocm/bindings/llvm/libLLVM.so"))
    for name, lib_name, functions in (
        ("librocm_sysdeps_z.so.1", "libz.so.1", ZLIB),
        ("librocm_sysdeps_zstd.so.1", "libzstd.so.1", ZSTD),
    ):
        source = SHIM + "".join(f'WRAP("{lib_name}", {f})\n' for f in functions)
        c_file = lib_dir / f"{name}.c"
        c_file.write_text(source)
        script = lib_dir / "sysdeps.map"
        script.write_text("AMDROCM_SYSDEPS_1.0 { global: *; };\n")
        subprocess.run(
            [
                "gcc",
                "-shared",
                "-fPIC",
                "-O2",
                "-o",
                str(lib_dir / name),
                str(c_file),
                f"-Wl,--version-script={script}",
                f"-Wl,-soname,{name}",
                "-ldl",
            ],
            check=True,
        )
    return lib


VP = ctypes.c_void_p
STR = ctypes.c_char_p
# The LLVM C API functions the probe calls: (result type, argument types)
LLVM_C_API: dict[str, tuple[Any, list[Any]]] = {
    "LLVMContextCreate": (VP, []),
    "LLVMCreateMemoryBufferWithContentsOfFile": (
        ctypes.c_int,
        [STR, ctypes.POINTER(VP), ctypes.POINTER(STR)],
    ),
    "LLVMParseBitcodeInContext2": (ctypes.c_int, [VP, VP, ctypes.POINTER(VP)]),
    "LLVMGetTarget": (STR, [VP]),
    "LLVMGetTargetFromTriple": (ctypes.c_int, [STR, ctypes.POINTER(VP), ctypes.POINTER(STR)]),
    "LLVMCreateTargetMachine": (VP, [VP, STR, STR, STR, ctypes.c_int, ctypes.c_int, ctypes.c_int]),
    "LLVMCreatePassBuilderOptions": (VP, []),
    "LLVMRunPasses": (VP, [VP, STR, VP, VP]),
    "LLVMTargetMachineEmitToFile": (ctypes.c_int, [VP, VP, STR, ctypes.c_int, ctypes.POINTER(STR)]),
    "LLVMGetFirstFunction": (VP, [VP]),
    "LLVMGetNextFunction": (VP, [VP]),
    "LLVMCreateStringAttribute": (VP, [VP, STR, ctypes.c_uint, STR, ctypes.c_uint]),
    "LLVMAddAttributeAtIndex": (None, [VP, ctypes.c_int, VP]),
    "LLVMRemoveStringAttributeAtIndex": (None, [VP, ctypes.c_int, STR, ctypes.c_uint]),
}
ATTRIBUTE_FUNCTION_INDEX = -1  # LLVMAttributeFunctionIndex


def load_llvm(lib_path: Path) -> ctypes.CDLL:
    """AMD's libLLVM.so with the C API functions the probe calls typed, its command-line
    options set to CK's flags and the AMDGPU target initialised."""
    for dep in ("librocm_sysdeps_z.so.1", "librocm_sysdeps_zstd.so.1"):
        ctypes.CDLL(str(lib_path.parent / dep), mode=ctypes.RTLD_GLOBAL)
    llvm = ctypes.CDLL(str(lib_path))
    for name, (result, arguments) in LLVM_C_API.items():
        function = getattr(llvm, name)
        function.restype = result
        function.argtypes = arguments
    args = [b"ck_probe", *(f.encode() for f in CK_FLAGS)]
    llvm.LLVMParseCommandLineOptions(len(args), (STR * len(args))(*args), None)
    for part in ("TargetInfo", "Target", "TargetMC", "AsmPrinter", "AsmParser"):
        getattr(llvm, f"LLVMInitializeAMDGPU{part}")()
    return llvm


def optimise_and_emit(lib_path: Path, bitcode: Path, obj: Path, cpu: str = "gfx942") -> None:
    """Run AMD's LLVM over the front end's bitcode: default<O3>, then an object file. Called in
    a child process (LLVM's command-line options are process-global)."""
    llvm = load_llvm(lib_path)
    ctx = llvm.LLVMContextCreate()
    buf, msg, module, target, err = VP(), STR(), VP(), VP(), STR()
    path = str(bitcode).encode()
    if llvm.LLVMCreateMemoryBufferWithContentsOfFile(path, ctypes.byref(buf), ctypes.byref(msg)):
        raise RuntimeError(f"reading {bitcode}: {msg.value!r}")
    if llvm.LLVMParseBitcodeInContext2(ctx, buf, ctypes.byref(module)):
        raise RuntimeError(f"parsing {bitcode}")
    if cpu != "gfx942":
        retarget(llvm, ctx, module, cpu)
    triple = llvm.LLVMGetTarget(module)
    if llvm.LLVMGetTargetFromTriple(triple, ctypes.byref(target), ctypes.byref(err)):
        raise RuntimeError(f"target {triple!r}: {err.value!r}")
    machine = llvm.LLVMCreateTargetMachine(target, triple, cpu.encode(), b"", 3, 2, 0)
    options = llvm.LLVMCreatePassBuilderOptions()
    if llvm.LLVMRunPasses(module, b"default<O3>", machine, options):
        raise RuntimeError("the O3 pipeline failed")
    if llvm.LLVMTargetMachineEmitToFile(machine, module, str(obj).encode(), 1, ctypes.byref(err)):
        raise RuntimeError(f"code generation: {err.value!r}")


def retarget(llvm: ctypes.CDLL, ctx: int, module: ctypes.c_void_p, cpu: str) -> None:
    """Make every function of gfx942's bitcode a `cpu` function (its target-cpu attribute;
    the target features follow from the CPU): gfx942's code compiled for another target,
    with that target's LDS and occupancy rules, which is how a gfx950 row is made (clang 19
    has no gfx950 front end; the gfx942 code's instructions all exist on gfx950)."""
    function = llvm.LLVMGetFirstFunction(module)
    while function:
        for key in (b"target-features", b"target-cpu"):
            llvm.LLVMRemoveStringAttributeAtIndex(function, ATTRIBUTE_FUNCTION_INDEX, key, len(key))
        attribute = llvm.LLVMCreateStringAttribute(ctx, b"target-cpu", 10, cpu.encode(), len(cpu))
        llvm.LLVMAddAttributeAtIndex(function, ATTRIBUTE_FUNCTION_INDEX, attribute)
        function = llvm.LLVMGetNextFunction(function)


def front_end(
    ck: Path, libs: Path, source: Path, out: Path | None
) -> subprocess.CompletedProcess[str]:
    """clang 19 over one instance: bitcode into `out`, or a syntax check when `out` is None."""
    cmd = [
        "clang++-19",
        "-x",
        "hip",
        "--offload-arch=gfx942",
        "--cuda-device-only",
        f"--rocm-device-lib-path={libs}",
        "-std=c++17",
        "-O3",
        "-DNDEBUG",
        f"-I{ck / 'include'}",
        f"-I{ck / 'example' / 'ck_tile' / '01_fmha'}",
        "-DCK_TILE_FMHA_FWD_FAST_EXP2=1",
        "-fgpu-flush-denormals-to-zero",
        "-c",
        str(source),
    ]
    if out is None:
        cmd.append("-fsyntax-only")
    else:
        cmd += ["-Xclang", "-disable-llvm-passes", "-emit-llvm", "-o", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True)


def first_error(text: str) -> str:
    """The first compiler error of a failed front end, shortened."""
    match = re.search(r"error: (.*)", text)
    return match.group(1)[:160] if match else text.strip()[-160:]


def probe(
    row: dict[str, str],
    sample: str,
    ck: Path,
    work: Path,
    libs: Path,
    llvm_lib: Path,
    syntax_only: bool,
    target: str,
) -> dict[str, str]:
    """One row: the front end, then (unless syntax-only) AMD's LLVM for `target` and the
    metadata."""
    name = row_name(row)
    source = work / f"{name}.cpp"
    source.write_text(instance_source(row))
    out = dict(row, probe="syntax" if syntax_only else "compile", target=target, sample=sample)
    bitcode = None if syntax_only else work / f"{name}.bc"
    fe = front_end(ck, libs, source, bitcode)
    if fe.returncode:
        out.update(status="front_end_error", error=first_error(fe.stderr))
        return out
    if syntax_only:
        out["status"] = "ok"
        return out
    assert bitcode is not None  # a compile probe's front end wrote it
    obj = work / f"{name}.o"
    be = subprocess.run(
        [sys.executable, __file__, "--emit", str(llvm_lib), str(bitcode), str(obj), target],
        capture_output=True,
        text=True,
        timeout=900,
    )
    bitcode.unlink(missing_ok=True)
    if be.returncode:
        out.update(status="backend_error", error=be.stderr.strip()[-160:])
        return out
    notes = subprocess.run(
        ["llvm-readobj-19", "--notes", str(obj)], capture_output=True, text=True
    ).stdout
    for key, column in METADATA.items():
        found = re.search(rf"\.{key}:\s+(\d+)", notes)
        out[column] = found.group(1) if found else ""
    asm = subprocess.run(
        ["llvm-objdump-19", "-d", "--mcpu=gfx942", str(obj)], capture_output=True, text=True
    ).stdout
    kernel = asm[asm.find("<_ZN7ck_tile6kentry") :]
    out["mfma_count"] = str(kernel.count("v_mfma"))
    out["status"] = "ok"
    return out


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows file: one instance a line (see the module's docstring)."""
    rows = []
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            rows.append(dict(zip(ROW_FIELDS, line.split(), strict=True)))
    return rows


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--emit":
        optimise_and_emit(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]), sys.argv[5])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ck", type=Path, required=True, help="a composable_kernel checkout")
    parser.add_argument("--rows", type=Path, required=True, help="instances, one a line")
    parser.add_argument("--out", type=Path, required=True, help="CSV to append to")
    parser.add_argument("--syntax-only", action="store_true", help="the front end alone")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--sample",
        default="fit",
        help="the rows' sample: fit (the model's form and constants were read from them), "
        "holdout (drawn at random after), check (an answer's pick compiled after)",
    )
    parser.add_argument(
        "--target",
        default="gfx942",
        choices=("gfx942", "gfx950"),
        help="code generation target (gfx950: gfx942's code retargeted)",
    )
    parser.add_argument("--wheel", type=Path, help="a downloaded rocm-bindings-compiler wheel")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ck_probe_"))
    libs = device_libs(work)
    llvm_lib = amd_llvm(work, args.wheel)
    rows = read_rows(args.rows)
    new = not args.out.exists()
    start = time.time()
    with args.out.open("a", newline="") as f, ThreadPoolExecutor(args.jobs) as pool:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        if new:
            writer.writeheader()
        for i, result in enumerate(
            pool.map(
                lambda r: probe(
                    r, args.sample, args.ck, work, libs, llvm_lib, args.syntax_only, args.target
                ),
                rows,
            )
        ):
            writer.writerow(result)
            f.flush()
            print(
                f"[{i + 1}/{len(rows)} {time.time() - start:.0f} s] {row_name(result)} "
                f"{result['status']}",
                file=sys.stderr,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
