"""What the CUDA kernel families share: the SM's resources and their constraints
(`resources`, `constraints`, `family`), the SM's timing model that every CUDA cost model
builds on (`timing`), the FlashAttention forward loop's cost and its split-KV path
(`forward`), and the backward loops' (`backward`). A kernel folder (fa2, triton,
flashinfer, fa3) imports these; they import no kernel folder.
"""
