"""The PostgreSQL engine (`store.url=postgresql://...`): any number of replicas share it; `store.py`
the store, `engine.py` its pool and options, `schema.py` the migrations (the core's, then the plugins'), `bus.py` the
signals."""
