"""The kernel families, one folder per kernel; see docs/architecture.md."""

# The built-in kernel folders, in registration order (`registry`, which imports each on first
# use): a device default without a model of the phase is stood in for by the first family
# registered for it that runs on the device, so the order matters there. Each folder's
# families bear its name. Here, in a module that imports nothing, so that a caller can tell a
# built-in family's name without loading the families (the Triton prune hook's answer cache).
KERNEL_FOLDERS = ("fa2", "triton", "flashinfer", "fa3", "fa4", "ascend", "ck", "flex")
