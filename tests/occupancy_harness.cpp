// Host-only harness around CUDA's own occupancy calculator (`cuda_occupancy.h`).
//
// Used by tests/test_occupancy.py to check tilesolve.solver.occupancy launch by launch.
// Needs no GPU and no CUDA runtime: the header is plain host C/C++.
//
//   g++ -std=c++17 -O1 -I<cuda>/include tests/occupancy_harness.cpp -o occupancy_harness
//
// stdin, one launch per line:  cc_major cc_minor threads regs dyn_smem_bytes carveout_percent
// stdout, one line per launch:
//   OK blocks limitingFactors blockLimitRegs blockLimitSharedMem blockLimitWarps
//      blockLimitBlocks blockLimitBarriers blockLimitVirtual
//      allocatedRegistersPerBlock allocatedSharedMemPerBlock
// or, if cudaOccMaxActiveBlocksPerMultiprocessor returns an error status:
//   ERR <status>
// (an unknown compute capability in the device table below prints `ERR -1`).
//
// Device properties are the per-compute-capability limits of reference/hardware.md Part 1
// (what cudaGetDeviceProperties reports on such a GPU). The kernel has opted in to the
// largest dynamic shared memory, as FlashAttention kernels do.

#include <cuda_occupancy.h>

#include <cstdio>

namespace {

struct CcRow {
    int major;
    int minor;
    int max_threads_per_sm;
    int smem_per_sm_kib;
    int smem_per_block_optin_kib;
    int reserved_smem_per_block_bytes;
};

// reference/hardware.md Part 1: thr/SM, smem/SM max, smem/block opt-in, reserved smem/block.
const CcRow kDevices[] = {
    {7, 0, 2048, 96, 96, 0},
    {7, 5, 1024, 64, 64, 0},
    {8, 0, 2048, 164, 163, 1024},
    {8, 6, 1536, 100, 99, 1024},
    {8, 7, 1536, 164, 163, 1024},
    {8, 9, 1536, 100, 99, 1024},
    {9, 0, 2048, 228, 227, 1024},
    {10, 0, 2048, 228, 227, 1024},
    {12, 0, 1536, 100, 99, 1024},
};

const CcRow* find_device(int major, int minor) {
    for (const CcRow& row : kDevices) {
        if (row.major == major && row.minor == minor) {
            return &row;
        }
    }
    return nullptr;
}

}  // namespace

int main() {
    int major = 0;
    int minor = 0;
    int threads = 0;
    int regs = 0;
    unsigned long long dyn_smem = 0;
    int carveout = 0;
    while (std::scanf("%d %d %d %d %llu %d", &major, &minor, &threads, &regs, &dyn_smem,
                      &carveout) == 6) {
        const CcRow* row = find_device(major, minor);
        if (row == nullptr) {
            std::printf("ERR -1\n");
            continue;
        }

        cudaOccDeviceProp prop;
        prop.computeMajor = major;
        prop.computeMinor = minor;
        prop.maxThreadsPerBlock = 1024;
        prop.maxThreadsPerMultiprocessor = row->max_threads_per_sm;
        prop.regsPerBlock = 65536;
        prop.regsPerMultiprocessor = 65536;
        prop.warpSize = 32;
        prop.sharedMemPerBlock = 48 * 1024;
        prop.sharedMemPerMultiprocessor = static_cast<size_t>(row->smem_per_sm_kib) * 1024;
        prop.numSms = 1;
        prop.sharedMemPerBlockOptin = static_cast<size_t>(row->smem_per_block_optin_kib) * 1024;
        prop.reservedSharedMemPerBlock = static_cast<size_t>(row->reserved_smem_per_block_bytes);

        cudaOccFuncAttributes attr;
        attr.maxThreadsPerBlock = 1024;
        attr.numRegs = regs;
        attr.sharedSizeBytes = 0;
        attr.partitionedGCConfig = PARTITIONED_GC_OFF;
        attr.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
        attr.maxDynamicSharedSizeBytes = prop.sharedMemPerBlockOptin;
        attr.numBlockBarriers = 1;
        attr.virtualResourceCount = 0;

        cudaOccDeviceState state;
        state.cacheConfig = CACHE_PREFER_NONE;
        state.carveoutConfig = carveout;

        cudaOccResult result = {};
        const cudaOccError status = cudaOccMaxActiveBlocksPerMultiprocessor(
            &result, &prop, &attr, &state, threads, static_cast<size_t>(dyn_smem));
        if (status != CUDA_OCC_SUCCESS) {
            std::printf("ERR %d\n", static_cast<int>(status));
            continue;
        }
        std::printf("OK %d %u %d %d %d %d %d %d %d %llu\n", result.activeBlocksPerMultiprocessor,
                    result.limitingFactors, result.blockLimitRegs, result.blockLimitSharedMem,
                    result.blockLimitWarps, result.blockLimitBlocks, result.blockLimitBarriers,
                    result.blockLimitVirtual, result.allocatedRegistersPerBlock,
                    static_cast<unsigned long long>(result.allocatedSharedMemPerBlock));
    }
    return 0;
}
