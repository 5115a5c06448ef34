"""What the Triton compiler (3.9) allocates for a kernel of `tl.dot` attention loops on each
target: shared memory (`shared_memory`), registers and spills (`registers`), from a description
of the kernel's loops (`loops`) and the target's lowering (`target`). A shared piece: the triton
family uses it, and so can any family whose kernels Triton compiles (FlexAttention's templates,
Triton on ROCm). It imports the core only and registers no family. docs/model.md 16.
"""
