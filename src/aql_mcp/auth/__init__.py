"""Token verification and the identities it yields."""
