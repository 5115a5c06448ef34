"""What the Triton compiler (3.9) allocates for a kernel of `tl.dot` attention loops on each
target: shared memory (LDS on AMD), registers and spills. A shared piece: the triton family uses
it, and so can any family whose kernels Triton compiles (FlexAttention's templates, Triton on
ROCm). It imports the core only and registers no family. docs/model.md 16.7 states the rules with
their evidence, 16.8 what a pipeline stage buys.

How a family uses it:

1. Describe the kernel as loops (`loops`): an `AttentionKernel` of `DotLoop`s run one after
   another (a forward: one loop; a two-loop backward: the dK/dV loop then the dQ loop). Per
   loop: its operands (`Operand`: rows x cols elements, `resident=True` for a tile loaded once
   before the loop and read by every iteration, such as the forward's Q; `resident=False` for
   a tile streamed every iteration, which the software pipeliner buffers num_stages deep), the
   dots that read each operand as stored or through `tl.trans`, the chained tile one dot feeds
   to a later one (`Chain`: P, dS), fp32 accumulators carried across iterations (O; dK, dV; dQ)
   and score tiles of one iteration (S, P, dP), and fp32 row vectors streamed beside an operand
   (`RowVector`: the backward's LSE and D). A template's extra inputs are more operands (a
   block mask's index tile read by no dot is not an operand: it does not pass through shared
   memory); a decode template is a loop with few rows.
2. Name the target (`target.CompilerTarget.cuda(major, minor)` or `.amd("gfx942" | "gfx950")`):
   it decides how the dots lower (`DotPath`: FMA below cc 8.0, mma.sync, wgmma on cc 9.0,
   tcgen05 on cc 10.x, MFMA on AMD) and the register cap.
3. Call `allocation.allocate(kernel, target, warps, stages)` with one entry per candidate; it
   returns `Allocation`: `shared_bytes` (the launch compares it with the device's opt-in
   limit), `registers` (`RegisterEstimate`: live, cap, allocated, spilled per thread; None on
   AMD) and each loop's `dot_paths`. A configuration whose registers exceed the cap spills; it
   still compiles and launches, so the caller costs the spill rather than refusing it.
   `pipeline.pipelined_round` gives the round of a loop with a given number of stages;
   on AMD, `pipeline.amd_load_stages` says how many of them the compiled loop keeps.

Modules: `loops` (the description), `target` (lowering, register cap), `shared_memory` (the
arena, with the AMD LDS rules), `registers` (live state, count, spill; constants fitted on the
compiled data set's `fit` split), `pipeline` (what a stage buys), `allocation` (the call).
"""
