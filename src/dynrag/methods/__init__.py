"""Answering strategies: direct, single, fixed_length, fixed_sentence, flare, dragin, deeprag."""
