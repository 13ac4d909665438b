"""Framework callbacks: gputop's rows from a training framework's own hooks.

- ``gputop.integrations.lightning.GputopCallback``: Lightning 2.x (``lightning``
  or ``pytorch_lightning``).
- ``gputop.integrations.transformers.GputopCallback``: the Hugging Face
  ``Trainer``.

Importing this package imports no framework; each callback imports its
framework when it is first used.
"""
