"""The ``alignlings`` command line: a thin layer over the library and the practice engine.

One module per command (or command group); each keeps heavy imports (torch, transformers)
inside the command body so that ``alignlings --help`` and ``alignlings list`` start fast.
"""
