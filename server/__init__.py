"""The gRPC service over `tilesolve.solver` (a thin adapter; arrives with the service issue)."""
