"""DRAGIN: RIND decides when to retrieve, QFS decides what to ask (Su et al., ACL 2024).

scoring.py holds the formulas (RIND, QFS, the reference variant's weights) as pure functions;
method.py the loop that uses them.
"""

from dynrag.methods.dragin.method import Dragin, DraginOptions

__all__ = ["Dragin", "DraginOptions"]
