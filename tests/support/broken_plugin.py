"""A plugin module that fails while it is imported, as a package with a bug would."""

raise RuntimeError("the plugin's module failed on import")
