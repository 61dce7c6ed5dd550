"""One bounded run of a connector: source runs, sink runs, offsets, the transform/convert pipeline.

Nothing here imports Airflow; backends are reached only through ``connect_runtime.backends``.
"""
