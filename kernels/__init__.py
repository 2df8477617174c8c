"""Token-bitmask kernels: apply a grammar's allowed-token bitmask to logits (Triton on GPU, CPU path)."""
