"""Runnable code that the docs include as snippets (``# [START name]`` / ``# [END name]`` regions).

``tests/integration/test_docs.py`` runs it and checks that every snippet shown in ``docs/`` equals its region.
"""
