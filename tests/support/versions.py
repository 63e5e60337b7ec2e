"""Versions of the npm packages the tests run, read by those tests and by the lock's tests
(tests/scripts/test_lock.py: each must have a package-lock.json under requirements/npm/)."""

from __future__ import annotations

# The conformance suite's alpha, beside the default that scripts/conformance.sh names.
CONFORMANCE_ALPHA = "0.2.0-alpha.12"
TS_CLIENT_PACKAGE, TS_CLIENT_VERSION = "@modelcontextprotocol/client", "2.4.0"
OIDC_PROVIDER_PACKAGE, OIDC_PROVIDER_VERSION = "oidc-provider", "9.13.3"
