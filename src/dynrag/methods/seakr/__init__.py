"""SeaKR: self-aware knowledge retrieval (Yao et al., 2024).

uncertainty.py holds the eigen-score and the decisions made with it, query.py the query forms,
both pure; method.py the loop that samples, scores, retrieves, re-ranks and chooses the answer.
"""

from dynrag.methods.seakr.method import Seakr, SeakrOptions

__all__ = ["Seakr", "SeakrOptions"]
