"""Sphinx settings of queuelog's documentation: MyST markdown, the furo theme, warnings as errors.

Build: ``.venv/bin/sphinx-build -W --keep-going -b html docs docs/_build/html`` (``.ci/run`` does).
The JSON API reference is written at build time from the app's ``/openapi.json`` (``_ext/openapi_reference.py``).
"""

import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))  # the checkout's queuelog, also when it is not installed

project = "queuelog"
author = "queuelog's authors"
copyright = "2026, queuelog's authors"

extensions = ["myst_parser", "openapi_reference"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "images/README.md"]
myst_heading_anchors = 3  # README-style links (page.md#a-heading) to headings down to ###
myst_enable_extensions = ["deflist"]

html_theme = "furo"
html_title = "queuelog"
