"""Generated gRPC/protobuf code for the `tilesolve.v1` API (`tilesolve.proto`): made by
`proto/generate.py`, checked fresh by `tests/test_codegen.py`; never edited by hand."""
