"""One run from what the user asked to the objects that answer: ``plan.py`` decides and checks
(``make_plan``), ``assemble.py`` builds (``assemble``). Every command goes through both."""
