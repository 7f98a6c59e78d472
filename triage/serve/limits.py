"""The connection limits' defaults of ``triage serve`` (here, not in :mod:`triage.serve.server`, so that the
command line can show them without importing uvicorn)."""

DEFAULT_MAX_CONNECTIONS = 256  # connections held open at most (fewer when the descriptor limit is low)
DEFAULT_HEADER_TIMEOUT = 10.0  # seconds for a request's headers, from the connection (or the last answer)
DEFAULT_BODY_TIMEOUT = 30.0  # seconds for a request's body, from its headers
