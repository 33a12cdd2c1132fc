"""Interop: this project's models to and from other libraries — Hugging Face folders
(`pretrained`), export to PyTorch and `transformers` (`export`), and the PyTorch reference
models the tests compare against (`torch_reference`). Nothing of the core imports it."""
