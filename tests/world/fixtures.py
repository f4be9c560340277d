"""A tiny world (a dozen entities) the world tests share."""

from __future__ import annotations

from dynrag.world.entities import WorldOptions

TINY = WorldOptions(seed=7, people=4, companies=2, schools=1, towns=2, distractor_share=0.5,
                    real_facts=4, questions=12, comparisons=4, train_share=0.6, dev_share=0.2)
