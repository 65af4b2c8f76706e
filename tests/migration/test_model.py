"""app.toml: every kind of mistake is refused with the field it is in."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuarena.migration.model import AppError, load_app, parse_app

GOOD = {
    "name": "a",
    "run": {"entry": "app.py:main"},
    "outputs": [{"file": "y.npy", "kind": "tensor", "compare": {"kind": "exact"}}],
}


def with_(**changes):
    data = {k: (v.copy() if isinstance(v, dict) else v) for k, v in GOOD.items()}
    data.update(changes)
    return data


def output(**fields):
    base = {"file": "y.npy", "kind": "tensor", "compare": {"kind": "exact"}}
    base.update(fields)
    return [base]


def test_good_defaults():
    spec = parse_app(GOOD)
    assert (spec.repeats, spec.seed, spec.time_limit_s, spec.setup) == (3, 0, 60.0, [])


@pytest.mark.parametrize(
    "data, field, words",
    [
        (with_(name=""), "name", "at least 1"),
        ({k: v for k, v in GOOD.items() if k != "run"}, "run", "Field required"),
        (with_(run={}), "run", "exactly one of command or entry"),
        (with_(run={"command": ["python", "a.py"], "entry": "a.py:main"}), "run", "exactly one"),
        (with_(run={"command": []}), "run", "must not be empty"),
        (with_(run={"entry": "app.py"}), "run", "file.py:function"),
        (with_(run={"command": ["x"], "args": ["1"]}), "run", "args go with entry"),
        (with_(outputs=[]), "outputs", "at least 1"),
        (with_(outputs=output(file="../y.npy")), "outputs[0].file", "without '..'"),
        (with_(outputs=output(file="/tmp/y.npy")), "outputs[0].file", "relative path"),
        (with_(outputs=output(file="y.safetensors")), "outputs[0]", ".npy, .npz or .pt"),
        (with_(outputs=output(kind="image")), "outputs[0].kind", "'tensor', 'text' or 'json'"),
        (with_(outputs=output(compare={"kind": "fuzzy"})), "outputs[0].compare", "'fuzzy'"),
        (
            with_(outputs=output(compare={"kind": "tolerance", "atol": -1})),
            "outputs[0].compare.atol",
            "greater than or equal to 0",
        ),
        (
            with_(outputs=output(compare={"kind": "tokens", "threshold": 1.5})),
            "outputs[0].compare.threshold",
            "less than or equal to 1",
        ),
        (
            with_(outputs=output(compare={"kind": "metric", "name": "psnr", "threshold": 1})),
            "outputs[0].compare.name",
            "max_abs",
        ),
        (
            with_(outputs=output(compare={"kind": "metric", "name": "cosine"})),
            "outputs[0].compare.threshold",
            "Field required",
        ),
        (
            with_(outputs=output(file="a.txt", kind="text", compare={"kind": "tolerance"})),
            "outputs[0]",
            "does not apply to a text output",
        ),
        (with_(outputs=output(cmp=1)), "outputs[0].cmp", "Extra inputs"),
        (with_(outputs=output() + output()), "top level", "y.npy more than once"),
        (with_(performance={"name": "fps", "regex": "x"}), "performance.name", "latency_ms"),
        (with_(performance={"name": "latency_ms"}), "performance", "exactly one of regex or json_file"),
        (with_(performance={"name": "latency_ms", "regex": "("}), "performance", "does not compile"),
        (with_(performance={"name": "latency_ms", "json_file": "p.json"}), "performance", "needs json_key"),
        (with_(time_limit_s=0), "time_limit_s", "greater than 0"),
        (with_(repeats=0), "repeats", "greater than or equal to 1"),
        (with_(seed="x"), "seed", "valid integer"),
        (with_(setup=[[]]), "setup", "must not be empty"),
        (with_(extra=1), "extra", "Extra inputs"),
    ],
)
def test_mistakes_name_their_field(data, field, words):
    with pytest.raises(AppError) as caught:
        parse_app(data)
    message = str(caught.value)
    assert f"app.toml: {field}: " in message, message
    assert words in message, message


def test_higher_is_better_defaults_by_figure():
    lat = parse_app(with_(performance={"name": "latency_ms", "regex": "ms=(\\S+)"}))
    rate = parse_app(with_(performance={"name": "tokens_per_s", "regex": "t=(\\S+)"}))
    assert lat.performance.higher_is_better is False and rate.performance.higher_is_better is True


def test_load_app_errors(tmp_path: Path):
    with pytest.raises(AppError, match="not found"):
        load_app(tmp_path)
    (tmp_path / "app.toml").write_text("name = ")
    with pytest.raises(AppError, match="not valid TOML"):
        load_app(tmp_path)
    (tmp_path / "app.toml").write_text('name = "a"\n[run]\nentry = "app.py:main"\n')
    with pytest.raises(AppError, match=r"app.toml: outputs: Field required"):
        load_app(tmp_path)


def test_examples_parse():
    root = Path(__file__).resolve().parents[2] / "examples" / "apps"
    for name in ("mlp_reference", "mlp_port", "mlp_port_broken"):
        assert load_app(root / name).name == name
