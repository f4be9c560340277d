"""ETC: retrieval timed by the trend of token entropy (Li et al., AAAI 2026).

trend.py holds the formulas (first and second differences, dynamic smoothing) as pure functions;
method.py the loop that uses them.
"""

from dynrag.methods.etc.method import Etc, EtcOptions

__all__ = ["Etc", "EtcOptions"]
