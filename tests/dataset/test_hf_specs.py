"""`hf:` specs beyond sizes: switches, lists and attributes a config class does not declare, and
models that take more than tokens (an encoder-decoder's decoder tokens, Whisper's spectrogram,
Wav2Vec2's waveform, BEiT's pixels though its config names a vocabulary), so T5, Whisper,
Wav2Vec2, BEiT, Swin and DeBERTa-v3 can be harvested (issue 48)."""

from __future__ import annotations

import pytest

from gpuarena.dataset.models import build, parse_hf
from gpuarena.dataset.record import record
from gpuarena.errors import GpuarenaError


def test_switches_lists_and_undeclared_attributes_parse():
    name, full, overrides = parse_hf(
        "SwinModel:size=full,depths=2|2|6|2,use_absolute_embeddings=true,pos_att_type=p2c|c2p,+norm_rel_ebd=layer_norm"
    )
    assert (name, full) == ("SwinModel", True)
    assert overrides == {
        "depths": [2, 2, 6, 2],
        "use_absolute_embeddings": True,
        "pos_att_type": ["p2c", "c2p"],
        "+norm_rel_ebd": "layer_norm",
    }
    with pytest.raises(GpuarenaError, match="not a number"):
        parse_hf("X:hidden_size=big")  # a word only for an undeclared (+) attribute


pytest.importorskip("transformers")


def _ops(workload) -> set[str]:
    return {c.op for c in record(workload.forward).calls}


def test_an_undeclared_attribute_reaches_the_model_and_an_unknown_declared_one_is_refused():
    spec = (
        "hf:DebertaV2ForMaskedLM:relative_attention=true,+position_buckets=8,pos_att_type=p2c|c2p,+share_att_key=true"
    )
    net = build(spec, "prefill", batch=1, seq=8, context=0).net
    assert net.config.position_buckets == 8 and net.config.share_att_key is True
    with pytest.raises(GpuarenaError, match="has no 'position_bucket'"):
        build("hf:DebertaV2ForMaskedLM:position_bucket=8", "prefill", batch=1, seq=8, context=0)


def test_an_encoder_decoder_gets_decoder_tokens_and_audio_models_their_signal():
    t5 = build("hf:T5ForConditionalGeneration:d_model=32,d_ff=64,num_layers=1,num_heads=2,d_kv=16", "prefill", 2, 8, 0)
    assert t5.sizes == {"batch": 2, "seq": 8}
    logits = t5.forward().logits
    assert list(logits.shape[:2]) == [2, 8]
    whisper = build(
        "hf:WhisperForConditionalGeneration:d_model=32,encoder_layers=1,decoder_layers=1,encoder_attention_heads=2,"
        "decoder_attention_heads=2,encoder_ffn_dim=64,decoder_ffn_dim=64,max_source_positions=16,vocab_size=64,"
        "pad_token_id=0,bos_token_id=1,eos_token_id=2,decoder_start_token_id=3",
        "prefill",
        1,
        4,
        0,
    )
    assert whisper.sizes == {"batch": 1, "frames": 32, "seq": 4}
    assert "aten.convolution.default" in _ops(whisper)  # the encoder's convolutions over the mel frames
    wav = build(
        "hf:Wav2Vec2Model:hidden_size=32,num_hidden_layers=1,num_attention_heads=2,intermediate_size=64,"
        "conv_dim=16|16|16|16|16|16|16,num_conv_pos_embeddings=8,num_conv_pos_embedding_groups=2",
        "prefill",
        1,
        10,
        0,
    )
    assert wav.forward().last_hidden_state.shape[1] == 10 - 1  # 10 frames of 320 samples, less the edges
    assert "aten.native_group_norm.default" in _ops(wav)
    with pytest.raises(GpuarenaError, match="decode needs"):
        build("hf:T5ForConditionalGeneration:d_model=32,num_layers=1", "decode", 1, 0, 8)


def test_a_vision_model_whose_config_names_a_vocabulary_takes_pixels():
    beit = build("hf:BeitForImageClassification:num_hidden_layers=1,image_size=32,patch_size=8", "prefill", 1, 1, 0)
    assert beit.sizes == {"batch": 1, "image_size": 32}
