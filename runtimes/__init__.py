"""Runtimes: backends that evaluate tokens into logits (llama.cpp, fake; ONNX and torch later)."""
