"""A knowledge-controlled world: a generated benchmark in which what the model knows is known
fact by fact (docs/world.md). ``bank`` the real facts, ``names`` invented words, ``entities`` the
seeded entities and facts, ``articles`` their passages, ``questions`` bridge chains and
comparisons, ``build`` the files as bytes, ``make`` writing them, ``probe`` and ``knowledge`` what a
model knows, ``check`` whether that holds, ``cli`` the `dynrag world` commands."""
