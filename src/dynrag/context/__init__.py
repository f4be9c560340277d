"""What happens to retrieved passages between ranking and the prompt: repacking (their order) and
compression (keeping only part of their text)."""

from dynrag.context.repack import REPACK_ORDERS, repack

__all__ = ["REPACK_ORDERS", "repack"]
