"""Clients of tilesolve: the `tilesolve-cli` command (in-process by default)."""
