"""Scores computed from a model's output (sacreBLEU), shared by training (val/bleu) and evaluation (test/bleu)."""
