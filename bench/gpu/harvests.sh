#!/usr/bin/env bash
# Issue 48: harvests of real model architectures not harvested yet, at their published sizes
# (a large model with fewer layers, said in its name), bf16, on one GPU, each into
# $OUT/harvests/<name> as dataset/harvests/<name> holds them (then `gpuarena dataset add`).
#
# Usage (from the repository's root, on the GPU machine):
#   OUT=folder bash bench/gpu/harvests.sh [NAME ...]     # default: every harvest below, in order
#
# In order of the distinct computations each added on a CPU trial (small sizes, bf16: the
# session's report /tmp/h1-report.md), so the most useful run first. Each harvest has its own
# time limit (T_HARVEST seconds, default 150), and none starts once BUDGET seconds (default 360)
# have passed: the rest are listed as skipped, to run by name in a later call. Each one's log is
# $OUT/harvests/<name>.log; $OUT/harvests/summary.txt lists each one's status and seconds.
# Sizes are the published models' (hf:<Class>:size=full keeps the config class's defaults;
# key=value sets the others; `a|b` a list, true/false a switch, `+key` an attribute the config
# class does not declare but its model reads).
#
# Re-harvests (bert-base, convnext-tiny, resnet50, vit-base, starcoder2-3b): the same names and
# commands as in dataset/harvests/, made again with today's harvester (biases, norm weights,
# batch-norm statistics and layer scales seeded, not transformers' constants; a norm's problem
# returning its output alone), which brings back the LayerNorms, biased linears, batch norms and
# ConvNeXt layers their first harvests rejected. They replace those folders, and the dataset is
# then assembled again from scratch (`dataset add` skips a harvest command it has seen).
set -euo pipefail

OUT=${OUT:-gpu-out}
mkdir -p "$OUT/harvests"
OUT=$(cd "$OUT" && pwd)
T_HARVEST=${T_HARVEST:-150}
BUDGET=${BUDGET:-360}
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
if [ -d /tmp/site ]; then export PYTHONPATH="/tmp/site:$PYTHONPATH"; fi # validate.sh's wheels, where it ran
SUMMARY="$OUT/harvests/summary.txt"
WANTED=" $* "

harvest() { # NAME MODEL OPTIONS...
  local name=$1 model=$2
  shift 2
  if [ "$WANTED" != "  " ] && [[ "$WANTED" != *" $name "* ]]; then
    return 0
  fi
  if [ "$SECONDS" -ge "$BUDGET" ]; then
    printf '%-32s %-12s\n' "$name" "skipped (budget ${BUDGET}s spent)" | tee -a "$SUMMARY"
    return 0
  fi
  local start=$SECONDS status=ok
  timeout -k 10 "$T_HARVEST" "$PY" -m gpuarena harvest "$model" "$@" --device cuda --dtype bfloat16 \
    --seed 0 --repeats 3 -o "$OUT/harvests/$name" > "$OUT/harvests/$name.log" 2>&1 || status="failed ($?)"
  printf '%-32s %-12s %4ss  %s\n' "$name" "$status" "$((SECONDS - start))" \
    "$(tail -n 1 "$OUT/harvests/$name.log" | cut -c1-160)" | tee -a "$SUMMARY"
}

DEC="--phase prefill --batch 1 --seq 2048 --min-share 0.005" # decoders, as the 7B harvests
ENC="--phase prefill --batch 32 --seq 512 --min-share 0.005" # encoders, as BERT-base
IMG="--phase prefill --batch 64 --seq 128 --min-share 0.005" # vision, 64 images of 224 x 224

echo "harvests on $(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -n 1)" | tee "$SUMMARY"

# depthwise and grouped convolutions, squeeze-excitation, SiLU / ReLU6, batch norms (EfficientNet-B0,
# MobileNetV2, RegNetY-4GF); spatial-reduction attention, Mix-FFN and a bilinear decode head (SegFormer-B0)
harvest efficientnet-b0-prefill 'hf:EfficientNetForImageClassification:size=full,width_coefficient=1.0,depth_coefficient=1.0,image_size=224,hidden_dim=1280' $IMG
harvest segformer-b0-prefill hf:SegformerForSemanticSegmentation:size=full $IMG
harvest mobilenetv2-prefill hf:MobileNetV2ForImageClassification:size=full $IMG
# windowed attention with a relative position bias, patch merging (Swin-T)
harvest swin-tiny-prefill hf:SwinForImageClassification:size=full $IMG
# encoder-decoder: bucketed relative position bias, T5's RMS norm, cross attention, ReLU MLP
harvest t5-base-prefill 'hf:T5ForConditionalGeneration:size=full,d_model=768,d_ff=3072,num_layers=12,num_decoder_layers=12,num_heads=12' \
  --phase prefill --batch 16 --seq 512 --min-share 0.005
harvest regnet-y-4gf-prefill hf:RegNetForImageClassification:size=full $IMG
harvest convnext-tiny-prefill hf:ConvNextForImageClassification:size=full --phase prefill --batch 64 --seq 128 --min-share 0.01
# speech: group norm, 1-D convolutions over the waveform, a grouped positional convolution (10 s clips)
harvest wav2vec2-base-prefill hf:Wav2Vec2Model:size=full --phase prefill --batch 16 --seq 500 --min-share 0.005
# multi-head latent attention, sigmoid router with group-limited top-k (3 dense layers and 1 of 256 experts)
harvest deepseek-v3-4layers-prefill hf:DeepseekV3ForCausalLM:size=full,num_hidden_layers=4 $DEC
harvest bert-base-prefill hf:BertForMaskedLM:size=full --phase prefill --batch 32 --seq 512 --min-share 0.005
# attention sinks, clamped SwiGLU experts, alternating sliding-window layers (gpt-oss-20b, 4 of 24 layers)
harvest gpt-oss-20b-4layers-prefill hf:GptOssForCausalLM:size=full,num_hidden_layers=4,num_local_experts=32 $DEC
# speech encoder-decoder: convolutional stem over 3000 mel frames, sinusoidal positions, 128 decoder tokens
harvest whisper-small-prefill 'hf:WhisperForConditionalGeneration:size=full,d_model=768,encoder_layers=12,decoder_layers=12,encoder_attention_heads=12,decoder_attention_heads=12,encoder_ffn_dim=3072,decoder_ffn_dim=3072' \
  --phase prefill --batch 16 --seq 128 --min-share 0.005
# relative position bias per layer, layer scale, mean pooling (BEiT-B/16)
harvest beit-base-prefill hf:BeitForImageClassification:size=full,use_relative_position_bias=true $IMG
# ALiBi, LayerNorm without bias, no biases (MPT-7B, 8 of 32 layers)
harvest mpt-7b-8layers-prefill hf:MptForCausalLM:size=full,d_model=4096,n_heads=32,n_layers=8,vocab_size=50432 $DEC
# q/k norms, 5:1 sliding-window layers, 262k vocabulary (Gemma-3-1B)
harvest gemma3-1b-prefill hf:Gemma3ForCausalLM:size=full,hidden_size=1152,intermediate_size=6912,num_hidden_layers=26,num_attention_heads=4,num_key_value_heads=1,head_dim=256,vocab_size=262144,sliding_window=512 $DEC
harvest resnet50-prefill hf:ResNetForImageClassification:size=full --phase prefill --batch 64 --seq 128 --min-share 0.01
# quick-GELU, 257 tokens (CLIP ViT-L/14's image tower)
harvest clip-vit-large-prefill hf:CLIPVisionModel:size=full,hidden_size=1024,intermediate_size=4096,num_hidden_layers=24,num_attention_heads=16,patch_size=14 \
  --phase prefill --batch 32 --seq 128 --min-share 0.005
# a LayerNorm without weights (OLMo-1B)
harvest olmo-1b-prefill hf:OlmoForCausalLM:size=full,hidden_size=2048,num_hidden_layers=16,num_attention_heads=16,num_key_value_heads=16,intermediate_size=8192,vocab_size=50304 $DEC
# layer scale, 1370 tokens at 518 x 518 (DINOv2-B/14)
harvest dinov2-base-prefill hf:Dinov2Model:size=full,image_size=518 --phase prefill --batch 8 --seq 128 --min-share 0.005
harvest vit-base-prefill hf:ViTForImageClassification:size=full --phase prefill --batch 64 --seq 128 --min-share 0.01
harvest starcoder2-3b-prefill hf:Starcoder2ForCausalLM:size=full $DEC
# fewer new computations each on the CPU trial: run when the budget allows, or by name
harvest mt5-base-prefill 'hf:MT5ForConditionalGeneration:size=full,d_model=768,d_ff=2048,num_layers=12,num_decoder_layers=12,num_heads=12' \
  --phase prefill --batch 16 --seq 512 --min-share 0.005
harvest bloom-560m-prefill hf:BloomForCausalLM:size=full,hidden_size=1024,n_layer=24,n_head=16 $DEC
harvest deberta-v3-base-prefill 'hf:DebertaV2ForMaskedLM:size=full,hidden_size=768,num_hidden_layers=12,num_attention_heads=12,intermediate_size=3072,relative_attention=true,+position_buckets=256,pos_att_type=p2c|c2p,+share_att_key=true,+norm_rel_ebd=layer_norm,position_biased_input=false' $ENC
harvest falcon-7b-8layers-prefill hf:FalconForCausalLM:size=full,num_hidden_layers=8 $DEC
harvest opt-1.3b-prefill hf:OPTForCausalLM:size=full,hidden_size=2048,num_hidden_layers=24,ffn_dim=8192,num_attention_heads=32,word_embed_proj_dim=2048 $DEC
harvest pythia-1.4b-prefill hf:GPTNeoXForCausalLM:size=full,hidden_size=2048,num_hidden_layers=24,num_attention_heads=16,intermediate_size=8192,vocab_size=50304 $DEC
harvest albert-base-prefill hf:AlbertForMaskedLM:size=full,hidden_size=768,num_attention_heads=12,intermediate_size=3072 $ENC

echo "done in ${SECONDS}s: $(grep -c ' ok ' "$SUMMARY" || true) harvests ok; summary in $SUMMARY"
