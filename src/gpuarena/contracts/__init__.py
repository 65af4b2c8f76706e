"""The ground floor: value types and records every other package may import. It imports
pydantic and nothing of gpuarena's floors above it: no torch, no FastAPI, no SQLAlchemy
(tests/test_device_kind.py checks).

- `records.py`: the Evaluation a run ends with (with `status.py`'s Status and
  `profile_record.py`'s profile types): what the harness writes and every face reads;
- `messages.py`: the supervisor-worker protocol, one typed request per operation and its reply;
- `wire.py`: the runner-service protocol's messages that carry no format (the claimed job,
  which carries a problem and a solution, is runner_wire.py, above the formats);
- `device.py`: the device kind (MODEL[@STACK]) and its one parser.
"""
