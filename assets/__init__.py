"""Data files shipped with triage: the model catalog, the default pack, the tokenizer, icons.

This folder is installed as the package ``triage.assets``; read it through
:mod:`triage.assets_path`, never by a path relative to the source tree.
"""
