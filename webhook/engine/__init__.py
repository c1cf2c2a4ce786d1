"""The engine: the pure model and algorithms (numpy; no I/O, no clock, no Kubernetes client, no
pydantic — tests/test_layers.py checks it). Import from its modules and packages: ``evaluate``
(the verdict), ``snapshot`` (ClusterSnapshot), ``model``, ``quota/``, ``fixes/``, ``wait/``; the
README's Layout section says what each owns."""
