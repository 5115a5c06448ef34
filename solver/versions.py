"""The versions an answer names (`model_version`, `catalog_version`), in a module that imports
nothing: the CLI's answer cache keys its entries by them without loading the solver.
`hardware.CATALOG_VERSION` and `solve.MODEL_VERSION` are these."""

# .2: Ascend core record; .3: achievable DRAM and L2 fractions; .4: fa3 is the cc 9.0 default;
# .5: 910A and 310P3 vector and transfer rates (assumptions, marked unconfirmed);
# .6: Blackwell (gb200, b300, rtx-pro-6000 added; b200 and rtx-5090 checked against the sourced
# figures; tensor memory and the FP4 rate; fa4 the default on compute capability 10.x and 12.0)
# .7: the rocm kind: AMD Instinct MI300X, MI325X (gfx942) and MI355X (gfx950)
# 2026.12.1: the AMD parts' LDS read bandwidth sourced (AMD's ROCm blog on CDNA4 GEMMs, Table 1:
# 256 B/clk on CDNA4, 128 on CDNA3); values unchanged
# 2026.12.2: the AMD Instinct MI350X (gfx950): the MI355X's die at its 2.2 GHz peak clock (the
# clocked rates 2.2 / 2.4 of the MI355X's); other devices unchanged
CATALOG_VERSION = "2026.12.2"

# 0.2.0: family interface; achievable bandwidth, launch, iteration and window-L2 terms.
# 0.3.0: the ascend family (CUDA answers unchanged).
# 0.4.0: the fa3 family, the default on compute capability 9.0.
# 0.5.0: the backward pass (fa2 and triton backward families); forward answers unchanged.
# 0.6.0: decode and split-KV (num_splits, pack_gqa, page_size), the flashinfer family.
# 0.7.0: fa3 decode and split-KV (Hopper's decode default), ascend decode (IncreFlashAttention);
#        forward answers without a longer cache unchanged.
# 0.8.0: the fa4 family (FlashAttention-4: tcgen05, tensor memory, 2-CTA on sm_100; its mma.sync
#        kernel on sm_120), the default on compute capability 10.x and 12.0; answers on other
#        devices unchanged.
# 0.9.0: the triton family's shared memory, registers and spills as the Triton compiler allocates
#        them (families/triton_compiler), spills costed not refused, the cost of pipeline stages;
#        other families' answers unchanged.
# 0.10.0: training kernels as they are: the fa3 backward (Hopper's default backward); fa2's
#        backward by release (kernel_head_dim) with ptxas-calibrated registers; decode tiles
#        the decode kernels instantiate (fa2's split-KV kernel, flashinfer's layouts).
# 0.11.0: the rocm device kind (AMD Instinct MI300X, MI325X, MI355X) and the ck family; answers
#        on every other device unchanged.
# 0.12.0: fa3 decode on the one tile FA3's decode kernel is built with (tile_size_fwd_sm90), a
#        tile's Q/O traffic on its real rows; fa2's forward by release (kernel_head_dim: head
#        dims 160 and 224 on v2.8.3's 192/256 kernels); other families' answers unchanged.
# 0.13.0: the flex family (PyTorch FlexAttention's forward, backward and decode templates;
#        block-mask options); other families' answers unchanged (the triton family now builds
#        on the shared triton_cuda piece, bit-identically).
# 0.14.0: fp32 inputs (the flex family only: FLOAT32_PRECISION 'ieee' on FMA dots by default,
#        'tf32' on the tensor cores when pinned; every other family refuses fp32), flex decode's
#        packed rows held to the block mask's BLOCK_SIZE; answers of 16-bit requests of every
#        other family unchanged.
# 0.15.0: the triton family's registers on Triton's warp layouts (wgmma: the scores' warps along
#        the rows, the accumulators split the unchained way; the streamed tiles' addresses; the
#        count fitted exactly, by least absolute deviations); triton and flex answers move,
#        other families' answers unchanged.
# 0.16.0: triton on ROCm (issue 26 item 2): the triton family runs on rocm devices with
#   waves_per_eu, matrix_instr_nonkdim and kpack (LDS, VGPR+AGPR and the cost on the shared AMD
#   pieces), flex's forward on rocm devices; every CUDA and Ascend answer as before, their
#   refusals of triton and flex now name both kinds.
# 0.17.0: the flex backward's shared memory on mma.sync as Triton allocates it (Q^T and K^T,
#        transposed in registers, kept out of the pipeline; docs/model.md 20.2): flex backward
#        answers move; every other family's answers unchanged.
# 0.19.0: the triton family's VGPR+AGPR estimate on ROCm on Triton's AMD structure (issue 26):
#        the waves along the rows of the chained dots (the second dot's split over dv), the
#        MFMA edge, the B operands' live window, the staged K/V tiles (none with gfx950's
#        asynchronous copies), the loads' offsets, the causal loop's mask; LLVM's half split of
#        the cap where AGPRs are not ruled out; triton and flex answers on mi300x, mi325x and
#        mi355x move, every CUDA and Ascend answer unchanged.
# 0.20.0: the AMD VGPR+AGPR estimate's constants refitted on the fit split after the
#        compiler-truth data set gained the AMD targets' top-5 stratum (47 forward rows on
#        gfx942 and gfx950, issue 21/26; docs/model.md 19.10): triton and flex answers on
#        mi300x, mi325x and mi355x move, every CUDA and Ascend answer unchanged.
# 0.21.0: the AMD cost model against published MI355X throughput (issue 26; docs/model.md
#        19.11): every workgroup's prologue waits an HBM latency, the round reads the HBM share
#        of the K/V tiles at the CU's HBM share, ck's qr_async_trload keeps Q, K and V in one
#        LDS buffer each, one-buffer pipelines wait out their loads' latency: ck, triton and flex
#        answers on mi300x, mi325x and mi355x move, every CUDA and Ascend answer unchanged.
# 0.22.0: AMD picks (issue 26; docs/model.md 19.4, 19.5, 19.8): a workgroup's waves are one
#        instruction stream per SIMD (they pass the same barriers every iteration), the LDS runs
#        at the loop's sustained share of its peak, ck's register estimate follows CK's
#        pipeline order and block GEMM, fp8 on qr_async: ck, triton and flex answers on mi300x,
#        mi325x and mi355x move, every CUDA and Ascend answer unchanged.
# 0.23.0: the AMD VGPR+AGPR estimate (issue 26; docs/model.md 19.10): the count not rounded to
#        the granule (`.vgpr_count` is not), the B operands' window per stage count, the staged
#        tiles measured at the compiled peak, the state above 256 registers in AGPRs, the
#        staged K/V tiles counted at the head dims the kernel loads (a padded head dim masks
#        the rest), refitted on the grown fit split: triton and flex answers on mi300x, mi325x
#        and mi355x move, every CUDA and Ascend answer unchanged.
# 0.24.0: the ck softmax's row max and row sum cross the lanes of the MFMA result layout every
#        iteration (issue 26; docs/model.md 19.5): X = 2 (kM0 / m) log2(64 / m) wave-wide
#        ds_bpermute + VALU steps a workgroup, so a 16x16 MFMA tile costs 4x the 32x32's (ck,
#        and triton and flex on ROCm, whose chained dots take the same transposed layout);
#        qr_async_trload's prefill path (kM0 > 64, d < 256: K and V double-buffered in LDS,
#        loaded ahead, 4 syncs an iteration, B operands in registers) and qs's Q chunk in
#        registers (docs/model.md 19.4, 19.5): ck, triton and flex answers on mi300x, mi325x and
#        mi355x move, every CUDA and Ascend answer unchanged.
# 0.25.0: the triton family's LDS on gfx942/gfx950 at one stage holds the chained tile P where
#        it crosses the waves (docs/model.md 19.10, 16.12): the largest of the operands and P,
#        as compiled (the holdout draw's gfx942 128x128 w8 and gfx950 256x256 w16 rows, and the
#        fit split's three); one-stage tiles whose P exceeds the LDS are now refused: 16
#        triton answers of the answer digest's set on mi300x and mi325x move (flex on ROCm
#        takes the same rule), every other answer unchanged.
# 0.26.0: the triton family's ROCm cost as its compiled loop runs (docs/model.md 19.10): the
#        stream pipeliner's loads keep their lead only where they go straight into LDS (gfx950)
#        and the loop does not spill (a reload's vmcnt wait covers every older load; on gfx942
#        the tile passes through VGPRs and is waited within the iteration), else the loop waits
#        as at one stage; kpack 1 reads on gfx942 cost what kpack 2's do (the compiler pairs
#        them into 16-byte ds_read2_b64: same instructions, same bytes,
#        `benchmarks/data/compiler/amd_load_cover.csv`): triton and flex answers on mi300x,
#        mi325x and mi355x move, every CUDA, Ascend and ck answer unchanged.
# 0.27.0: the answer gives twins one row (docs/model.md 6: configurations with the same block_m,
#        block_n, num_warps and modelled time, which differ only in parameters the model prices
#        alike there: a waves_per_eu cap that does not bind, kpack, stages gfx942 does not
#        keep, fa2's v_in_regs, decode's page sizes), its reasons listing the values it stands
#        for; rows past the first are the next distinct choices. And a pipelined stage on
#        gfx950 keeps its load in flight for 2/3 of a loop, not a whole one (docs/model.md
#        19.10, `AMD_STAGE_LEAD`: the median compiled lead): triton and flex on mi355x move.
#        And a spill costs what the compiled loops spill, per register over the cap: 8 bytes
#        of scratch traffic and 0.34 reload waits (an L2 hit each) an iteration, where s + s^2
#        / 29 slots of 8 bytes were charged (19.10): triton and flex on AMD move.
# 0.28.0: CK's qr_async pipeline copies K to LDS in kN0 x kK1 slices (its policy's asynchronous
#        K layout) and hands gemm0 kN0 x kK0 of one: kK0 above kK1 (32) is illegal, and below
#        it every K element is copied kK1 / kK0 times, which the LDS and L2 traffic now pay
#        (docs/model.md 19.3, 19.5). ck answers on mi300x, mi325x and mi355x move.
# 0.29.0: Triton on ROCm charges the work of the waves as Triton lays them over the chained
#        dots: where they outnumber the MFMA row tiles they compute copies, MFMAs and softmax
#        alike (docs/model.md 19.10, `ChainedDotLayout`: the per-wave MFMA count of every
#        compiled loop of amd_load_cover.csv), and such tiles are legal (Triton compiles them;
#        PyTorch FlexAttention's ROCm default at d 256 is one). triton and flex answers on
#        mi300x, mi325x and mi355x move.
# 0.30.0: CK's qr_async takes a head dim of one kK0 chunk (its static_assert is 1 <= k0_loops,
#        where qr and qs prefetch the next chunk and need two: docs/model.md 19.3): ck answers
#        at head dims up to 32 move; the ck_template rule's words change in every ck funnel.
#        And a triton or flex tile on ROCm whose waves compute copies says so in its reasons
#        (how many times S and O are computed; docs/model.md 19.10), its time unchanged.
# 0.31.0: the ck family against CK compiled (clang 19's front end, AMD's LLVM 23 back end:
#        benchmarks/data/compiler/ck_fmha.csv, docs/model.md 19.3 and 19.4): four template
#        rules read from CK's tile distributions (synchronous K's and qs's Q load passes, qs on
#        the 32x32 MFMA only, V's register shuffle), which CK's front end enforces and 0.30.0
#        did not, and one it cannot see (qr/qs's kN0 x kK0 K tile within the LDS buffer CK
#        sizes for kK1); and the register estimate refitted to the compiled instances (S and P live
#        together, qr/qs hold a V chunk, 16x16 instances one S more, an offset a gemm0 chunk):
#        84 of 89 at the compiler's occupancy (0.30.0: 66), 19 of 24 held out; an estimate
#        above 416 registers is refused (every compiled one spilled). ck answers on mi300x,
#        mi325x and mi355x move (the d 256 qs picks of two workgroups a CU were one).
# 0.32.0: a causal Triton kernel's spill where the compiler puts it (docs/model.md 19.10,
#        benchmarks/data/compiler/amd_causal_loops.csv): the mask's registers live in the
#        masked diagonal loop only, so the unmasked loop carries only what its own live state
#        puts over the cap, and the diagonal iterations the rest. triton and flex answers of
#        causal problems on mi300x, mi325x and mi355x move.
# 0.33.0: the resident workgroups of a CU overlap each other's dependent phases by beta = 0.65
#        of what independent streams would (`rocm.device.WORKGROUP_OVERLAP`, docs/model.md
#        19.5), fitted on aiter's CK-path throughput on MI355X and checked on aiter's Triton and
#        FlexAttention's measured rows: ck, triton and flex answers on every rocm device move
#        (those of one workgroup a CU keep their times); CUDA and Ascend answers unchanged.
MODEL_VERSION = "0.33.0"
