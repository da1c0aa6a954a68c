"""What the clients share with each other: a job as the API hands it out (``job``) and the HTTP transport
(``transport``). Standard library only: a bare ``pip install .`` (no Flask, no SQLAlchemy) imports it."""
