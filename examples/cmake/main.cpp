// pick_tile HARDWARE HEAD_DIM DTYPE CAUSAL(0|1) PHASE SEQ_LEN
// Prints the tile tilesolve chose for the shape's bucket, from the header generated at build
// time: "block_m block_n num_warps num_stages solved_at", or "none" (exit 1) outside the grid.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "tiles.h"

namespace tiles = example::tiles;

// The table is usable at compile time too.
static_assert(tiles::kEntryCount > 0, "the generated table is empty");
static_assert(tiles::lookup("a100-80gb", 128, "fp16", false, "forward", 0) == nullptr,
              "seq_len 0 is outside every bucket");
// Any catalog alias, in any case, finds the canonical name's entries (kAliases).
static_assert(tiles::lookup("H100", 128, "bf16", false, "forward", 513) != nullptr &&
                  tiles::lookup("H100", 128, "bf16", false, "forward", 513) ==
                      tiles::lookup("h100-sxm", 128, "bf16", false, "forward", 513),
              "an alias finds the canonical entries");

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s HARDWARE HEAD_DIM DTYPE CAUSAL(0|1) PHASE SEQ_LEN\n", argv[0]);
    return 2;
  }
  const std::string_view hardware = argv[1];
  const int head_dim = std::atoi(argv[2]);
  const std::string_view dtype = argv[3];
  const bool causal = std::atoi(argv[4]) != 0;
  const std::string_view phase = argv[5];
  const long long seq_len = std::atoll(argv[6]);
  const tiles::Entry* e = tiles::lookup(hardware, head_dim, dtype, causal, phase, seq_len);
  if (e == nullptr || !e->feasible) {
    std::printf("none\n");
    return 1;
  }
  std::printf("%d %d %d %d %lld\n", e->block_m, e->block_n, e->num_warps, e->num_stages,
              static_cast<long long>(e->solved_at));
  return 0;
}
