"""A recorded call's infinite arguments and value ranges survive profile.jsonl: `dataset add`
writes references anew from it, and a -inf read back as null made masked_fill(mask, None), which
failed the check of DeepSeek-V3's router and decoder layers that their harvest had passed (issue 48)."""

from __future__ import annotations

import math

import torch

from gpuarena.dataset.record import CallRecord, record


def test_infinite_arguments_and_ranges_round_trip_through_json():
    x = torch.randn(4, 8)
    mask = x > 0
    calls = record(lambda: torch.softmax(x.masked_fill(mask, float("-inf")), -1)).calls
    (fill,) = [c for c in calls if c.op.startswith("aten.masked_fill")]
    again = CallRecord.model_validate_json(fill.model_dump_json())
    value = next(a.value for a in again.args if a.name == "value")
    assert value == float("-inf")
    assert again == fill
    inputs = [a.tensor for c in calls for a in c.args if a.tensor is not None and a.tensor.low is not None]
    masked = [t for t in inputs if math.isinf(t.low or 0.0)]  # softmax's input: the mask's range, kept
    assert masked and all(CallRecord.model_validate_json(c.model_dump_json()) == c for c in calls)
