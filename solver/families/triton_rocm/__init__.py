"""Triton-compiled FlashAttention kernels on an AMD Instinct (rocm) device: what every such family
shares (the triton family's tutorial kernel on ROCm; FlexAttention's templates on ROCm next). A
shared piece on top of two others: it joins the AMD cost pieces (`families/rocm`) with the
Triton compiler's allocation rules (`families/triton_compiler`: LDS, and the VGPR+AGPR estimate
of `registers_amd`), and registers no family.

- `knobs`: Triton's AMD knobs (`waves_per_eu`, `matrix_instr_nonkdim`, `kpack`) as declared
  parameters, their domains per target and their rules, with their sources.
- `forward.TritonRocmForward`: a forward kernel of one `tl.dot` loop: its parameters,
  resources (LDS, VGPR+AGPR, occupancy by AMD's rules), constraints and cost (the shared AMD
  pieces plus the stream pipeliner's stages). docs/model.md 19.10.
"""
