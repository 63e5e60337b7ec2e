"""`python -m aql_mcp`: the `aql-mcp` command without the script on PATH (the banner prints this form)."""

import sys

from aql_mcp.main import main

sys.exit(main())
