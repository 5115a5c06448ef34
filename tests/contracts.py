"""Public contracts that several test modules check."""

# Hardware names the catalog must have (README.md, "hardware list"; the project's design
# brief requires at least these).
REQUIRED_HARDWARE_NAMES = (
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
