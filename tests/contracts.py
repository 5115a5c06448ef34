"""Public contracts of DESIGN.md that several test modules check."""

# Hardware names DESIGN.md requires the catalog to have.
DESIGN_HARDWARE_NAMES = (
    "a100-40gb",
    "a100-80gb",
    "h100-sxm",
    "h200",
    "l4",
    "rtx-4090",
    "a10",
    "t4",
    "v100",
    "ascend-910",
    "ascend-910b",
    "ascend-310p3",
)
