"""Generated gRPC/protobuf code for the `tilesolve.v1` API (arrives with the service)."""
