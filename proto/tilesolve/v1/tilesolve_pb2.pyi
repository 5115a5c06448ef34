from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DataType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DATA_TYPE_UNSPECIFIED: _ClassVar[DataType]
    DATA_TYPE_FP16: _ClassVar[DataType]
    DATA_TYPE_BF16: _ClassVar[DataType]
    DATA_TYPE_FP8: _ClassVar[DataType]
    DATA_TYPE_FP32: _ClassVar[DataType]

class Phase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PHASE_UNSPECIFIED: _ClassVar[Phase]
    PHASE_FORWARD: _ClassVar[Phase]
    PHASE_BACKWARD: _ClassVar[Phase]
    PHASE_DECODE: _ClassVar[Phase]

class KernelFamily(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KERNEL_FAMILY_UNSPECIFIED: _ClassVar[KernelFamily]
    KERNEL_FAMILY_FA2: _ClassVar[KernelFamily]
    KERNEL_FAMILY_TRITON: _ClassVar[KernelFamily]
    KERNEL_FAMILY_FA3: _ClassVar[KernelFamily]
    KERNEL_FAMILY_ASCEND: _ClassVar[KernelFamily]

class Engine(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ENGINE_UNSPECIFIED: _ClassVar[Engine]
    ENGINE_CPSAT: _ClassVar[Engine]
    ENGINE_EXHAUSTIVE: _ClassVar[Engine]

class SolveStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SOLVE_STATUS_UNSPECIFIED: _ClassVar[SolveStatus]
    SOLVE_STATUS_OPTIMAL: _ClassVar[SolveStatus]
    SOLVE_STATUS_FEASIBLE: _ClassVar[SolveStatus]
    SOLVE_STATUS_INFEASIBLE: _ClassVar[SolveStatus]
DATA_TYPE_UNSPECIFIED: DataType
DATA_TYPE_FP16: DataType
DATA_TYPE_BF16: DataType
DATA_TYPE_FP8: DataType
DATA_TYPE_FP32: DataType
PHASE_UNSPECIFIED: Phase
PHASE_FORWARD: Phase
PHASE_BACKWARD: Phase
PHASE_DECODE: Phase
KERNEL_FAMILY_UNSPECIFIED: KernelFamily
KERNEL_FAMILY_FA2: KernelFamily
KERNEL_FAMILY_TRITON: KernelFamily
KERNEL_FAMILY_FA3: KernelFamily
KERNEL_FAMILY_ASCEND: KernelFamily
ENGINE_UNSPECIFIED: Engine
ENGINE_CPSAT: Engine
ENGINE_EXHAUSTIVE: Engine
SOLVE_STATUS_UNSPECIFIED: SolveStatus
SOLVE_STATUS_OPTIMAL: SolveStatus
SOLVE_STATUS_FEASIBLE: SolveStatus
SOLVE_STATUS_INFEASIBLE: SolveStatus

class AttentionProblem(_message.Message):
    __slots__ = ("batch", "heads", "kv_heads", "seq_len", "seq_len_kv", "head_dim", "head_dim_v", "dtype", "causal", "dropout", "phase")
    BATCH_FIELD_NUMBER: _ClassVar[int]
    HEADS_FIELD_NUMBER: _ClassVar[int]
    KV_HEADS_FIELD_NUMBER: _ClassVar[int]
    SEQ_LEN_FIELD_NUMBER: _ClassVar[int]
    SEQ_LEN_KV_FIELD_NUMBER: _ClassVar[int]
    HEAD_DIM_FIELD_NUMBER: _ClassVar[int]
    HEAD_DIM_V_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    CAUSAL_FIELD_NUMBER: _ClassVar[int]
    DROPOUT_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    batch: int
    heads: int
    kv_heads: int
    seq_len: int
    seq_len_kv: int
    head_dim: int
    head_dim_v: int
    dtype: DataType
    causal: bool
    dropout: float
    phase: Phase
    def __init__(self, batch: _Optional[int] = ..., heads: _Optional[int] = ..., kv_heads: _Optional[int] = ..., seq_len: _Optional[int] = ..., seq_len_kv: _Optional[int] = ..., head_dim: _Optional[int] = ..., head_dim_v: _Optional[int] = ..., dtype: _Optional[_Union[DataType, str]] = ..., causal: _Optional[bool] = ..., dropout: _Optional[float] = ..., phase: _Optional[_Union[Phase, str]] = ...) -> None: ...

class SolveOptions(_message.Message):
    __slots__ = ("kernel_enum", "top_k", "engine", "require_divisible", "block_m", "block_n", "num_warps", "num_stages", "max_smem", "min_blocks_per_sm", "time_limit_s", "kernel", "parameter_pins", "choose_page_size", "sparse_block_size", "window", "block_density", "score_mod_ops")
    class ParameterPinsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    KERNEL_ENUM_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_DIVISIBLE_FIELD_NUMBER: _ClassVar[int]
    BLOCK_M_FIELD_NUMBER: _ClassVar[int]
    BLOCK_N_FIELD_NUMBER: _ClassVar[int]
    NUM_WARPS_FIELD_NUMBER: _ClassVar[int]
    NUM_STAGES_FIELD_NUMBER: _ClassVar[int]
    MAX_SMEM_FIELD_NUMBER: _ClassVar[int]
    MIN_BLOCKS_PER_SM_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_S_FIELD_NUMBER: _ClassVar[int]
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    PARAMETER_PINS_FIELD_NUMBER: _ClassVar[int]
    CHOOSE_PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    SPARSE_BLOCK_SIZE_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    BLOCK_DENSITY_FIELD_NUMBER: _ClassVar[int]
    SCORE_MOD_OPS_FIELD_NUMBER: _ClassVar[int]
    kernel_enum: KernelFamily
    top_k: int
    engine: Engine
    require_divisible: bool
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    max_smem: int
    min_blocks_per_sm: int
    time_limit_s: float
    kernel: str
    parameter_pins: _containers.ScalarMap[str, int]
    choose_page_size: bool
    sparse_block_size: int
    window: int
    block_density: float
    score_mod_ops: float
    def __init__(self, kernel_enum: _Optional[_Union[KernelFamily, str]] = ..., top_k: _Optional[int] = ..., engine: _Optional[_Union[Engine, str]] = ..., require_divisible: _Optional[bool] = ..., block_m: _Optional[int] = ..., block_n: _Optional[int] = ..., num_warps: _Optional[int] = ..., num_stages: _Optional[int] = ..., max_smem: _Optional[int] = ..., min_blocks_per_sm: _Optional[int] = ..., time_limit_s: _Optional[float] = ..., kernel: _Optional[str] = ..., parameter_pins: _Optional[_Mapping[str, int]] = ..., choose_page_size: _Optional[bool] = ..., sparse_block_size: _Optional[int] = ..., window: _Optional[int] = ..., block_density: _Optional[float] = ..., score_mod_ops: _Optional[float] = ...) -> None: ...

class SmLimits(_message.Message):
    __slots__ = ("compute_capability", "warp_size_threads", "max_threads_per_block", "max_threads_per_sm", "max_blocks_per_sm", "regs_per_sm", "max_regs_per_block", "max_regs_per_thread", "reg_alloc_unit_regs", "reg_file_subpartitions", "smem_per_sm_bytes", "smem_per_block_default_bytes", "smem_per_block_optin_bytes", "smem_alloc_granularity_bytes", "reserved_smem_per_block_bytes", "smem_carveout_options_kib", "tensor_memory_lanes", "tensor_memory_columns")
    COMPUTE_CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    WARP_SIZE_THREADS_FIELD_NUMBER: _ClassVar[int]
    MAX_THREADS_PER_BLOCK_FIELD_NUMBER: _ClassVar[int]
    MAX_THREADS_PER_SM_FIELD_NUMBER: _ClassVar[int]
    MAX_BLOCKS_PER_SM_FIELD_NUMBER: _ClassVar[int]
    REGS_PER_SM_FIELD_NUMBER: _ClassVar[int]
    MAX_REGS_PER_BLOCK_FIELD_NUMBER: _ClassVar[int]
    MAX_REGS_PER_THREAD_FIELD_NUMBER: _ClassVar[int]
    REG_ALLOC_UNIT_REGS_FIELD_NUMBER: _ClassVar[int]
    REG_FILE_SUBPARTITIONS_FIELD_NUMBER: _ClassVar[int]
    SMEM_PER_SM_BYTES_FIELD_NUMBER: _ClassVar[int]
    SMEM_PER_BLOCK_DEFAULT_BYTES_FIELD_NUMBER: _ClassVar[int]
    SMEM_PER_BLOCK_OPTIN_BYTES_FIELD_NUMBER: _ClassVar[int]
    SMEM_ALLOC_GRANULARITY_BYTES_FIELD_NUMBER: _ClassVar[int]
    RESERVED_SMEM_PER_BLOCK_BYTES_FIELD_NUMBER: _ClassVar[int]
    SMEM_CARVEOUT_OPTIONS_KIB_FIELD_NUMBER: _ClassVar[int]
    TENSOR_MEMORY_LANES_FIELD_NUMBER: _ClassVar[int]
    TENSOR_MEMORY_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    compute_capability: str
    warp_size_threads: int
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    regs_per_sm: int
    max_regs_per_block: int
    max_regs_per_thread: int
    reg_alloc_unit_regs: int
    reg_file_subpartitions: int
    smem_per_sm_bytes: int
    smem_per_block_default_bytes: int
    smem_per_block_optin_bytes: int
    smem_alloc_granularity_bytes: int
    reserved_smem_per_block_bytes: int
    smem_carveout_options_kib: _containers.RepeatedScalarFieldContainer[int]
    tensor_memory_lanes: int
    tensor_memory_columns: int
    def __init__(self, compute_capability: _Optional[str] = ..., warp_size_threads: _Optional[int] = ..., max_threads_per_block: _Optional[int] = ..., max_threads_per_sm: _Optional[int] = ..., max_blocks_per_sm: _Optional[int] = ..., regs_per_sm: _Optional[int] = ..., max_regs_per_block: _Optional[int] = ..., max_regs_per_thread: _Optional[int] = ..., reg_alloc_unit_regs: _Optional[int] = ..., reg_file_subpartitions: _Optional[int] = ..., smem_per_sm_bytes: _Optional[int] = ..., smem_per_block_default_bytes: _Optional[int] = ..., smem_per_block_optin_bytes: _Optional[int] = ..., smem_alloc_granularity_bytes: _Optional[int] = ..., reserved_smem_per_block_bytes: _Optional[int] = ..., smem_carveout_options_kib: _Optional[_Iterable[int]] = ..., tensor_memory_lanes: _Optional[int] = ..., tensor_memory_columns: _Optional[int] = ...) -> None: ...

class CudaThroughput(_message.Message):
    __slots__ = ("sm_count", "boost_clock_mhz", "tensor_fp16_dense_tflops", "tensor_fp8_dense_tflops", "fp32_tflops", "sfu_ops_per_clk_per_sm", "smem_bandwidth_bytes_per_clk_per_sm", "mma_sync_efficiency", "l2_hit_latency_cycles", "dram_latency_cycles", "barrier_cycles", "tensor_fp4_dense_tflops")
    SM_COUNT_FIELD_NUMBER: _ClassVar[int]
    BOOST_CLOCK_MHZ_FIELD_NUMBER: _ClassVar[int]
    TENSOR_FP16_DENSE_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    TENSOR_FP8_DENSE_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    FP32_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    SFU_OPS_PER_CLK_PER_SM_FIELD_NUMBER: _ClassVar[int]
    SMEM_BANDWIDTH_BYTES_PER_CLK_PER_SM_FIELD_NUMBER: _ClassVar[int]
    MMA_SYNC_EFFICIENCY_FIELD_NUMBER: _ClassVar[int]
    L2_HIT_LATENCY_CYCLES_FIELD_NUMBER: _ClassVar[int]
    DRAM_LATENCY_CYCLES_FIELD_NUMBER: _ClassVar[int]
    BARRIER_CYCLES_FIELD_NUMBER: _ClassVar[int]
    TENSOR_FP4_DENSE_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    sm_count: int
    boost_clock_mhz: float
    tensor_fp16_dense_tflops: float
    tensor_fp8_dense_tflops: float
    fp32_tflops: float
    sfu_ops_per_clk_per_sm: int
    smem_bandwidth_bytes_per_clk_per_sm: int
    mma_sync_efficiency: float
    l2_hit_latency_cycles: int
    dram_latency_cycles: int
    barrier_cycles: int
    tensor_fp4_dense_tflops: float
    def __init__(self, sm_count: _Optional[int] = ..., boost_clock_mhz: _Optional[float] = ..., tensor_fp16_dense_tflops: _Optional[float] = ..., tensor_fp8_dense_tflops: _Optional[float] = ..., fp32_tflops: _Optional[float] = ..., sfu_ops_per_clk_per_sm: _Optional[int] = ..., smem_bandwidth_bytes_per_clk_per_sm: _Optional[int] = ..., mma_sync_efficiency: _Optional[float] = ..., l2_hit_latency_cycles: _Optional[int] = ..., dram_latency_cycles: _Optional[int] = ..., barrier_cycles: _Optional[int] = ..., tensor_fp4_dense_tflops: _Optional[float] = ...) -> None: ...

class MemorySystem(_message.Message):
    __slots__ = ("memory_bytes", "dram_bandwidth_gb_per_s", "l2_bytes", "l2_bandwidth_bytes_per_clk", "dram_achievable_fraction", "l2_achievable_fraction")
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    DRAM_BANDWIDTH_GB_PER_S_FIELD_NUMBER: _ClassVar[int]
    L2_BYTES_FIELD_NUMBER: _ClassVar[int]
    L2_BANDWIDTH_BYTES_PER_CLK_FIELD_NUMBER: _ClassVar[int]
    DRAM_ACHIEVABLE_FRACTION_FIELD_NUMBER: _ClassVar[int]
    L2_ACHIEVABLE_FRACTION_FIELD_NUMBER: _ClassVar[int]
    memory_bytes: int
    dram_bandwidth_gb_per_s: float
    l2_bytes: int
    l2_bandwidth_bytes_per_clk: float
    dram_achievable_fraction: float
    l2_achievable_fraction: float
    def __init__(self, memory_bytes: _Optional[int] = ..., dram_bandwidth_gb_per_s: _Optional[float] = ..., l2_bytes: _Optional[int] = ..., l2_bandwidth_bytes_per_clk: _Optional[float] = ..., dram_achievable_fraction: _Optional[float] = ..., l2_achievable_fraction: _Optional[float] = ...) -> None: ...

class AscendCore(_message.Message):
    __slots__ = ("ai_core_count", "cube_fp16_tflops", "l1_bytes", "l0a_bytes", "l0b_bytes", "l0c_bytes", "unified_buffer_bytes", "ub_alignment_bytes", "cube_fractal_elements", "core_layout", "aic_count", "aiv_count", "standalone_vector_core_count", "cube_clock_mhz", "vector_clock_mhz", "cube_fp16_macs_per_cycle", "cube_bf16_supported", "vector_fp16_elements_per_cycle", "cube_fp16_gemm_measured_tflops", "gm_read_bytes_per_cycle", "gm_write_bytes_per_cycle", "l2_read_bytes_per_cycle", "l2_write_bytes_per_cycle", "l1_to_l0a_bytes_per_cycle", "l1_to_l0b_bytes_per_cycle", "l1_to_ub_bytes_per_cycle", "l0c_to_ub_bytes_per_cycle", "ub_to_l2_bytes_per_cycle", "ub_to_gm_bytes_per_cycle", "ub_to_l1_bytes_per_cycle", "unconfirmed_fields")
    AI_CORE_COUNT_FIELD_NUMBER: _ClassVar[int]
    CUBE_FP16_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    L1_BYTES_FIELD_NUMBER: _ClassVar[int]
    L0A_BYTES_FIELD_NUMBER: _ClassVar[int]
    L0B_BYTES_FIELD_NUMBER: _ClassVar[int]
    L0C_BYTES_FIELD_NUMBER: _ClassVar[int]
    UNIFIED_BUFFER_BYTES_FIELD_NUMBER: _ClassVar[int]
    UB_ALIGNMENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    CUBE_FRACTAL_ELEMENTS_FIELD_NUMBER: _ClassVar[int]
    CORE_LAYOUT_FIELD_NUMBER: _ClassVar[int]
    AIC_COUNT_FIELD_NUMBER: _ClassVar[int]
    AIV_COUNT_FIELD_NUMBER: _ClassVar[int]
    STANDALONE_VECTOR_CORE_COUNT_FIELD_NUMBER: _ClassVar[int]
    CUBE_CLOCK_MHZ_FIELD_NUMBER: _ClassVar[int]
    VECTOR_CLOCK_MHZ_FIELD_NUMBER: _ClassVar[int]
    CUBE_FP16_MACS_PER_CYCLE_FIELD_NUMBER: _ClassVar[int]
    CUBE_BF16_SUPPORTED_FIELD_NUMBER: _ClassVar[int]
    VECTOR_FP16_ELEMENTS_PER_CYCLE_FIELD_NUMBER: _ClassVar[int]
    CUBE_FP16_GEMM_MEASURED_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    GM_READ_BYTES_PER_CYCLE_FIELD_NUMBER: _ClassVar[int]
    GM_WRITE_BYTES_PER_CYCLE_FIELD_NUMBER: _ClassVar[int]
    L2_READ_BYTES_PER_CYCLE_FIELD_NUMBER: _ClassVar[int]
    L2_WRITE_BYTES_PER_CYCLE_FIELD_NUMBER: _ClassVar[int]
    L1_TO_L0A_BYTES_PER_CYCLE_FIELD_NUMBER: _ClassVar[int]
    L1_TO_L0B_BYTES_PER_CYCLE_FIELD_NUMBER: _ClassVar[int]
    L1_TO_UB_BYTES_PER_CYCLE_FIELD_NUMBER: _ClassVar[int]
    L0C_TO_UB_BYTES_PER_CYCLE_FIELD_NUMBER: _ClassVar[int]
    UB_TO_L2_BYTES_PER_CYCLE_FIELD_NUMBER: _ClassVar[int]
    UB_TO_GM_BYTES_PER_CYCLE_FIELD_NUMBER: _ClassVar[int]
    UB_TO_L1_BYTES_PER_CYCLE_FIELD_NUMBER: _ClassVar[int]
    UNCONFIRMED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    ai_core_count: int
    cube_fp16_tflops: float
    l1_bytes: int
    l0a_bytes: int
    l0b_bytes: int
    l0c_bytes: int
    unified_buffer_bytes: int
    ub_alignment_bytes: int
    cube_fractal_elements: int
    core_layout: str
    aic_count: int
    aiv_count: int
    standalone_vector_core_count: int
    cube_clock_mhz: float
    vector_clock_mhz: float
    cube_fp16_macs_per_cycle: int
    cube_bf16_supported: bool
    vector_fp16_elements_per_cycle: int
    cube_fp16_gemm_measured_tflops: float
    gm_read_bytes_per_cycle: int
    gm_write_bytes_per_cycle: int
    l2_read_bytes_per_cycle: int
    l2_write_bytes_per_cycle: int
    l1_to_l0a_bytes_per_cycle: int
    l1_to_l0b_bytes_per_cycle: int
    l1_to_ub_bytes_per_cycle: int
    l0c_to_ub_bytes_per_cycle: int
    ub_to_l2_bytes_per_cycle: int
    ub_to_gm_bytes_per_cycle: int
    ub_to_l1_bytes_per_cycle: int
    unconfirmed_fields: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ai_core_count: _Optional[int] = ..., cube_fp16_tflops: _Optional[float] = ..., l1_bytes: _Optional[int] = ..., l0a_bytes: _Optional[int] = ..., l0b_bytes: _Optional[int] = ..., l0c_bytes: _Optional[int] = ..., unified_buffer_bytes: _Optional[int] = ..., ub_alignment_bytes: _Optional[int] = ..., cube_fractal_elements: _Optional[int] = ..., core_layout: _Optional[str] = ..., aic_count: _Optional[int] = ..., aiv_count: _Optional[int] = ..., standalone_vector_core_count: _Optional[int] = ..., cube_clock_mhz: _Optional[float] = ..., vector_clock_mhz: _Optional[float] = ..., cube_fp16_macs_per_cycle: _Optional[int] = ..., cube_bf16_supported: _Optional[bool] = ..., vector_fp16_elements_per_cycle: _Optional[int] = ..., cube_fp16_gemm_measured_tflops: _Optional[float] = ..., gm_read_bytes_per_cycle: _Optional[int] = ..., gm_write_bytes_per_cycle: _Optional[int] = ..., l2_read_bytes_per_cycle: _Optional[int] = ..., l2_write_bytes_per_cycle: _Optional[int] = ..., l1_to_l0a_bytes_per_cycle: _Optional[int] = ..., l1_to_l0b_bytes_per_cycle: _Optional[int] = ..., l1_to_ub_bytes_per_cycle: _Optional[int] = ..., l0c_to_ub_bytes_per_cycle: _Optional[int] = ..., ub_to_l2_bytes_per_cycle: _Optional[int] = ..., ub_to_gm_bytes_per_cycle: _Optional[int] = ..., ub_to_l1_bytes_per_cycle: _Optional[int] = ..., unconfirmed_fields: _Optional[_Iterable[str]] = ...) -> None: ...

class RocmCompute(_message.Message):
    __slots__ = ("gfx_target", "cu_count", "xcd_count", "simds_per_cu", "wavefront_lanes", "max_waves_per_simd", "max_workgroup_threads", "vgprs_per_simd_lane", "max_arch_vgprs_per_wave", "max_agprs_per_wave", "vgpr_alloc_granule_regs", "agpr_alignment_regs", "sgprs_per_simd", "max_sgprs_per_wave", "sgpr_alloc_granule_regs", "lds_per_cu_bytes", "lds_per_workgroup_bytes", "lds_alloc_granule_bytes", "lds_bandwidth_bytes_per_clk_per_cu", "engine_clock_mhz", "mfma_fp16_dense_tflops", "mfma_bf16_dense_tflops", "mfma_fp8_dense_tflops", "fp8_format", "mfma_nonk_dims", "valu_fp32_tflops", "transcendental_ops_per_clk_per_cu", "l2_per_xcd_bytes", "infinity_cache_bytes", "unconfirmed_fields")
    GFX_TARGET_FIELD_NUMBER: _ClassVar[int]
    CU_COUNT_FIELD_NUMBER: _ClassVar[int]
    XCD_COUNT_FIELD_NUMBER: _ClassVar[int]
    SIMDS_PER_CU_FIELD_NUMBER: _ClassVar[int]
    WAVEFRONT_LANES_FIELD_NUMBER: _ClassVar[int]
    MAX_WAVES_PER_SIMD_FIELD_NUMBER: _ClassVar[int]
    MAX_WORKGROUP_THREADS_FIELD_NUMBER: _ClassVar[int]
    VGPRS_PER_SIMD_LANE_FIELD_NUMBER: _ClassVar[int]
    MAX_ARCH_VGPRS_PER_WAVE_FIELD_NUMBER: _ClassVar[int]
    MAX_AGPRS_PER_WAVE_FIELD_NUMBER: _ClassVar[int]
    VGPR_ALLOC_GRANULE_REGS_FIELD_NUMBER: _ClassVar[int]
    AGPR_ALIGNMENT_REGS_FIELD_NUMBER: _ClassVar[int]
    SGPRS_PER_SIMD_FIELD_NUMBER: _ClassVar[int]
    MAX_SGPRS_PER_WAVE_FIELD_NUMBER: _ClassVar[int]
    SGPR_ALLOC_GRANULE_REGS_FIELD_NUMBER: _ClassVar[int]
    LDS_PER_CU_BYTES_FIELD_NUMBER: _ClassVar[int]
    LDS_PER_WORKGROUP_BYTES_FIELD_NUMBER: _ClassVar[int]
    LDS_ALLOC_GRANULE_BYTES_FIELD_NUMBER: _ClassVar[int]
    LDS_BANDWIDTH_BYTES_PER_CLK_PER_CU_FIELD_NUMBER: _ClassVar[int]
    ENGINE_CLOCK_MHZ_FIELD_NUMBER: _ClassVar[int]
    MFMA_FP16_DENSE_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    MFMA_BF16_DENSE_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    MFMA_FP8_DENSE_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    FP8_FORMAT_FIELD_NUMBER: _ClassVar[int]
    MFMA_NONK_DIMS_FIELD_NUMBER: _ClassVar[int]
    VALU_FP32_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    TRANSCENDENTAL_OPS_PER_CLK_PER_CU_FIELD_NUMBER: _ClassVar[int]
    L2_PER_XCD_BYTES_FIELD_NUMBER: _ClassVar[int]
    INFINITY_CACHE_BYTES_FIELD_NUMBER: _ClassVar[int]
    UNCONFIRMED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    gfx_target: str
    cu_count: int
    xcd_count: int
    simds_per_cu: int
    wavefront_lanes: int
    max_waves_per_simd: int
    max_workgroup_threads: int
    vgprs_per_simd_lane: int
    max_arch_vgprs_per_wave: int
    max_agprs_per_wave: int
    vgpr_alloc_granule_regs: int
    agpr_alignment_regs: int
    sgprs_per_simd: int
    max_sgprs_per_wave: int
    sgpr_alloc_granule_regs: int
    lds_per_cu_bytes: int
    lds_per_workgroup_bytes: int
    lds_alloc_granule_bytes: int
    lds_bandwidth_bytes_per_clk_per_cu: int
    engine_clock_mhz: float
    mfma_fp16_dense_tflops: float
    mfma_bf16_dense_tflops: float
    mfma_fp8_dense_tflops: float
    fp8_format: str
    mfma_nonk_dims: _containers.RepeatedScalarFieldContainer[int]
    valu_fp32_tflops: float
    transcendental_ops_per_clk_per_cu: int
    l2_per_xcd_bytes: int
    infinity_cache_bytes: int
    unconfirmed_fields: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, gfx_target: _Optional[str] = ..., cu_count: _Optional[int] = ..., xcd_count: _Optional[int] = ..., simds_per_cu: _Optional[int] = ..., wavefront_lanes: _Optional[int] = ..., max_waves_per_simd: _Optional[int] = ..., max_workgroup_threads: _Optional[int] = ..., vgprs_per_simd_lane: _Optional[int] = ..., max_arch_vgprs_per_wave: _Optional[int] = ..., max_agprs_per_wave: _Optional[int] = ..., vgpr_alloc_granule_regs: _Optional[int] = ..., agpr_alignment_regs: _Optional[int] = ..., sgprs_per_simd: _Optional[int] = ..., max_sgprs_per_wave: _Optional[int] = ..., sgpr_alloc_granule_regs: _Optional[int] = ..., lds_per_cu_bytes: _Optional[int] = ..., lds_per_workgroup_bytes: _Optional[int] = ..., lds_alloc_granule_bytes: _Optional[int] = ..., lds_bandwidth_bytes_per_clk_per_cu: _Optional[int] = ..., engine_clock_mhz: _Optional[float] = ..., mfma_fp16_dense_tflops: _Optional[float] = ..., mfma_bf16_dense_tflops: _Optional[float] = ..., mfma_fp8_dense_tflops: _Optional[float] = ..., fp8_format: _Optional[str] = ..., mfma_nonk_dims: _Optional[_Iterable[int]] = ..., valu_fp32_tflops: _Optional[float] = ..., transcendental_ops_per_clk_per_cu: _Optional[int] = ..., l2_per_xcd_bytes: _Optional[int] = ..., infinity_cache_bytes: _Optional[int] = ..., unconfirmed_fields: _Optional[_Iterable[str]] = ...) -> None: ...

class HardwareSpec(_message.Message):
    __slots__ = ("name", "display_name", "vendor", "arch", "aliases", "default_kernel", "memory", "sm", "throughput", "ascend", "sources", "notes", "rocm")
    class SourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    VENDOR_FIELD_NUMBER: _ClassVar[int]
    ARCH_FIELD_NUMBER: _ClassVar[int]
    ALIASES_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_KERNEL_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    SM_FIELD_NUMBER: _ClassVar[int]
    THROUGHPUT_FIELD_NUMBER: _ClassVar[int]
    ASCEND_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    ROCM_FIELD_NUMBER: _ClassVar[int]
    name: str
    display_name: str
    vendor: str
    arch: str
    aliases: _containers.RepeatedScalarFieldContainer[str]
    default_kernel: str
    memory: MemorySystem
    sm: SmLimits
    throughput: CudaThroughput
    ascend: AscendCore
    sources: _containers.ScalarMap[str, str]
    notes: str
    rocm: RocmCompute
    def __init__(self, name: _Optional[str] = ..., display_name: _Optional[str] = ..., vendor: _Optional[str] = ..., arch: _Optional[str] = ..., aliases: _Optional[_Iterable[str]] = ..., default_kernel: _Optional[str] = ..., memory: _Optional[_Union[MemorySystem, _Mapping]] = ..., sm: _Optional[_Union[SmLimits, _Mapping]] = ..., throughput: _Optional[_Union[CudaThroughput, _Mapping]] = ..., ascend: _Optional[_Union[AscendCore, _Mapping]] = ..., sources: _Optional[_Mapping[str, str]] = ..., notes: _Optional[str] = ..., rocm: _Optional[_Union[RocmCompute, _Mapping]] = ...) -> None: ...

class HardwareRef(_message.Message):
    __slots__ = ("name", "spec")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    name: str
    spec: HardwareSpec
    def __init__(self, name: _Optional[str] = ..., spec: _Optional[_Union[HardwareSpec, _Mapping]] = ...) -> None: ...

class SolveRequest(_message.Message):
    __slots__ = ("hardware", "problem", "options")
    HARDWARE_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    hardware: HardwareRef
    problem: AttentionProblem
    options: SolveOptions
    def __init__(self, hardware: _Optional[_Union[HardwareRef, _Mapping]] = ..., problem: _Optional[_Union[AttentionProblem, _Mapping]] = ..., options: _Optional[_Union[SolveOptions, _Mapping]] = ...) -> None: ...

class ResourceUse(_message.Message):
    __slots__ = ("name", "used", "capacity", "unit")
    NAME_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    name: str
    used: int
    capacity: int
    unit: str
    def __init__(self, name: _Optional[str] = ..., used: _Optional[int] = ..., capacity: _Optional[int] = ..., unit: _Optional[str] = ...) -> None: ...

class Candidate(_message.Message):
    __slots__ = ("rank", "block_m", "block_n", "num_warps", "num_stages", "threads_per_block", "smem_bytes", "regs_per_thread", "regs_demand", "spill_regs", "blocks_per_sm", "occupancy_limiter", "occupancy", "predicted_time_us", "predicted_tflops", "compute_us", "load_us", "overlap", "arithmetic_intensity", "hbm_bytes", "waves", "tail_efficiency", "padding_waste", "mma_utilization", "bottleneck", "reasons", "parameters", "resources", "figures", "num_splits", "pack_gqa", "page_size")
    class ParametersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class FiguresEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    RANK_FIELD_NUMBER: _ClassVar[int]
    BLOCK_M_FIELD_NUMBER: _ClassVar[int]
    BLOCK_N_FIELD_NUMBER: _ClassVar[int]
    NUM_WARPS_FIELD_NUMBER: _ClassVar[int]
    NUM_STAGES_FIELD_NUMBER: _ClassVar[int]
    THREADS_PER_BLOCK_FIELD_NUMBER: _ClassVar[int]
    SMEM_BYTES_FIELD_NUMBER: _ClassVar[int]
    REGS_PER_THREAD_FIELD_NUMBER: _ClassVar[int]
    REGS_DEMAND_FIELD_NUMBER: _ClassVar[int]
    SPILL_REGS_FIELD_NUMBER: _ClassVar[int]
    BLOCKS_PER_SM_FIELD_NUMBER: _ClassVar[int]
    OCCUPANCY_LIMITER_FIELD_NUMBER: _ClassVar[int]
    OCCUPANCY_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_TIME_US_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_US_FIELD_NUMBER: _ClassVar[int]
    LOAD_US_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    ARITHMETIC_INTENSITY_FIELD_NUMBER: _ClassVar[int]
    HBM_BYTES_FIELD_NUMBER: _ClassVar[int]
    WAVES_FIELD_NUMBER: _ClassVar[int]
    TAIL_EFFICIENCY_FIELD_NUMBER: _ClassVar[int]
    PADDING_WASTE_FIELD_NUMBER: _ClassVar[int]
    MMA_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    BOTTLENECK_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    FIGURES_FIELD_NUMBER: _ClassVar[int]
    NUM_SPLITS_FIELD_NUMBER: _ClassVar[int]
    PACK_GQA_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    rank: int
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    threads_per_block: int
    smem_bytes: int
    regs_per_thread: int
    regs_demand: int
    spill_regs: int
    blocks_per_sm: int
    occupancy_limiter: str
    occupancy: float
    predicted_time_us: float
    predicted_tflops: float
    compute_us: float
    load_us: float
    overlap: float
    arithmetic_intensity: float
    hbm_bytes: float
    waves: float
    tail_efficiency: float
    padding_waste: float
    mma_utilization: float
    bottleneck: str
    reasons: _containers.RepeatedScalarFieldContainer[str]
    parameters: _containers.ScalarMap[str, int]
    resources: _containers.RepeatedCompositeFieldContainer[ResourceUse]
    figures: _containers.ScalarMap[str, float]
    num_splits: int
    pack_gqa: bool
    page_size: int
    def __init__(self, rank: _Optional[int] = ..., block_m: _Optional[int] = ..., block_n: _Optional[int] = ..., num_warps: _Optional[int] = ..., num_stages: _Optional[int] = ..., threads_per_block: _Optional[int] = ..., smem_bytes: _Optional[int] = ..., regs_per_thread: _Optional[int] = ..., regs_demand: _Optional[int] = ..., spill_regs: _Optional[int] = ..., blocks_per_sm: _Optional[int] = ..., occupancy_limiter: _Optional[str] = ..., occupancy: _Optional[float] = ..., predicted_time_us: _Optional[float] = ..., predicted_tflops: _Optional[float] = ..., compute_us: _Optional[float] = ..., load_us: _Optional[float] = ..., overlap: _Optional[float] = ..., arithmetic_intensity: _Optional[float] = ..., hbm_bytes: _Optional[float] = ..., waves: _Optional[float] = ..., tail_efficiency: _Optional[float] = ..., padding_waste: _Optional[float] = ..., mma_utilization: _Optional[float] = ..., bottleneck: _Optional[str] = ..., reasons: _Optional[_Iterable[str]] = ..., parameters: _Optional[_Mapping[str, int]] = ..., resources: _Optional[_Iterable[_Union[ResourceUse, _Mapping]]] = ..., figures: _Optional[_Mapping[str, float]] = ..., num_splits: _Optional[int] = ..., pack_gqa: _Optional[bool] = ..., page_size: _Optional[int] = ...) -> None: ...

class FunnelStep(_message.Message):
    __slots__ = ("constraint", "rule", "removed", "remaining")
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    constraint: str
    rule: str
    removed: int
    remaining: int
    def __init__(self, constraint: _Optional[str] = ..., rule: _Optional[str] = ..., removed: _Optional[int] = ..., remaining: _Optional[int] = ...) -> None: ...

class BindingConstraint(_message.Message):
    __slots__ = ("constraint", "detail")
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    constraint: str
    detail: str
    def __init__(self, constraint: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class Relaxation(_message.Message):
    __slots__ = ("constraint", "target_kind", "target", "suggested_value")
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    TARGET_KIND_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    SUGGESTED_VALUE_FIELD_NUMBER: _ClassVar[int]
    constraint: str
    target_kind: str
    target: str
    suggested_value: int
    def __init__(self, constraint: _Optional[str] = ..., target_kind: _Optional[str] = ..., target: _Optional[str] = ..., suggested_value: _Optional[int] = ...) -> None: ...

class PaddingOption(_message.Message):
    __slots__ = ("block", "padded_seq_len", "waste_fraction")
    BLOCK_FIELD_NUMBER: _ClassVar[int]
    PADDED_SEQ_LEN_FIELD_NUMBER: _ClassVar[int]
    WASTE_FRACTION_FIELD_NUMBER: _ClassVar[int]
    block: int
    padded_seq_len: int
    waste_fraction: float
    def __init__(self, block: _Optional[int] = ..., padded_seq_len: _Optional[int] = ..., waste_fraction: _Optional[float] = ...) -> None: ...

class Infeasibility(_message.Message):
    __slots__ = ("conflicting_constraints", "explanation", "nearest_relaxation", "relaxation", "padding", "divisible_lengths")
    CONFLICTING_CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    NEAREST_RELAXATION_FIELD_NUMBER: _ClassVar[int]
    RELAXATION_FIELD_NUMBER: _ClassVar[int]
    PADDING_FIELD_NUMBER: _ClassVar[int]
    DIVISIBLE_LENGTHS_FIELD_NUMBER: _ClassVar[int]
    conflicting_constraints: _containers.RepeatedScalarFieldContainer[str]
    explanation: str
    nearest_relaxation: str
    relaxation: Relaxation
    padding: _containers.RepeatedCompositeFieldContainer[PaddingOption]
    divisible_lengths: _containers.RepeatedCompositeFieldContainer[DivisibleLength]
    def __init__(self, conflicting_constraints: _Optional[_Iterable[str]] = ..., explanation: _Optional[str] = ..., nearest_relaxation: _Optional[str] = ..., relaxation: _Optional[_Union[Relaxation, _Mapping]] = ..., padding: _Optional[_Iterable[_Union[PaddingOption, _Mapping]]] = ..., divisible_lengths: _Optional[_Iterable[_Union[DivisibleLength, _Mapping]]] = ...) -> None: ...

class DivisibleLength(_message.Message):
    __slots__ = ("seq_len", "seq_len_kv", "block_m", "block_n", "configuration")
    SEQ_LEN_FIELD_NUMBER: _ClassVar[int]
    SEQ_LEN_KV_FIELD_NUMBER: _ClassVar[int]
    BLOCK_M_FIELD_NUMBER: _ClassVar[int]
    BLOCK_N_FIELD_NUMBER: _ClassVar[int]
    CONFIGURATION_FIELD_NUMBER: _ClassVar[int]
    seq_len: int
    seq_len_kv: int
    block_m: int
    block_n: int
    configuration: str
    def __init__(self, seq_len: _Optional[int] = ..., seq_len_kv: _Optional[int] = ..., block_m: _Optional[int] = ..., block_n: _Optional[int] = ..., configuration: _Optional[str] = ...) -> None: ...

class SolveResponse(_message.Message):
    __slots__ = ("status", "proven_optimal", "hardware", "kernel_enum", "engine", "candidates", "funnel", "binding_constraints", "infeasibility", "search_space_size", "feasible_count", "solve_ms", "model_version", "catalog_version", "problem", "options", "cache_hit", "kernel", "notes", "kernel_reason")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PROVEN_OPTIMAL_FIELD_NUMBER: _ClassVar[int]
    HARDWARE_FIELD_NUMBER: _ClassVar[int]
    KERNEL_ENUM_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    FUNNEL_FIELD_NUMBER: _ClassVar[int]
    BINDING_CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    INFEASIBILITY_FIELD_NUMBER: _ClassVar[int]
    SEARCH_SPACE_SIZE_FIELD_NUMBER: _ClassVar[int]
    FEASIBLE_COUNT_FIELD_NUMBER: _ClassVar[int]
    SOLVE_MS_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    CATALOG_VERSION_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    CACHE_HIT_FIELD_NUMBER: _ClassVar[int]
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    KERNEL_REASON_FIELD_NUMBER: _ClassVar[int]
    status: SolveStatus
    proven_optimal: bool
    hardware: str
    kernel_enum: KernelFamily
    engine: Engine
    candidates: _containers.RepeatedCompositeFieldContainer[Candidate]
    funnel: _containers.RepeatedCompositeFieldContainer[FunnelStep]
    binding_constraints: _containers.RepeatedCompositeFieldContainer[BindingConstraint]
    infeasibility: Infeasibility
    search_space_size: int
    feasible_count: int
    solve_ms: float
    model_version: str
    catalog_version: str
    problem: AttentionProblem
    options: SolveOptions
    cache_hit: bool
    kernel: str
    notes: _containers.RepeatedScalarFieldContainer[str]
    kernel_reason: str
    def __init__(self, status: _Optional[_Union[SolveStatus, str]] = ..., proven_optimal: _Optional[bool] = ..., hardware: _Optional[str] = ..., kernel_enum: _Optional[_Union[KernelFamily, str]] = ..., engine: _Optional[_Union[Engine, str]] = ..., candidates: _Optional[_Iterable[_Union[Candidate, _Mapping]]] = ..., funnel: _Optional[_Iterable[_Union[FunnelStep, _Mapping]]] = ..., binding_constraints: _Optional[_Iterable[_Union[BindingConstraint, _Mapping]]] = ..., infeasibility: _Optional[_Union[Infeasibility, _Mapping]] = ..., search_space_size: _Optional[int] = ..., feasible_count: _Optional[int] = ..., solve_ms: _Optional[float] = ..., model_version: _Optional[str] = ..., catalog_version: _Optional[str] = ..., problem: _Optional[_Union[AttentionProblem, _Mapping]] = ..., options: _Optional[_Union[SolveOptions, _Mapping]] = ..., cache_hit: _Optional[bool] = ..., kernel: _Optional[str] = ..., notes: _Optional[_Iterable[str]] = ..., kernel_reason: _Optional[str] = ...) -> None: ...

class SolveBatchRequest(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[SolveRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[SolveRequest, _Mapping]]] = ...) -> None: ...

class FieldViolation(_message.Message):
    __slots__ = ("field", "description")
    FIELD_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    field: str
    description: str
    def __init__(self, field: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class SolveBatchItem(_message.Message):
    __slots__ = ("code", "message", "field_violations", "response")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FIELD_VIOLATIONS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    field_violations: _containers.RepeatedCompositeFieldContainer[FieldViolation]
    response: SolveResponse
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., field_violations: _Optional[_Iterable[_Union[FieldViolation, _Mapping]]] = ..., response: _Optional[_Union[SolveResponse, _Mapping]] = ...) -> None: ...

class SolveBatchResponse(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[SolveBatchItem]
    def __init__(self, items: _Optional[_Iterable[_Union[SolveBatchItem, _Mapping]]] = ...) -> None: ...

class ListHardwareRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HardwareSummary(_message.Message):
    __slots__ = ("name", "display_name", "vendor", "arch", "compute_capability", "compute_units", "default_kernel", "aliases")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    VENDOR_FIELD_NUMBER: _ClassVar[int]
    ARCH_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_UNITS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_KERNEL_FIELD_NUMBER: _ClassVar[int]
    ALIASES_FIELD_NUMBER: _ClassVar[int]
    name: str
    display_name: str
    vendor: str
    arch: str
    compute_capability: str
    compute_units: int
    default_kernel: str
    aliases: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., display_name: _Optional[str] = ..., vendor: _Optional[str] = ..., arch: _Optional[str] = ..., compute_capability: _Optional[str] = ..., compute_units: _Optional[int] = ..., default_kernel: _Optional[str] = ..., aliases: _Optional[_Iterable[str]] = ...) -> None: ...

class ListHardwareResponse(_message.Message):
    __slots__ = ("hardware", "catalog_version", "model_version", "max_batch_size")
    HARDWARE_FIELD_NUMBER: _ClassVar[int]
    CATALOG_VERSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    hardware: _containers.RepeatedCompositeFieldContainer[HardwareSummary]
    catalog_version: str
    model_version: str
    max_batch_size: int
    def __init__(self, hardware: _Optional[_Iterable[_Union[HardwareSummary, _Mapping]]] = ..., catalog_version: _Optional[str] = ..., model_version: _Optional[str] = ..., max_batch_size: _Optional[int] = ...) -> None: ...

class GetHardwareRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetHardwareResponse(_message.Message):
    __slots__ = ("hardware", "catalog_version")
    HARDWARE_FIELD_NUMBER: _ClassVar[int]
    CATALOG_VERSION_FIELD_NUMBER: _ClassVar[int]
    hardware: HardwareSpec
    catalog_version: str
    def __init__(self, hardware: _Optional[_Union[HardwareSpec, _Mapping]] = ..., catalog_version: _Optional[str] = ...) -> None: ...

class EstimateMemoryRequest(_message.Message):
    __slots__ = ("problem", "block_m", "block_n", "hardware", "kernel_enum", "kernel", "parameters")
    class ParametersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    BLOCK_M_FIELD_NUMBER: _ClassVar[int]
    BLOCK_N_FIELD_NUMBER: _ClassVar[int]
    HARDWARE_FIELD_NUMBER: _ClassVar[int]
    KERNEL_ENUM_FIELD_NUMBER: _ClassVar[int]
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    problem: AttentionProblem
    block_m: int
    block_n: int
    hardware: HardwareRef
    kernel_enum: KernelFamily
    kernel: str
    parameters: _containers.ScalarMap[str, int]
    def __init__(self, problem: _Optional[_Union[AttentionProblem, _Mapping]] = ..., block_m: _Optional[int] = ..., block_n: _Optional[int] = ..., hardware: _Optional[_Union[HardwareRef, _Mapping]] = ..., kernel_enum: _Optional[_Union[KernelFamily, str]] = ..., kernel: _Optional[str] = ..., parameters: _Optional[_Mapping[str, int]] = ...) -> None: ...

class Roofline(_message.Message):
    __slots__ = ("hardware", "peak_tflops", "peak_kind", "dram_bandwidth_gb_per_s", "ridge_point_flops_per_byte", "attainable_tflops", "attainable_tflops_tiled_no_l2", "attainable_tflops_naive", "bound")
    HARDWARE_FIELD_NUMBER: _ClassVar[int]
    PEAK_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    PEAK_KIND_FIELD_NUMBER: _ClassVar[int]
    DRAM_BANDWIDTH_GB_PER_S_FIELD_NUMBER: _ClassVar[int]
    RIDGE_POINT_FLOPS_PER_BYTE_FIELD_NUMBER: _ClassVar[int]
    ATTAINABLE_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    ATTAINABLE_TFLOPS_TILED_NO_L2_FIELD_NUMBER: _ClassVar[int]
    ATTAINABLE_TFLOPS_NAIVE_FIELD_NUMBER: _ClassVar[int]
    BOUND_FIELD_NUMBER: _ClassVar[int]
    hardware: str
    peak_tflops: float
    peak_kind: str
    dram_bandwidth_gb_per_s: float
    ridge_point_flops_per_byte: float
    attainable_tflops: float
    attainable_tflops_tiled_no_l2: float
    attainable_tflops_naive: float
    bound: str
    def __init__(self, hardware: _Optional[str] = ..., peak_tflops: _Optional[float] = ..., peak_kind: _Optional[str] = ..., dram_bandwidth_gb_per_s: _Optional[float] = ..., ridge_point_flops_per_byte: _Optional[float] = ..., attainable_tflops: _Optional[float] = ..., attainable_tflops_tiled_no_l2: _Optional[float] = ..., attainable_tflops_naive: _Optional[float] = ..., bound: _Optional[str] = ...) -> None: ...

class EstimateMemoryResponse(_message.Message):
    __slots__ = ("score_matrix_bytes", "tiles_1d", "tiles_1d_kv", "score_tiles", "score_tile_bytes", "working_set_bytes", "family_smem_bytes", "family_smem_note", "materialization_ratio", "hbm_bytes_naive", "hbm_bytes_tiled", "hbm_bytes_tiled_l2", "flops", "arithmetic_intensity", "arithmetic_intensity_naive", "arithmetic_intensity_tiled_no_l2", "roofline", "problem", "block_m", "block_n", "kernel_enum", "kernel", "dtype_bytes", "family_resources", "family_parameters", "saved_lse_bytes", "dq_atomic_bytes")
    class FamilyParametersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    SCORE_MATRIX_BYTES_FIELD_NUMBER: _ClassVar[int]
    TILES_1D_FIELD_NUMBER: _ClassVar[int]
    TILES_1D_KV_FIELD_NUMBER: _ClassVar[int]
    SCORE_TILES_FIELD_NUMBER: _ClassVar[int]
    SCORE_TILE_BYTES_FIELD_NUMBER: _ClassVar[int]
    WORKING_SET_BYTES_FIELD_NUMBER: _ClassVar[int]
    FAMILY_SMEM_BYTES_FIELD_NUMBER: _ClassVar[int]
    FAMILY_SMEM_NOTE_FIELD_NUMBER: _ClassVar[int]
    MATERIALIZATION_RATIO_FIELD_NUMBER: _ClassVar[int]
    HBM_BYTES_NAIVE_FIELD_NUMBER: _ClassVar[int]
    HBM_BYTES_TILED_FIELD_NUMBER: _ClassVar[int]
    HBM_BYTES_TILED_L2_FIELD_NUMBER: _ClassVar[int]
    FLOPS_FIELD_NUMBER: _ClassVar[int]
    ARITHMETIC_INTENSITY_FIELD_NUMBER: _ClassVar[int]
    ARITHMETIC_INTENSITY_NAIVE_FIELD_NUMBER: _ClassVar[int]
    ARITHMETIC_INTENSITY_TILED_NO_L2_FIELD_NUMBER: _ClassVar[int]
    ROOFLINE_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    BLOCK_M_FIELD_NUMBER: _ClassVar[int]
    BLOCK_N_FIELD_NUMBER: _ClassVar[int]
    KERNEL_ENUM_FIELD_NUMBER: _ClassVar[int]
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    DTYPE_BYTES_FIELD_NUMBER: _ClassVar[int]
    FAMILY_RESOURCES_FIELD_NUMBER: _ClassVar[int]
    FAMILY_PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    SAVED_LSE_BYTES_FIELD_NUMBER: _ClassVar[int]
    DQ_ATOMIC_BYTES_FIELD_NUMBER: _ClassVar[int]
    score_matrix_bytes: float
    tiles_1d: int
    tiles_1d_kv: int
    score_tiles: int
    score_tile_bytes: int
    working_set_bytes: int
    family_smem_bytes: int
    family_smem_note: str
    materialization_ratio: float
    hbm_bytes_naive: int
    hbm_bytes_tiled: int
    hbm_bytes_tiled_l2: int
    flops: float
    arithmetic_intensity: float
    arithmetic_intensity_naive: float
    arithmetic_intensity_tiled_no_l2: float
    roofline: Roofline
    problem: AttentionProblem
    block_m: int
    block_n: int
    kernel_enum: KernelFamily
    kernel: str
    dtype_bytes: int
    family_resources: _containers.RepeatedCompositeFieldContainer[ResourceUse]
    family_parameters: _containers.ScalarMap[str, int]
    saved_lse_bytes: int
    dq_atomic_bytes: int
    def __init__(self, score_matrix_bytes: _Optional[float] = ..., tiles_1d: _Optional[int] = ..., tiles_1d_kv: _Optional[int] = ..., score_tiles: _Optional[int] = ..., score_tile_bytes: _Optional[int] = ..., working_set_bytes: _Optional[int] = ..., family_smem_bytes: _Optional[int] = ..., family_smem_note: _Optional[str] = ..., materialization_ratio: _Optional[float] = ..., hbm_bytes_naive: _Optional[int] = ..., hbm_bytes_tiled: _Optional[int] = ..., hbm_bytes_tiled_l2: _Optional[int] = ..., flops: _Optional[float] = ..., arithmetic_intensity: _Optional[float] = ..., arithmetic_intensity_naive: _Optional[float] = ..., arithmetic_intensity_tiled_no_l2: _Optional[float] = ..., roofline: _Optional[_Union[Roofline, _Mapping]] = ..., problem: _Optional[_Union[AttentionProblem, _Mapping]] = ..., block_m: _Optional[int] = ..., block_n: _Optional[int] = ..., kernel_enum: _Optional[_Union[KernelFamily, str]] = ..., kernel: _Optional[str] = ..., dtype_bytes: _Optional[int] = ..., family_resources: _Optional[_Iterable[_Union[ResourceUse, _Mapping]]] = ..., family_parameters: _Optional[_Mapping[str, int]] = ..., saved_lse_bytes: _Optional[int] = ..., dq_atomic_bytes: _Optional[int] = ...) -> None: ...

class OccupancyRequest(_message.Message):
    __slots__ = ("hardware", "threads", "regs", "smem_bytes", "carveout_percent", "agprs", "sgprs", "waves_per_eu")
    HARDWARE_FIELD_NUMBER: _ClassVar[int]
    THREADS_FIELD_NUMBER: _ClassVar[int]
    REGS_FIELD_NUMBER: _ClassVar[int]
    SMEM_BYTES_FIELD_NUMBER: _ClassVar[int]
    CARVEOUT_PERCENT_FIELD_NUMBER: _ClassVar[int]
    AGPRS_FIELD_NUMBER: _ClassVar[int]
    SGPRS_FIELD_NUMBER: _ClassVar[int]
    WAVES_PER_EU_FIELD_NUMBER: _ClassVar[int]
    hardware: HardwareRef
    threads: int
    regs: int
    smem_bytes: int
    carveout_percent: int
    agprs: int
    sgprs: int
    waves_per_eu: int
    def __init__(self, hardware: _Optional[_Union[HardwareRef, _Mapping]] = ..., threads: _Optional[int] = ..., regs: _Optional[int] = ..., smem_bytes: _Optional[int] = ..., carveout_percent: _Optional[int] = ..., agprs: _Optional[int] = ..., sgprs: _Optional[int] = ..., waves_per_eu: _Optional[int] = ...) -> None: ...

class RocmOccupancy(_message.Message):
    __slots__ = ("waves_per_workgroup", "waves_per_cu", "max_waves_per_cu", "waves_per_simd", "allocated_vgprs", "spilled_vgprs", "vgpr_cap", "allocated_lds_bytes", "vgpr_waves_per_simd", "sgpr_waves_per_simd", "limit_lds", "limit_waves")
    WAVES_PER_WORKGROUP_FIELD_NUMBER: _ClassVar[int]
    WAVES_PER_CU_FIELD_NUMBER: _ClassVar[int]
    MAX_WAVES_PER_CU_FIELD_NUMBER: _ClassVar[int]
    WAVES_PER_SIMD_FIELD_NUMBER: _ClassVar[int]
    ALLOCATED_VGPRS_FIELD_NUMBER: _ClassVar[int]
    SPILLED_VGPRS_FIELD_NUMBER: _ClassVar[int]
    VGPR_CAP_FIELD_NUMBER: _ClassVar[int]
    ALLOCATED_LDS_BYTES_FIELD_NUMBER: _ClassVar[int]
    VGPR_WAVES_PER_SIMD_FIELD_NUMBER: _ClassVar[int]
    SGPR_WAVES_PER_SIMD_FIELD_NUMBER: _ClassVar[int]
    LIMIT_LDS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_WAVES_FIELD_NUMBER: _ClassVar[int]
    waves_per_workgroup: int
    waves_per_cu: int
    max_waves_per_cu: int
    waves_per_simd: float
    allocated_vgprs: int
    spilled_vgprs: int
    vgpr_cap: int
    allocated_lds_bytes: int
    vgpr_waves_per_simd: int
    sgpr_waves_per_simd: int
    limit_lds: int
    limit_waves: int
    def __init__(self, waves_per_workgroup: _Optional[int] = ..., waves_per_cu: _Optional[int] = ..., max_waves_per_cu: _Optional[int] = ..., waves_per_simd: _Optional[float] = ..., allocated_vgprs: _Optional[int] = ..., spilled_vgprs: _Optional[int] = ..., vgpr_cap: _Optional[int] = ..., allocated_lds_bytes: _Optional[int] = ..., vgpr_waves_per_simd: _Optional[int] = ..., sgpr_waves_per_simd: _Optional[int] = ..., limit_lds: _Optional[int] = ..., limit_waves: _Optional[int] = ...) -> None: ...

class OccupancyResponse(_message.Message):
    __slots__ = ("blocks_per_sm", "limiter", "limiters", "limit_warps", "limit_registers", "limit_shared_memory", "limit_blocks", "occupancy", "active_warps_per_sm", "warps_per_block", "max_warps_per_sm", "regs_per_block", "smem_per_block_bytes", "smem_per_sm_config_bytes", "rocm")
    BLOCKS_PER_SM_FIELD_NUMBER: _ClassVar[int]
    LIMITER_FIELD_NUMBER: _ClassVar[int]
    LIMITERS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_WARPS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_REGISTERS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_SHARED_MEMORY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    OCCUPANCY_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_WARPS_PER_SM_FIELD_NUMBER: _ClassVar[int]
    WARPS_PER_BLOCK_FIELD_NUMBER: _ClassVar[int]
    MAX_WARPS_PER_SM_FIELD_NUMBER: _ClassVar[int]
    REGS_PER_BLOCK_FIELD_NUMBER: _ClassVar[int]
    SMEM_PER_BLOCK_BYTES_FIELD_NUMBER: _ClassVar[int]
    SMEM_PER_SM_CONFIG_BYTES_FIELD_NUMBER: _ClassVar[int]
    ROCM_FIELD_NUMBER: _ClassVar[int]
    blocks_per_sm: int
    limiter: str
    limiters: _containers.RepeatedScalarFieldContainer[str]
    limit_warps: int
    limit_registers: int
    limit_shared_memory: int
    limit_blocks: int
    occupancy: float
    active_warps_per_sm: int
    warps_per_block: int
    max_warps_per_sm: int
    regs_per_block: int
    smem_per_block_bytes: int
    smem_per_sm_config_bytes: int
    rocm: RocmOccupancy
    def __init__(self, blocks_per_sm: _Optional[int] = ..., limiter: _Optional[str] = ..., limiters: _Optional[_Iterable[str]] = ..., limit_warps: _Optional[int] = ..., limit_registers: _Optional[int] = ..., limit_shared_memory: _Optional[int] = ..., limit_blocks: _Optional[int] = ..., occupancy: _Optional[float] = ..., active_warps_per_sm: _Optional[int] = ..., warps_per_block: _Optional[int] = ..., max_warps_per_sm: _Optional[int] = ..., regs_per_block: _Optional[int] = ..., smem_per_block_bytes: _Optional[int] = ..., smem_per_sm_config_bytes: _Optional[int] = ..., rocm: _Optional[_Union[RocmOccupancy, _Mapping]] = ...) -> None: ...

class WeightedProblem(_message.Message):
    __slots__ = ("problem", "weight")
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    problem: AttentionProblem
    weight: float
    def __init__(self, problem: _Optional[_Union[AttentionProblem, _Mapping]] = ..., weight: _Optional[float] = ...) -> None: ...

class Configuration(_message.Message):
    __slots__ = ("parameters",)
    class ParametersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    parameters: _containers.ScalarMap[str, int]
    def __init__(self, parameters: _Optional[_Mapping[str, int]] = ...) -> None: ...

class PortfolioRequest(_message.Message):
    __slots__ = ("hardware", "kernel", "problems", "max_configs", "max_slowdown", "max_resources", "pinned", "work_limit_s", "time_limit_s")
    class MaxResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    HARDWARE_FIELD_NUMBER: _ClassVar[int]
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    MAX_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    MAX_SLOWDOWN_FIELD_NUMBER: _ClassVar[int]
    MAX_RESOURCES_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    WORK_LIMIT_S_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_S_FIELD_NUMBER: _ClassVar[int]
    hardware: HardwareRef
    kernel: str
    problems: _containers.RepeatedCompositeFieldContainer[WeightedProblem]
    max_configs: int
    max_slowdown: float
    max_resources: _containers.ScalarMap[str, int]
    pinned: _containers.RepeatedCompositeFieldContainer[Configuration]
    work_limit_s: float
    time_limit_s: float
    def __init__(self, hardware: _Optional[_Union[HardwareRef, _Mapping]] = ..., kernel: _Optional[str] = ..., problems: _Optional[_Iterable[_Union[WeightedProblem, _Mapping]]] = ..., max_configs: _Optional[int] = ..., max_slowdown: _Optional[float] = ..., max_resources: _Optional[_Mapping[str, int]] = ..., pinned: _Optional[_Iterable[_Union[Configuration, _Mapping]]] = ..., work_limit_s: _Optional[float] = ..., time_limit_s: _Optional[float] = ...) -> None: ...

class PortfolioConfiguration(_message.Message):
    __slots__ = ("index", "label", "parameters", "block_m", "block_n", "num_warps", "num_stages", "pinned", "problems", "weight", "seq_len_min", "seq_len_max", "head_dims", "resources")
    class ParametersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class ResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    INDEX_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    BLOCK_M_FIELD_NUMBER: _ClassVar[int]
    BLOCK_N_FIELD_NUMBER: _ClassVar[int]
    NUM_WARPS_FIELD_NUMBER: _ClassVar[int]
    NUM_STAGES_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    SEQ_LEN_MIN_FIELD_NUMBER: _ClassVar[int]
    SEQ_LEN_MAX_FIELD_NUMBER: _ClassVar[int]
    HEAD_DIMS_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    index: int
    label: str
    parameters: _containers.ScalarMap[str, int]
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    pinned: bool
    problems: _containers.RepeatedScalarFieldContainer[int]
    weight: float
    seq_len_min: int
    seq_len_max: int
    head_dims: _containers.RepeatedScalarFieldContainer[int]
    resources: _containers.ScalarMap[str, int]
    def __init__(self, index: _Optional[int] = ..., label: _Optional[str] = ..., parameters: _Optional[_Mapping[str, int]] = ..., block_m: _Optional[int] = ..., block_n: _Optional[int] = ..., num_warps: _Optional[int] = ..., num_stages: _Optional[int] = ..., pinned: _Optional[bool] = ..., problems: _Optional[_Iterable[int]] = ..., weight: _Optional[float] = ..., seq_len_min: _Optional[int] = ..., seq_len_max: _Optional[int] = ..., head_dims: _Optional[_Iterable[int]] = ..., resources: _Optional[_Mapping[str, int]] = ...) -> None: ...

class PortfolioAssignment(_message.Message):
    __slots__ = ("problem", "config", "weight", "seq_len", "time_us", "optimal_time_us", "optimal_label", "loss")
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    SEQ_LEN_FIELD_NUMBER: _ClassVar[int]
    TIME_US_FIELD_NUMBER: _ClassVar[int]
    OPTIMAL_TIME_US_FIELD_NUMBER: _ClassVar[int]
    OPTIMAL_LABEL_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    problem: int
    config: int
    weight: float
    seq_len: int
    time_us: float
    optimal_time_us: float
    optimal_label: str
    loss: float
    def __init__(self, problem: _Optional[int] = ..., config: _Optional[int] = ..., weight: _Optional[float] = ..., seq_len: _Optional[int] = ..., time_us: _Optional[float] = ..., optimal_time_us: _Optional[float] = ..., optimal_label: _Optional[str] = ..., loss: _Optional[float] = ...) -> None: ...

class PortfolioResponse(_message.Message):
    __slots__ = ("status", "proven_optimal", "gap", "stopped_by", "hardware", "kernel", "max_configs", "configurations", "assignments", "weighted_time_us", "optimal_weighted_time_us", "loss", "worst_loss", "worst_problem", "smallest_feasible_max_configs", "unserved_problems", "explanation", "candidate_configs", "assignment_variables", "objective_unit_ns", "solve_ms", "model_version", "catalog_version")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PROVEN_OPTIMAL_FIELD_NUMBER: _ClassVar[int]
    GAP_FIELD_NUMBER: _ClassVar[int]
    STOPPED_BY_FIELD_NUMBER: _ClassVar[int]
    HARDWARE_FIELD_NUMBER: _ClassVar[int]
    KERNEL_FIELD_NUMBER: _ClassVar[int]
    MAX_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    CONFIGURATIONS_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    WEIGHTED_TIME_US_FIELD_NUMBER: _ClassVar[int]
    OPTIMAL_WEIGHTED_TIME_US_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    WORST_LOSS_FIELD_NUMBER: _ClassVar[int]
    WORST_PROBLEM_FIELD_NUMBER: _ClassVar[int]
    SMALLEST_FEASIBLE_MAX_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    UNSERVED_PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_VARIABLES_FIELD_NUMBER: _ClassVar[int]
    OBJECTIVE_UNIT_NS_FIELD_NUMBER: _ClassVar[int]
    SOLVE_MS_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    CATALOG_VERSION_FIELD_NUMBER: _ClassVar[int]
    status: SolveStatus
    proven_optimal: bool
    gap: float
    stopped_by: str
    hardware: str
    kernel: str
    max_configs: int
    configurations: _containers.RepeatedCompositeFieldContainer[PortfolioConfiguration]
    assignments: _containers.RepeatedCompositeFieldContainer[PortfolioAssignment]
    weighted_time_us: float
    optimal_weighted_time_us: float
    loss: float
    worst_loss: float
    worst_problem: int
    smallest_feasible_max_configs: int
    unserved_problems: _containers.RepeatedScalarFieldContainer[int]
    explanation: str
    candidate_configs: int
    assignment_variables: int
    objective_unit_ns: int
    solve_ms: float
    model_version: str
    catalog_version: str
    def __init__(self, status: _Optional[_Union[SolveStatus, str]] = ..., proven_optimal: _Optional[bool] = ..., gap: _Optional[float] = ..., stopped_by: _Optional[str] = ..., hardware: _Optional[str] = ..., kernel: _Optional[str] = ..., max_configs: _Optional[int] = ..., configurations: _Optional[_Iterable[_Union[PortfolioConfiguration, _Mapping]]] = ..., assignments: _Optional[_Iterable[_Union[PortfolioAssignment, _Mapping]]] = ..., weighted_time_us: _Optional[float] = ..., optimal_weighted_time_us: _Optional[float] = ..., loss: _Optional[float] = ..., worst_loss: _Optional[float] = ..., worst_problem: _Optional[int] = ..., smallest_feasible_max_configs: _Optional[int] = ..., unserved_problems: _Optional[_Iterable[int]] = ..., explanation: _Optional[str] = ..., candidate_configs: _Optional[int] = ..., assignment_variables: _Optional[int] = ..., objective_unit_ns: _Optional[int] = ..., solve_ms: _Optional[float] = ..., model_version: _Optional[str] = ..., catalog_version: _Optional[str] = ...) -> None: ...
