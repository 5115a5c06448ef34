# TileSolve.cmake: generate a FlashAttention tile dispatch table (a C++17 header) at build time.
#
#   list(APPEND CMAKE_MODULE_PATH /path/to/tilesolve/cmake)
#   include(TileSolve)
#   tilesolve_dispatch_table(
#     OUTPUT  ${CMAKE_CURRENT_BINARY_DIR}/generated/tiles.h   # the header to write
#     GRID    grid.toml                                       # devices, head dims, buckets, ...
#     [SERVER host:port]          # ask a running tilesolve-server; default: solve in-process
#     [HARDWARE a100 h100 ...]    # replaces the grid's device list
#     [NAMESPACE my::tiles]       # C++ namespace (default tilesolve_table)
#     [MAX_CONFIGS K]             # at most K configurations per device (a portfolio)
#     [TARGET name])              # the custom target to depend on (default tilesolve_tiles)
#   add_dependencies(my_program tilesolve_tiles)
#   target_include_directories(my_program PRIVATE ${tilesolve_tiles_INCLUDE_DIR})
#
# The header is regenerated only when what decides it changes: the grid file, the model
# version, the catalog version (the server's, with SERVER) or these settings. A small step
# runs on every build (`tilesolve-cli table --stamp`), asks for the versions and rewrites its
# stamp file only when one of them changed; the header depends on the stamp and the grid.
# The program is found as TILESOLVE_CLI (a cache variable; default: tilesolve-cli on PATH).
include_guard(GLOBAL)

set(TILESOLVE_CLI "" CACHE FILEPATH "the tilesolve-cli program (default: found on PATH)")

function(tilesolve_dispatch_table)
  cmake_parse_arguments(TS "" "OUTPUT;GRID;SERVER;NAMESPACE;MAX_CONFIGS;TARGET" "HARDWARE"
                        ${ARGN})
  if(TS_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tilesolve_dispatch_table: unknown arguments: ${TS_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TS_OUTPUT OR NOT TS_GRID)
    message(FATAL_ERROR "tilesolve_dispatch_table: OUTPUT and GRID are required")
  endif()
  if(NOT TS_TARGET)
    set(TS_TARGET tilesolve_tiles)
  endif()
  if(NOT TILESOLVE_CLI)
    find_program(TILESOLVE_CLI_FOUND tilesolve-cli)
    if(NOT TILESOLVE_CLI_FOUND)
      message(FATAL_ERROR "tilesolve_dispatch_table: tilesolve-cli not found; "
                          "pip install tilesolve, or set -DTILESOLVE_CLI=/path/to/tilesolve-cli")
    endif()
    set(cli "${TILESOLVE_CLI_FOUND}")
  else()
    set(cli "${TILESOLVE_CLI}")
  endif()

  get_filename_component(out "${TS_OUTPUT}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  get_filename_component(grid "${TS_GRID}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  get_filename_component(out_dir "${out}" DIRECTORY)
  set(stamp "${out}.tilesolve-stamp")

  # --mkdir: OUTPUT may name a folder of the build tree that nothing has created yet.
  set(args table --grid "${grid}" --format cpp --mkdir)
  if(TS_HARDWARE)
    list(JOIN TS_HARDWARE "," hardware)
    list(APPEND args --hardware "${hardware}")
  endif()
  if(TS_NAMESPACE)
    list(APPEND args --namespace "${TS_NAMESPACE}")
  endif()
  if(TS_MAX_CONFIGS)
    list(APPEND args --max-configs "${TS_MAX_CONFIGS}")
  endif()
  if(TS_SERVER)
    list(APPEND args --server "${TS_SERVER}")
  endif()

  # Every build: rewrite the stamp only if the versions, the grid or the settings changed.
  add_custom_target(${TS_TARGET}_stamp
    COMMAND "${cli}" ${args} --stamp "${stamp}"
    BYPRODUCTS "${stamp}"
    COMMENT "tilesolve: checking the model and catalog versions for ${TS_TARGET}"
    VERBATIM)
  # The header: only when the stamp or the grid is newer.
  add_custom_command(OUTPUT "${out}"
    COMMAND "${cli}" ${args} --output "${out}"
    COMMAND "${CMAKE_COMMAND}" -E touch "${out}"
    DEPENDS "${stamp}" "${grid}"
    COMMENT "tilesolve: generating ${out}"
    VERBATIM)
  add_custom_target(${TS_TARGET} DEPENDS "${out}")
  add_dependencies(${TS_TARGET} ${TS_TARGET}_stamp)
  set(${TS_TARGET}_INCLUDE_DIR "${out_dir}" PARENT_SCOPE)
endfunction()
