"""The kernel families, one folder per kernel; see docs/architecture.md."""
