"""One module per example DAG of ``dags/``, each ending with ``test_run = get_test_run(dag)``."""
