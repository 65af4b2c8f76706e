"""KernelBench's level 4 offline: Hugging Face models built from gpuarena's own table of their
published configs, with random weights, instead of downloaded.

A level-4 file calls `AutoConfig.from_pretrained(name)` at its top level and
`AutoModelFor...from_pretrained(name, config=config)` in `Model.__init__`: both need the hub,
and the second downloads the weights (up to 2.7B parameters). KernelBench times the forward,
which does not depend on which weights are loaded, so gpuarena builds the same architecture
from a config and initializes it from the seed, as it builds every other KernelBench module.
While the importer runs such a file, and while an imported problem's reference or a
solution's adapter builds the model, `offline_hub` answers those calls:
- `AutoConfig.from_pretrained(name)` from HUB_MODELS (a name not in it is refused, named);
- `AutoModel*.from_pretrained(name, config=...)` as `from_config(config)`, then `.eval()`, as
  from_pretrained leaves it (no dropout: the forward is deterministic).
Nothing is patched outside those blocks.

The sizes of a model's config that decide its weight (layers, width, vocabulary) are workload
axes, `hf_FIELD` (`hf_n_layer = 12`), at their published values in the file's own workload and
at HubModel.cpu's in the CPU workload: the same architecture, smaller, which is how a model whose
weights alone are over the CPU's cap still gets a CPU workload (kernelbench_read.small_sizes).

A config object among get_init_inputs() travels in the problem's init input as
(CONFIG_FORMAT, its JSON): a plain value, rebuilt into the config on each side (decode_init).
This module imports nothing heavy at import time: transformers is imported where it is used.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

AXIS_PREFIX = "hf_"
"""A workload axis named hf_FIELD sets the config field FIELD of the file's hub models."""
CONFIG_FORMAT = "gpuarena.hf-config/1"
_HUB_ONLY_KWARGS = {
    "cache_dir",
    "force_download",
    "local_files_only",
    "proxies",
    "resume_download",
    "revision",
    "subfolder",
    "token",
    "trust_remote_code",
    "use_auth_token",
    "use_safetensors",
    "low_cpu_mem_usage",
    "device_map",
    "attn_implementation",
}
"""from_pretrained's arguments about fetching and placing weights: nothing to do offline."""


class HubModel(BaseModel):
    """A published model's architecture: its config class and the fields that set its sizes.
    Written into imported problems (reference.py), so a problem keeps the model it was made with."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_type: str
    """transformers' name of the config class (AutoConfig.for_model)."""
    fields: dict[str, Any]
    """The published config's fields that decide the architecture and its sizes."""
    cpu: dict[str, int]
    """Smaller values of some of those fields, for the CPU workload: the same layer types and
    head size, fewer layers, a small vocabulary (and a narrower width where one layer alone is
    over the CPU's cap). These fields are the model's workload axes."""


HUB_MODELS: dict[str, HubModel] = {
    "gpt2": HubModel(
        model_type="gpt2",
        fields=dict(
            vocab_size=50257,
            n_positions=1024,
            n_embd=768,
            n_layer=12,
            n_head=12,
            activation_function="gelu_new",
            layer_norm_epsilon=1e-5,
            bos_token_id=50256,
            eos_token_id=50256,
        ),
        cpu=dict(n_layer=1, vocab_size=512),
    ),
    "EleutherAI/gpt-neo-2.7B": HubModel(
        model_type="gpt_neo",
        fields=dict(
            vocab_size=50257,
            max_position_embeddings=2048,
            hidden_size=2560,
            num_layers=32,
            num_heads=20,
            attention_types=[[["global", "local"], 16]],
            window_size=256,
            intermediate_size=None,
            activation_function="gelu_new",
            embed_dropout=0.0,
            attention_dropout=0.0,
            resid_dropout=0.0,
            layer_norm_epsilon=1e-5,
            bos_token_id=50256,
            eos_token_id=50256,
        ),
        cpu=dict(num_layers=2, hidden_size=640, num_heads=5, vocab_size=512),
    ),
    "facebook/opt-1.3b": HubModel(
        model_type="opt",
        fields=dict(
            vocab_size=50272,
            hidden_size=2048,
            num_hidden_layers=24,
            ffn_dim=8192,
            num_attention_heads=32,
            max_position_embeddings=2048,
            word_embed_proj_dim=2048,
            do_layer_norm_before=True,
            activation_function="relu",
            enable_bias=True,
            dropout=0.1,
            attention_dropout=0.0,
            pad_token_id=1,
            bos_token_id=2,
            eos_token_id=2,
        ),
        cpu=dict(
            num_hidden_layers=1,
            hidden_size=1024,
            ffn_dim=4096,
            num_attention_heads=16,
            word_embed_proj_dim=1024,
            vocab_size=512,
        ),
    ),
    "google/bigbird-roberta-base": HubModel(
        model_type="big_bird",
        fields=dict(
            vocab_size=50358,
            hidden_size=768,
            num_hidden_layers=12,
            num_attention_heads=12,
            intermediate_size=3072,
            hidden_act="gelu_new",
            max_position_embeddings=4096,
            type_vocab_size=2,
            attention_type="block_sparse",
            block_size=64,
            num_random_blocks=3,
            use_bias=True,
            rescale_embeddings=False,
            layer_norm_eps=1e-12,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            sep_token_id=66,
        ),
        cpu=dict(num_hidden_layers=1, vocab_size=512),
    ),
    "google/electra-small-discriminator": HubModel(
        model_type="electra",
        fields=dict(
            vocab_size=30522,
            embedding_size=128,
            hidden_size=256,
            num_hidden_layers=12,
            num_attention_heads=4,
            intermediate_size=1024,
            hidden_act="gelu",
            max_position_embeddings=512,
            type_vocab_size=2,
            layer_norm_eps=1e-12,
            pad_token_id=0,
        ),
        cpu=dict(num_hidden_layers=1, vocab_size=512),
    ),
    "google/reformer-enwik8": HubModel(
        model_type="reformer",
        fields=dict(
            vocab_size=258,
            hidden_size=1024,
            num_attention_heads=8,
            attention_head_size=128,
            num_hidden_layers=12,  # as attn_layers, which _fitted derives from it
            attn_layers=[
                "local",
                "local",
                "lsh",
                "local",
                "local",
                "local",
                "lsh",
                "local",
                "local",
                "local",
                "lsh",
                "local",
            ],
            feed_forward_size=4096,
            hidden_act="relu",
            num_hashes=4,
            num_buckets=512,
            hash_seed=None,
            lsh_attn_chunk_length=256,
            local_attn_chunk_length=128,
            lsh_num_chunks_before=1,
            lsh_num_chunks_after=0,
            local_num_chunks_before=1,
            local_num_chunks_after=0,
            max_position_embeddings=65536,
            axial_pos_embds=True,
            axial_pos_shape=[128, 512],
            axial_pos_embds_dim=[256, 768],
            axial_norm_std=1.0,
            chunk_size_lm_head=0,
            chunk_size_feed_forward=0,
            hidden_dropout_prob=0.2,
            lsh_attention_probs_dropout_prob=0.1,
            local_attention_probs_dropout_prob=0.2,
            layer_norm_eps=1e-12,
            is_decoder=True,
            tie_word_embeddings=False,
            pad_token_id=0,
            eos_token_id=2,
        ),
        cpu=dict(num_hidden_layers=2),
    ),
    "facebook/bart-large": HubModel(
        model_type="bart",
        fields=dict(
            vocab_size=50265,
            d_model=1024,
            encoder_layers=12,
            decoder_layers=12,
            encoder_attention_heads=16,
            decoder_attention_heads=16,
            encoder_ffn_dim=4096,
            decoder_ffn_dim=4096,
            max_position_embeddings=1024,
            activation_function="gelu",
            scale_embedding=False,
            dropout=0.1,
            attention_dropout=0.1,
            activation_dropout=0.1,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
            decoder_start_token_id=2,
            forced_bos_token_id=0,
            forced_eos_token_id=2,
        ),
        cpu=dict(encoder_layers=1, decoder_layers=1, vocab_size=512),
    ),
}
"""Published architectures of the models KernelBench's level 4 names (their config.json on the
Hugging Face hub), in gpuarena's own words."""


class HubModelUnknown(LookupError):
    """A model name gpuarena cannot build offline."""


def hub_axes(models: Mapping[str, HubModel], cpu: bool = False) -> dict[str, int]:
    """The workload axes of these models: their published sizes, or the CPU workload's."""
    axes: dict[str, int] = {}
    for model in models.values():
        for field, small in model.cpu.items():
            axes[AXIS_PREFIX + field] = small if cpu else int(model.fields[field])
    return axes


def _fitted(model_type: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Fields that follow a resized one: GPT-Neo's attention pattern repeats to its layer count,
    Reformer's layer list is its layer count (fewer: local and LSH alternating, both kinds kept);
    special token ids past a smaller vocabulary are dropped (they are not used by forward)."""
    fields = dict(fields)
    if model_type == "gpt_neo":
        pattern = fields["attention_types"][0][0]
        fields["attention_types"] = [[pattern, max(1, fields["num_layers"] // len(pattern))]]
    if model_type == "reformer":
        layers, count = fields["attn_layers"], fields.pop("num_hidden_layers")
        fields["attn_layers"] = layers if count == len(layers) else (["local", "lsh"] * count)[:count]
    for key, value in list(fields.items()):
        if key.endswith("_token_id") and isinstance(value, int) and value >= fields.get("vocab_size", value + 1):
            fields[key] = None
    return fields


def hub_config(name: str, sizes: Mapping[str, int] | None = None, models: Mapping[str, HubModel] | None = None) -> Any:
    """The transformers config of a published model, built offline, with the workload's hf_ axes
    (sizes) applied."""
    from transformers import AutoConfig

    table = HUB_MODELS if models is None else models
    model = table.get(name)
    if model is None:
        raise HubModelUnknown(
            f"gpuarena builds Hugging Face models offline from its table of published configs, which "
            f"does not have {name!r} (it has {', '.join(sorted(table))})"
        )
    fields = dict(model.fields)
    for key, value in (sizes or {}).items():
        if key.startswith(AXIS_PREFIX) and key[len(AXIS_PREFIX) :] in model.cpu:
            fields[key[len(AXIS_PREFIX) :]] = value
    return AutoConfig.for_model(model.model_type, **_fitted(model.model_type, fields))


def _model_from_config(cls: Any, config: Any, kwargs: dict[str, Any]) -> Any:
    """A model class's (or an AutoModel* class's) model of this config, random weights from torch's seed."""
    import torch
    from transformers import PreTrainedModel

    model = cls._from_config(config) if issubclass(cls, PreTrainedModel) else cls.from_config(config)
    dtype = kwargs.get("dtype", kwargs.get("torch_dtype"))
    if isinstance(dtype, torch.dtype):
        model = model.to(dtype=dtype)
    return model.eval()  # as from_pretrained returns it


def _owners(base: type) -> list[type]:
    """base and its subclasses that define from_pretrained themselves (each AutoModel* class has
    its own copy: patching the base alone leaves them downloading)."""
    found: list[type] = [base]
    stack: list[type] = list(base.__subclasses__())
    while stack:
        cls = stack.pop()
        stack += cls.__subclasses__()
        if "from_pretrained" in cls.__dict__ and cls not in found:
            found.append(cls)
    return found


@contextlib.contextmanager
def offline_hub(
    sizes: Mapping[str, int] | None = None,
    models: Mapping[str, HubModel] | None = None,
    used: list[str] | None = None,
    enabled: bool = True,
) -> Iterator[None]:
    """While inside: from_pretrained of configs and models builds them from the table (models)
    at these sizes, seeded random weights, no hub. `used` gets the names asked for. Restored on
    exit; `enabled=False` (a file that does not use transformers) patches nothing."""
    if not enabled:
        yield
        return
    import transformers.models.auto.modeling_auto  # noqa: F401  the AutoModel* classes, patched below
    from transformers import AutoConfig, PretrainedConfig, PreTrainedModel
    from transformers.models.auto.auto_factory import _BaseAutoModelClass

    def config_from_pretrained(cls: type, name: Any, *args: Any, **kwargs: Any) -> Any:
        if used is not None:
            used.append(str(name))
        config = hub_config(str(name), sizes, models)
        for key, value in kwargs.items():  # from_pretrained's other keywords update the config
            if key not in _HUB_ONLY_KWARGS and key != "return_unused_kwargs":
                setattr(config, key, value)
        return config

    def model_from_pretrained(cls: type, name: Any, *args: Any, config: Any = None, **kwargs: Any) -> Any:
        if config is None or isinstance(config, str):
            config = config_from_pretrained(cls, config or name)
        return _model_from_config(cls, config, kwargs)

    places: list[tuple[type, Any]] = [(AutoConfig, config_from_pretrained), (PretrainedConfig, config_from_pretrained)]
    places += [(owner, model_from_pretrained) for owner in _owners(_BaseAutoModelClass)]
    places += [(owner, model_from_pretrained) for owner in _owners(PreTrainedModel)]
    saved = [(owner, owner.__dict__["from_pretrained"]) for owner, _ in places]
    try:
        for owner, function in places:
            setattr(owner, "from_pretrained", classmethod(function))  # noqa: B010  (a class: mypy)
        yield
    finally:
        for owner, original in saved:
            setattr(owner, "from_pretrained", original)  # noqa: B010


def encode_init(args: tuple[Any, ...] | list[Any]) -> tuple[Any, ...]:
    """get_init_inputs()'s values with each transformers config as (CONFIG_FORMAT, its JSON)."""
    try:
        from transformers import PretrainedConfig
    except ImportError:  # no transformers: no configs among them
        return tuple(args)
    return tuple(
        (CONFIG_FORMAT, value.to_json_string(use_diff=False)) if isinstance(value, PretrainedConfig) else value
        for value in args
    )


def decode_init(args: tuple[Any, ...] | list[Any]) -> tuple[Any, ...]:
    """encode_init undone: each (CONFIG_FORMAT, JSON) rebuilt into its transformers config."""

    def decoded(value: Any) -> Any:
        if isinstance(value, tuple) and len(value) == 2 and value[0] == CONFIG_FORMAT:
            from transformers import CONFIG_MAPPING

            fields = json.loads(value[1])
            return CONFIG_MAPPING[fields["model_type"]].from_dict(fields)
        return value

    return tuple(decoded(value) for value in args)


PROLOGUE = (
    "import gpuarena.interop.kernelbench_hf as _gpuarena_hf; _gpuarena_hub = _gpuarena_hf.offline_hub(); "
    "_gpuarena_hub.__enter__()  # gpuarena: the file's top level asks the hub for configs; answered offline"
)
"""The line of an imported level-4 problem's reference.py above the file's own text: that text
runs when reference.py is imported, and its `AutoConfig.from_pretrained` must not reach the hub.
The glue, right below the file, leaves the block; its own runs of the file (_namespace) drop
the line, as they run the file inside their own offline_hub, at the workload's sizes."""


def glue_block(models: Mapping[str, HubModel] | None) -> str:
    """The lines of an imported problem's reference.py that build its hub models offline, with
    the table entries it was imported with frozen in it (empty: gpuarena's table then). None (a
    file that does not use transformers): nothing patched, nothing imported."""
    if models is None:
        return (
            "import contextlib as _contextlib\n\n_PROLOGUE = ''\n\n\n"
            "def _offline_hub(sizes):\n    return _contextlib.nullcontext()\n\n\n"
            "def _encode_init(args):\n    return tuple(args)\n\n\n"
            "_decode_init = _encode_init\n"
        )
    table = json.dumps({name: model.model_dump() for name, model in models.items()}, indent=1)
    return f"""_gpuarena_hub.__exit__(None, None, None)  # entered by the line above the file (PROLOGUE)
_PROLOGUE = {PROLOGUE!r}

import json as _json

from gpuarena.interop.kernelbench_hf import HubModel as _HubModel
from gpuarena.interop.kernelbench_hf import decode_init as _decode_init
from gpuarena.interop.kernelbench_hf import encode_init as _encode_init
from gpuarena.interop.kernelbench_hf import offline_hub as _offline_hub_at

# the Hugging Face models the file names, as gpuarena's table had them when it was imported
_HUB_MODELS = {{k: _HubModel(**v) for k, v in _json.loads({table!r}).items()}} or None


def _offline_hub(sizes):
    return _offline_hub_at(sizes, _HUB_MODELS)
"""
