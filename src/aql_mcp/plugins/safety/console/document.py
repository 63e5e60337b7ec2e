"""The console's HTML documents and the headers every console response carries (docs/console.md).

Everything is inline (no external assets, no CDN): one style sheet and at most one script, both
allowed by a per-response nonce in the Content-Security-Policy, which allows nothing else but
same-origin connections (the event stream) and same-origin form posts. The page cannot be framed
(X-Frame-Options DENY, frame-ancestors 'none') and is never cached (it shows verification codes).
The referrer policy is `same-origin`, not `no-referrer`: under `no-referrer` Chromium sends
`Origin: null` with a form post, which the Origin allow-list rightly refuses.
Every value put into the HTML goes through `html.escape`.
"""

from __future__ import annotations

import secrets
from html import escape

from starlette.responses import HTMLResponse

STYLE = """
:root{color-scheme:light;--ink:#1b1f24;--muted:#57606a;--line:#d0d7de;--accent:#0a58ca;--bad:#b42318;--ok:#1a7f37}
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--ink);
margin:0;background:#f6f8fa}
header,main{max-width:1320px;margin:0 auto;padding:0 16px}
header{display:flex;flex-wrap:wrap;gap:12px;align-items:center;justify-content:space-between;padding-top:12px}
h1{font-size:1.35rem;margin:.2rem 0}h2{font-size:1.1rem;margin:1.2rem 0 .4rem}
section{background:#fff;border:1px solid var(--line);border-radius:6px;padding:4px 12px 10px;margin:10px 0}
table{border-collapse:collapse;width:100%}caption{text-align:left;color:var(--muted);padding:2px 0}
th,td{border-bottom:1px solid var(--line);padding:5px 6px;text-align:left;vertical-align:top}
th{font-weight:600;background:#f3f4f6}
.wrap{display:inline-block;max-width:280px;overflow-wrap:anywhere}
code.code{font:600 1rem/1.3 ui-monospace,"DejaVu Sans Mono",monospace;background:#fff8c5;padding:2px 4px;
overflow-wrap:anywhere;user-select:all}
form{display:inline-flex;flex-wrap:wrap;gap:4px 6px;align-items:center;margin:2px 0}
form label{flex-basis:100%;font-size:.9rem;color:var(--muted)}
input[type=text]{font:inherit;padding:4px 6px;border:1px solid var(--muted);border-radius:4px;width:15rem}
button{font:inherit;padding:4px 10px;border-radius:4px;border:1px solid var(--accent);background:var(--accent);
color:#fff;cursor:pointer}
button.secondary{background:#fff;color:var(--accent)}button.danger{background:#fff;color:var(--bad);
border-color:var(--bad)}
:focus-visible{outline:3px solid #f59e0b;outline-offset:2px}
.muted{color:var(--muted)}.notice{padding:8px 12px;border-radius:6px;margin:10px 0;border:1px solid var(--ok);
background:#dafbe1}.error{border-color:var(--bad);background:#ffebe9}
.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
"""


def new_nonce() -> str:
    return secrets.token_urlsafe(16)


def security_headers(nonce: str) -> dict[str, str]:
    policy = (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
    return {
        "content-security-policy": policy,
        "x-frame-options": "DENY",
        "x-content-type-options": "nosniff",
        "referrer-policy": "same-origin",
        "cache-control": "no-store",
    }


def document(title: str, body: str, *, nonce: str, script: str = "") -> str:
    """A whole page: `body` is HTML already escaped by its builder; `title` is escaped here."""
    tail = f"<script nonce={nonce}>{script}</script>" if script else ""
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8>"
        f'<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style nonce={nonce}>{STYLE}</style></head>"
        f"<body>{body}{tail}</body></html>"
    )


def page_response(
    title: str, body: str, *, status: int = 200, script: str = "", headers: dict[str, str] | None = None
) -> HTMLResponse:
    nonce = new_nonce()
    html = document(title, body, nonce=nonce, script=script)
    return HTMLResponse(html, status_code=status, headers={**security_headers(nonce), **(headers or {})})
