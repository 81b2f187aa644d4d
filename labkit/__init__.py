"""labkit: measured, reusable PyTorch data-loading pieces."""
