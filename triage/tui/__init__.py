"""The terminal app: paste a ticket, press F5, watch each decision fill in.

Layout of this package (a ticket flows top to bottom):

* ``launch.py``: ``run_app(args)``, the CLI's entry; routes logging to a file.
* ``app.py``: the thin :class:`TriageApp` and :func:`make_app`, shared by the CLI and the tests.
* ``options.py``: :class:`UIOptions`, everything the app is started with.
* ``engine_host.py``: owns the one engine (llama.cpp is not thread-safe).
* ``messages.py``: past-tense messages the workers post.
* ``screens/``: main (ticket, decisions), history, export, help, prompt.
* ``widgets/``: ticket input, model status, notice, decisions panel, criterion card, summary line.

The core (``triage.*`` outside this package) never imports Textual.
"""
