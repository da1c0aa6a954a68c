"""A do-nothing Flask app: what gunicorn and Flask cost on their own, the ceiling for the http scenario."""

from flask import Flask, jsonify, request

app = Flask(__name__)


@app.post("/noop")
def noop():
    """Parse the JSON body and answer a small JSON object, as the real endpoints do, and nothing else."""
    request.get_json(silent=True)
    return jsonify(ok=True)


@app.get("/healthz")
def healthz():
    return jsonify(status="ok")
