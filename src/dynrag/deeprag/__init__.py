"""DeepRAG training (Guan et al., 2025): tree-search data synthesis (search.py, teachers.py,
synth.py, trajectory.py), imitation learning and chain of calibration, and their commands (cli.py).
The inference method is dynrag.methods.deeprag."""
