"""The embedded SQLite engine (the default: `store.url` empty): `store.py` the store, `engine.py` its
threads and connections, `schema.py` the migrations (the core's, then the plugins'), `functions.py`
the SQL functions every connection has."""
