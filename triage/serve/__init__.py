"""``triage serve``: one resident engine behind a local HTTP API and a web page.

* :mod:`triage.serve.requests`: what a request may hold, checked (422 naming the field, 413 for size);
* :mod:`triage.serve.worker`: the one engine thread and its bounded first-come-first-served queue;
* :mod:`triage.serve.app`: the Starlette app (routes, token, CORS, the event stream, the page);
* :mod:`triage.serve.openapi`: the OpenAPI document of the routes.

The ASGI stack (Starlette, uvicorn) is the ``serve`` extra and is imported only here.
This package is core: it must not import Textual, ``triage.commands`` or ``triage.cli``.
"""
