"""`gpuarena batch --file`: a TOML or JSON list of problems, solutions and device kinds."""

from __future__ import annotations

import pytest

from gpuarena.cli.batch import BatchSpec, load_spec
from gpuarena.errors import GpuarenaError


def test_batch_file_toml_and_json(tmp_path) -> None:
    (tmp_path / "sub").mkdir()
    spec_file = tmp_path / "sub" / "batch.toml"
    spec_file.write_text(
        'problems = ["axpy_dest", "level1/softmax"]\nsolutions = ["a.py", "../b.py"]\n'
        'devices = ["cpu", "H100"]\nmode = "ranked"\nrepeat = 2\n'
    )
    data = load_spec(spec_file)
    assert data["solutions"] == [tmp_path / "sub" / "a.py", tmp_path / "sub" / ".." / "b.py"]  # relative to the file
    spec = BatchSpec(
        problems=data["problems"],
        solutions=data["solutions"],
        devices=data["devices"],
        mode=data["mode"],
        repeat=data["repeat"],
    )
    items = spec.items()
    assert len(items) == 2 * 2 * 2 * 2 and items[0] == ("axpy_dest", tmp_path / "sub" / "a.py", "cpu")
    assert items[:8] == items[8:]  # repeats follow each other
    bad = tmp_path / "bad.json"
    bad.write_text('{"problems": ["p"], "device": ["cpu"]}')
    with pytest.raises(GpuarenaError, match="unknown field 'device'"):
        load_spec(bad)
    bad.write_text('{"problems": "p"}')
    with pytest.raises(GpuarenaError, match="problems must be a list of strings"):
        load_spec(bad)
