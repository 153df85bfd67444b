"""Generated protobuf stubs (scripts/gen_proto.py); do not edit."""
