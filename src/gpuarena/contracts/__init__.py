"""The ground floor: value types and wire records every other package may import (the device
kind, the runner protocol's messages). It imports pydantic and nothing else of gpuarena's
floors above it: no torch, no FastAPI, no SQLAlchemy (tests/test_device_kind.py checks)."""
