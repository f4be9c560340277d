"""IRCoT: retrieval interleaved with chain-of-thought, one sentence at a time (Trivedi et al., ACL 2023).

steps.py holds the query of each step and the paragraph set's growth as pure functions; method.py
the loop.
"""

from dynrag.methods.ircot.method import Ircot, IrcotOptions

__all__ = ["Ircot", "IrcotOptions"]
