"""Training recipes (LoRA SFT) and token-level datasets."""
