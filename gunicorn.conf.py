"""gunicorn settings for queuelog in a checkout: `gunicorn -c gunicorn.conf.py 'queuelog:create_app()'`.
They live in the package (queuelog/gunicorn_conf.py), where an installed wheel finds them as
`gunicorn -c python:queuelog.gunicorn_conf`."""

from queuelog.gunicorn_conf import *  # noqa: F403
