"""The core's side of plugins: the contracts a plugin implements, where plugins come from, their
settings sections, and loading them at startup (docs/plugins.md)."""
