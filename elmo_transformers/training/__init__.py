"""Training with `Trainer`: data loading and collators, the fine-tuning heads' setup, LM pre-training helpers and
corpus perplexity. The `finetune` and `pretrain` commands are thin layers over this package."""
