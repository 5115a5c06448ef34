"""Triton-compiled FlashAttention kernels on CUDA devices: what every such family shares (the
triton family's tutorial kernels, FlexAttention's templates). A shared piece on top of the two
others: it joins the CUDA forward and backward models (`families/cuda`) with the Triton
compiler's allocation rules (`families/triton_compiler`), and registers no family.

- `forward.TritonForwardFamily`: a FlashForwardFamily whose forward loop Triton compiles; a
  family states its loop (`kernel`), rules, head dims and tile parameters. The compile target,
  the lowering of `tl.dot` (mma.sync, wgmma, tcgen05; FMA below cc 8.0), the compiler's shared
  memory, registers and spills, and the pipelined round at the device's L2 bandwidth.
- `backward`: the two-loop backward kernel's shared parts (the loops' resources, the rate and
  readers of each loop's dots, one iteration of each loop on the SM's pipes).
"""
