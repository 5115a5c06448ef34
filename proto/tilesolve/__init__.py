"""tilesolve: FlashAttention tile configurations from an integer program over a hardware model."""

__version__ = "0.1.0"
