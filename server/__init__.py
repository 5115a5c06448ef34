"""The gRPC service over `tilesolve.solver` (`tilesolve-server`): a thin adapter that decodes
and encodes through `tilesolve.wire` and serves `tilesolve.v1.TileSolveService` with health
checking and reflection (`app.create_server`, `main`)."""
