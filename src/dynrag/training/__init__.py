"""Fine-tuning a model: examples with masked labels, the losses, LoRA, the resumable trainer with
its checkpoints, the finished HF directory, and the best-practices reader recipe. DeepRAG's
stages and the world's teaching build on it from the floors above."""
