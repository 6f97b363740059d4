"""CLI commands, one module per area. Each exposes ``register(app)``.

Keep module-level imports light (no torch, transformers, sklearn, scipy, matplotlib).
"""
