"""The embedded SQLite engine (the default: `store.url` empty): `store.py` the store, `engine.py` its
threads and connections, `schema.py` the migrations."""
