"""The model: llama.cpp through its C API, GGUF files, the catalog and its verified downloads, resolving and
loading, the build check."""
