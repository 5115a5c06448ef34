"""Compile one configuration for one target with the installed Triton, without a GPU, and read
what the compiler allocated.

- shared memory: `metadata.shared`, the dynamic shared memory (LDS on AMD) the launch asks
  for; Triton's launcher refuses the kernel when it exceeds the device's opt-in per-block
  limit (`OutOfResources: shared memory, Required: ..., Hardware limit: ...`);
- CUDA registers and spills: the `ptxas -v` log of the compile itself (Triton runs ptxas with
  `-v`; `knobs.nvidia.dump_ptxas_log` prints that log, captured here): registers per thread,
  stack frame, spill stores and loads in bytes; static shared memory from `cuobjdump
  -res-usage` of the cubin (Triton's bundled cuobjdump);
- AMD registers and spills: the code object's metadata in the AMDGCN assembly (`.vgpr_count`
  VGPRs + AGPRs as allocated, `; NumVgprs` architectural VGPRs, `.agpr_count`, `.sgpr_count`,
  `.vgpr_spill_count`, `.sgpr_spill_count`, `.private_segment_fixed_size` scratch bytes per
  lane, `; Occupancy` waves per SIMD);
- CUDA peak live registers: the most general-purpose registers live at any one instruction of
  ptxas's schedule, from `nvdisasm -lrm count` (its GPR column) on a cubin of the same PTX
  (`peak_live`: docs/model.md 16.11 gives the method). The bundled nvdisasm 13.1 does no flow
  analysis on the ELF of the bundled ptxas 12.9 (sm75-sm89), so those rows' PTX is assembled
  again by the machine's ptxas 13.x with Triton's flags; sm90 and newer use the bundled
  `ptxas-blackwell`, the data set's own assembler. nvdisasm refuses a cubin whose register
  count is 255 (`Invalid register count`); the count in the kernel's section header and in
  `EIATTR_REGCOUNT` is lowered to 254 first (`lower_register_count`), which changes no
  instruction it analyses.

`compile_config(task)` takes one plan row (a dict) and returns the measured columns; a failed
compile is a row too (status and a one-line message). Triton's file cache is pointed at a
private folder and emptied after each compile, so every compile is a real one and its time is
the compiler's.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import struct
import subprocess
import tempfile
import time
from functools import cache
from pathlib import Path
from typing import Any

import kernels
from configs import TARGETS, Target, from_row

MEASURED_COLUMNS = (
    # ok; trap_stub (compiled, but Triton replaced the kernel by a trap); or the error kind:
    # compile_error, ptxas_error, mlir_error, error, timeout, crash
    "status",
    "message",  # a one-line message for a failed compile
    "shared_bytes",  # metadata.shared: dynamic shared memory / LDS the launch asks for
    "static_shared_bytes",  # cuobjdump SHARED (CUDA)
    "tmem_columns",  # metadata.tmem_size (sm100 tensor memory columns), where set
    "regs",  # CUDA: registers per thread (ptxas)
    "stack_bytes",  # CUDA: stack frame per thread (ptxas)
    "spill_store_bytes",  # CUDA: spill stores per thread (ptxas)
    "spill_load_bytes",  # CUDA: spill loads per thread (ptxas)
    "vgprs",  # AMD: architectural VGPRs (; NumVgprs)
    "agprs",  # AMD: accumulation VGPRs (.agpr_count)
    "total_vgprs",  # AMD: VGPRs + AGPRs as allocated (.vgpr_count)
    "sgprs",  # AMD: .sgpr_count
    "vgpr_spills",  # AMD: .vgpr_spill_count
    "sgpr_spills",  # AMD: .sgpr_spill_count
    "scratch_bytes",  # AMD: .private_segment_fixed_size (bytes per lane)
    "amd_occupancy",  # AMD: ; Occupancy (waves per SIMD the code object allows)
    "compile_s",  # wall time of triton.compile, seconds
    "triton_version",
    "assembler",  # the assembler that made the binary: "ptxas 12.9.86", "amdgpu llvm"
    # CUDA, `peak_live`: the most registers live at one instruction (nvdisasm -lrm count);
    # censored at the cap where the row spills (the demand is above what ptxas held)
    "peak_live_regs",
    # the ptxas that made the analysed cubin ("ptxas 13.0.88"); "none: REASON" where it failed
    "peak_live_assembler",
    "peak_live_used_regs",  # that assembly's `Used N registers` (the row's own, when they agree)
    "peak_live_spill_bytes",  # and its spill stores, bytes per thread
)
PEAK_LIVE_COLUMNS = MEASURED_COLUMNS[-4:]
NVDISASM_FLOW_MAJOR = 13  # the bundled nvdisasm analyses the ELF of ptxas 13.x, not of 12.x


def gpu_target(target: Target) -> Any:
    from triton.backends.compiler import GPUTarget

    return GPUTarget(target.backend, target.arch, target.warp_size)


@cache
def assembler_version(target_name: str) -> str:
    """'ptxas 12.9.86' for CUDA targets (Triton picks ptxas by arch), 'amdgpu llvm' for AMD
    (Triton's own LLVM assembles AMDGCN in-process)."""
    target = TARGETS[target_name]
    if target.backend != "cuda":
        return "amdgpu llvm (in-process, triton " + _triton_version() + ")"
    from triton.backends.nvidia.compiler import get_ptxas

    assert isinstance(target.arch, int)
    path = get_ptxas(target.arch).path
    text = subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout
    found = re.search(r"V(\d+\.\d+\.\d+)", text)
    return "ptxas " + (found.group(1) if found else text.strip().splitlines()[-1])


def _triton_version() -> str:
    import triton

    return str(triton.__version__)


def cuobjdump_path() -> str:
    import triton

    return str(Path(triton.__file__).parent / "backends/nvidia/bin/cuobjdump")


_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SPILLS = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)


def read_ptxas_log(log: str) -> dict[str, int]:
    """Registers, stack and spill bytes per thread from a `ptxas -v` log (one kernel)."""
    regs = _PTXAS_REGS.search(log)
    spills = _PTXAS_SPILLS.search(log)
    if regs is None or spills is None:
        raise ValueError("no 'Used N registers' / spill line in the ptxas log")
    return {
        "regs": int(regs.group(1)),
        "stack_bytes": int(spills.group(1)),
        "spill_store_bytes": int(spills.group(2)),
        "spill_load_bytes": int(spills.group(3)),
    }


def read_cuobjdump(text: str) -> dict[str, int]:
    """REG and SHARED of the one function in `cuobjdump -res-usage` output."""
    found = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+)", text)
    if found is None:
        raise ValueError("no REG/STACK/SHARED line in the cuobjdump output")
    return {"cuobjdump_regs": int(found.group(1)), "static_shared_bytes": int(found.group(3))}


def _tool_version(path: str) -> tuple[int, str]:
    text = subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout
    found = re.search(r"V(\d+)\.(\d+\.\d+)", text)
    if found is None:
        raise ValueError(f"no version in {path} --version")
    return int(found.group(1)), f"{found.group(1)}.{found.group(2)}"


@cache
def live_assembler(arch: int) -> tuple[str, str]:
    """The ptxas (path, 'ptxas X.Y.Z') whose cubin for `arch` the bundled nvdisasm can analyse:
    Triton's own for the arch when it is 13.x or newer, else the machine's `ptxas` on PATH
    (which must be 13.x)."""
    from triton.backends.nvidia.compiler import get_ptxas

    for path in (get_ptxas(arch).path, shutil.which("ptxas")):
        if path is None:
            continue
        major, version = _tool_version(path)
        if major >= NVDISASM_FLOW_MAJOR:
            return path, "ptxas " + version
    raise FileNotFoundError(
        f"no ptxas {NVDISASM_FLOW_MAJOR}.x for sm{arch}: nvdisasm cannot analyse older cubins"
    )


def nvdisasm_path() -> str:
    import triton

    return str(Path(triton.__file__).parent / "backends/nvidia/bin/nvdisasm")


_EIFMT_SVAL = 0x04  # an .nv.info attribute with a 16-bit size and that many bytes of value
_EIFMT_HVAL = 0x03  # a 16-bit value
_EIFMT_BVAL = 0x02  # an 8-bit value (padded to 16 bits)
_EIATTR_REGCOUNT = 0x2F  # value: (symbol index u32, registers u32)
_SH_INFO_REGS_SHIFT = 24  # a CUDA .text section's sh_info carries its register count in bits 24-31


def lower_register_count(cubin: bytes, limit: int = 254) -> bytes:
    """The cubin with every register count above `limit` lowered to it: the `.text.*`
    sections' sh_info high byte and the `.nv.info*` sections' EIATTR_REGCOUNT values (ELF64,
    little-endian). Only these header fields change; the instructions stay as ptxas emitted
    them."""
    b = bytearray(cubin)
    if b[:4] != b"\x7fELF" or b[4] != 2:
        raise ValueError("not an ELF64 cubin")
    (shoff,) = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)

    def header(i: int) -> tuple[int, ...]:
        return struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize)

    names = header(shstrndx)[4]
    for i in range(shnum):
        name_offset, _, _, _, offset, size, _, info, _, _ = header(i)
        end = b.index(0, names + name_offset)
        name = b[names + name_offset : end].decode()
        if name.startswith(".text.") and info >> _SH_INFO_REGS_SHIFT > limit:
            lowered = (limit << _SH_INFO_REGS_SHIFT) | (info & 0xFFFFFF)
            struct.pack_into("<I", b, shoff + i * shentsize + 0x2C, lowered)
        if not name.startswith(".nv.info"):
            continue
        p = offset
        while p < offset + size:
            fmt, attr = b[p], b[p + 1]
            if fmt == _EIFMT_SVAL:
                (length,) = struct.unpack_from("<H", b, p + 2)
                if attr == _EIATTR_REGCOUNT and length == 8:
                    (regs,) = struct.unpack_from("<I", b, p + 8)
                    if regs > limit:
                        struct.pack_into("<I", b, p + 8, limit)
                p += 4 + length
            elif fmt in (_EIFMT_HVAL, _EIFMT_BVAL):
                p += 4
            else:
                p += 2
    return bytes(b)


_LRM_GPR = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/.*//\s*\|\s*(\d+)\s*\|")


def read_peak_live(listing: str) -> int:
    """The largest GPR live count of any instruction in `nvdisasm -lrm count` output (the
    first column of the table beside each instruction of the kernel's `.text` section)."""
    counts = [int(m.group(1)) for line in listing.splitlines() if (m := _LRM_GPR.match(line))]
    if not counts:
        raise ValueError("no live-register counts in the nvdisasm listing")
    return max(counts)


_AMD_FIELDS = {
    "total_vgprs": r"\.vgpr_count:\s+(\d+)",
    "agprs": r"\.agpr_count:\s+(\d+)",
    "sgprs": r"\.sgpr_count:\s+(\d+)",
    "vgpr_spills": r"\.vgpr_spill_count:\s+(\d+)",
    "sgpr_spills": r"\.sgpr_spill_count:\s+(\d+)",
    "scratch_bytes": r"\.private_segment_fixed_size:\s+(\d+)",
    "vgprs": r"; NumVgprs:\s+(\d+)",
    "amd_occupancy": r"; Occupancy:\s+(\d+)",
}


def read_amdgcn(asm: str) -> dict[str, int]:
    """Register, spill and scratch counts from the AMDGCN assembly's kernel metadata."""
    out = {}
    for column, pattern in _AMD_FIELDS.items():
        found = re.search(pattern, asm)
        if found is None:
            raise ValueError(f"no {pattern!r} in the AMDGCN metadata")
        out[column] = int(found.group(1))
    return out


_GLOBAL_WRITES = ("st.global", "cp.async.bulk", "red.global", "atom.global")


def is_trap_stub(ptx: str) -> bool:
    """True when the PTX traps and writes nothing to global memory: what Triton 3.9 emits for
    sm100 when the allocation exceeds the target's shared memory (the body is one `trap`;
    both kernels here always store their outputs, so a real compile has global writes). Its
    registers then say nothing about the kernel."""
    return "trap;" in ptx and not any(op in ptx for op in _GLOBAL_WRITES)


def _first_error_line(text: str) -> str:
    for line in text.splitlines():
        if "error" in line.lower() and line.strip():
            return line.strip()
    return ""


def _classify(exc: BaseException) -> str:
    name = type(exc).__name__
    if name == "PTXASError":
        return "ptxas_error"
    if name == "CompilationError":
        return "compile_error"
    if "PassManager" in str(exc) or name == "RuntimeError":
        return "mlir_error"
    return "error"


class Compiler:
    """Compiles plan rows in this process; one per worker. Its scratch folder holds Triton's
    cache (emptied after every compile) and the log that receives the compiler's own output
    (file descriptors 1 and 2 are sent there by the worker, see `worker.py`)."""

    def __init__(self, scratch: Path, log_path: Path | None = None):
        self.scratch = scratch
        self.cache_dir = scratch / "triton-cache"
        self.log_path = log_path
        os.environ["TRITON_CACHE_DIR"] = str(self.cache_dir)
        os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # 3.9's default, stated
        import triton

        self.triton = triton
        triton.knobs.nvidia.dump_ptxas_log = True
        self.last_amdgcn = ""  # the AMDGCN assembly of the last AMD compile (amd_peak.py)

    def _log_size(self) -> int:
        return self.log_path.stat().st_size if self.log_path and self.log_path.exists() else 0

    def _log_since(self, offset: int) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        with self.log_path.open("rb") as f:
            f.seek(offset)
            return f.read(200_000).decode("utf-8", "replace")

    def compile(self, row: dict[str, Any], maxnreg: int | None = None) -> dict[str, Any]:
        """Compile one plan row and return its measured columns. `maxnreg` (CUDA only): the
        registers per thread ptxas may use, below its own limit (Triton's `maxnreg` option, the
        PTX `.maxnreg` directive); the data set is compiled without it (`cap_probe.py` uses
        it)."""
        target = TARGETS[row["target"]]
        variant, tile = from_row(row)
        fn, signature, constexprs, attrs, options = kernels.source(row["kernel"], variant, tile)
        if maxnreg is not None:
            if target.backend != "cuda":
                raise ValueError(f"maxnreg is a CUDA option; {target.name} is {target.backend}")
            options = {**options, "maxnreg": maxnreg}
        out: dict[str, Any] = dict.fromkeys(MEASURED_COLUMNS, "")
        out["triton_version"] = _triton_version()
        out["assembler"] = assembler_version(target.name)
        printed = io.StringIO()
        log_offset = self._log_size()
        start = time.perf_counter()
        try:
            with contextlib.redirect_stdout(printed):
                compiled = self.triton.compile(
                    self.triton.compiler.ASTSource(fn, signature, constexprs, attrs),
                    target=gpu_target(target),
                    options=options,
                )
        except Exception as exc:  # a compile that fails is a data point, not a crash
            out["compile_s"] = round(time.perf_counter() - start, 3)
            out["status"] = _classify(exc)
            detail = _first_error_line(str(exc)) or _first_error_line(self._log_since(log_offset))
            out["message"] = (detail or str(exc).strip().splitlines()[0] or type(exc).__name__)[
                :240
            ]
            return out
        finally:
            shutil.rmtree(self.cache_dir, ignore_errors=True)
        out["compile_s"] = round(time.perf_counter() - start, 3)
        out["status"] = "ok"
        if target.backend == "cuda" and is_trap_stub(compiled.asm["ptx"]):
            out["status"] = "trap_stub"
            out["message"] = "Triton emitted a kernel that only traps (no global writes)"
        out["shared_bytes"] = int(compiled.metadata.shared)
        tmem = getattr(compiled.metadata, "tmem_size", None)
        out["tmem_columns"] = "" if tmem is None else int(tmem)
        if target.backend == "cuda":
            out.update(read_ptxas_log(printed.getvalue()))
            out.update(self._cuobjdump(compiled.asm["cubin"]))
            if out["status"] == "ok":
                out.update(self.peak_live(compiled.asm["ptx"], target))
        else:
            self.last_amdgcn = compiled.asm["amdgcn"]
            out.update(read_amdgcn(self.last_amdgcn))
        return out

    def peak_live(self, ptx: str, target: Target) -> dict[str, Any]:
        """The PEAK_LIVE_COLUMNS of a CUDA kernel's PTX: assembled by `live_assembler` with
        the flags Triton's `make_cubin` passes (`-lineinfo -v --regAllocOptLevel=2`, FP fusion
        on), its register count lowered (`lower_register_count`), analysed by `nvdisasm -lrm
        count`. A failure is recorded as `peak_live_assembler` = 'none: REASON'."""
        from triton.backends.nvidia.compiler import sm_arch_from_capability

        assert isinstance(target.arch, int)
        out: dict[str, Any] = dict.fromkeys(PEAK_LIVE_COLUMNS, "")
        try:
            ptxas, version = live_assembler(target.arch)
        except (FileNotFoundError, ValueError, subprocess.CalledProcessError) as exc:
            out["peak_live_assembler"] = f"none: {exc}"[:240]
            return out
        out["peak_live_assembler"] = version
        with tempfile.TemporaryDirectory(dir=self.scratch) as work:
            src, binary = Path(work) / "kernel.ptx", Path(work) / "kernel.cubin"
            src.write_text(ptx)
            arch = sm_arch_from_capability(target.arch)
            cmd = [ptxas, "-lineinfo", "-v", "--regAllocOptLevel=2", f"--gpu-name={arch}"]
            done = subprocess.run(
                [*cmd, str(src), "-o", str(binary)], capture_output=True, text=True
            )
            if done.returncode != 0:
                out["peak_live_assembler"] = (
                    f"none: {version} failed: "
                    + (_first_error_line(done.stderr) or f"exit {done.returncode}")[:200]
                )
                return out
            log = read_ptxas_log(done.stdout + done.stderr)
            out["peak_live_used_regs"] = log["regs"]
            out["peak_live_spill_bytes"] = log["spill_store_bytes"]
            lowered = Path(work) / "lowered.cubin"
            lowered.write_bytes(lower_register_count(binary.read_bytes()))
            listing = subprocess.run(
                [nvdisasm_path(), "-lrm", "count", str(lowered)], capture_output=True, text=True
            )
            try:
                out["peak_live_regs"] = read_peak_live(listing.stdout)
            except ValueError:
                reason = _first_error_line(listing.stderr) or "no live counts"
                out["peak_live_assembler"] = f"none: nvdisasm: {reason}"[:240]
        return out

    def measure_peak_live(self, row: dict[str, Any]) -> dict[str, Any]:
        """The PEAK_LIVE_COLUMNS of a CUDA row already in the data set: Triton compiles it to
        PTX only (its own ptxas is not run: the `cubin` stage is replaced by one that stops),
        then `peak_live`."""
        target = TARGETS[row["target"]]
        if target.backend != "cuda":
            raise ValueError(f"peak live registers are a CUDA measurement; {target.name} is not")
        variant, tile = from_row(row)
        fn, signature, constexprs, attrs, options = kernels.source(row["kernel"], variant, tile)
        captured: dict[str, str] = {}

        class _PtxReady(Exception):
            pass

        def hook(*args: Any) -> Any:
            if not args:  # the hook's cache-key call
                return "ptx-only", "ptx-only"
            stages = args[1]

            def stop(src: str, metadata: Any) -> bytes:
                captured["ptx"] = src
                raise _PtxReady

            stages["cubin"] = stop
            return None

        knobs = self.triton.knobs.runtime
        previous = knobs.add_stages_inspection_hook
        knobs.add_stages_inspection_hook = hook
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                self.triton.compile(
                    self.triton.compiler.ASTSource(fn, signature, constexprs, attrs),
                    target=gpu_target(target),
                    options=options,
                )
        except _PtxReady:
            pass
        except Exception as exc:  # recorded, as a failed compile is
            out: dict[str, Any] = dict.fromkeys(PEAK_LIVE_COLUMNS, "")
            out["peak_live_assembler"] = f"none: {type(exc).__name__}: {exc}".splitlines()[0][:240]
            return out
        finally:
            knobs.add_stages_inspection_hook = previous
            shutil.rmtree(self.cache_dir, ignore_errors=True)
        if "ptx" not in captured:
            raise RuntimeError("Triton finished without reaching its cubin stage")
        return self.peak_live(captured["ptx"], target)

    def _cuobjdump(self, cubin: bytes) -> dict[str, int]:
        with tempfile.NamedTemporaryFile(dir=self.scratch, suffix=".cubin") as f:
            f.write(cubin)
            f.flush()
            text = subprocess.run(
                [cuobjdump_path(), "-res-usage", f.name], capture_output=True, text=True, check=True
            ).stdout
        found = read_cuobjdump(text)
        return {"static_shared_bytes": found["static_shared_bytes"]}
