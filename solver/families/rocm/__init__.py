"""What every attention kernel on an AMD Instinct (rocm) device shares, for the families that
model one (`ck`, Composable Kernel's tile FMHA; `triton_rocm`, Triton's AMD backend). A shared
piece: it imports the core only and registers no family. docs/model.md 19.5 and 19.10.

- `device`: the device as a rocm device, and its rates per CU and cycle (MFMA by dtype, the
  VALU, the transcendental unit); the sustained MFMA share, the launch cost; the answer's
  confidence note.
- `schedule`: one CU's round over its resident workgroups (MFMA, VALU and LDS overlapped by the
  waves of a SIMD, barriers and the loop's chain exposed), the workgroups' waves over the CUs
  (causal work spread as it comes), K/V reuse per XCD with the Infinity Cache across XCDs and
  the HBM floor, and the bottleneck in words.
"""
