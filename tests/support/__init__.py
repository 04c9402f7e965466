"""What the tests share: small models, reference implementations and recorded numbers.

``tests/`` is on ``sys.path`` (``pythonpath`` in ``setup.cfg``), so tests import ``support.golden`` and the rest."""
