"""The PostgreSQL engine (`store.url=postgresql://...`): any number of replicas share it; `store.py`
the store, `engine.py` its pool and options, `schema.py` the migrations, `bus.py` the signals."""
