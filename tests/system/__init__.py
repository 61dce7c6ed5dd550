"""System tests, in the layout of Airflow's providers: ``pyconnect/`` holds one module per example DAG of ``dags/``,
each loading the DAG from its file and ending with ``test_run = get_test_run(dag)`` (:mod:`tests.system.utils`);
``test_examples_covered`` fails when an example has none.

The modules are named ``test_example_*.py``, not ``example_*.py`` as in Airflow's providers (whose system test
files are the example DAGs themselves, collected through ``python_files = test_*.py example_*.py``): here the
example DAGs live in ``dags/`` and the test modules only run them, so pytest's default ``test_*.py`` collects
them with no change to the project's collection rules (which would also collect any other ``example_*.py``
under ``tests/``), and a test module never shares its name with the DAG file it runs.
"""
