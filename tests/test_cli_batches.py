"""``flask batches list|show|cancel`` on both engines (docs/batches.md#the-command-line): tab-separated rows
automation can read, a refusal on one line of stderr with exit status 1, cancelling as ``cli``."""

from __future__ import annotations

import json
import re

TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def make_batch(caller, n: int, description: str | None = "nightly") -> dict:
    jobs = [{"type": "email", "ref": "j0"}]
    jobs += [{"type": "pdf", "ref": f"j{i}", "depends_on": [f"j{i - 1}"]} for i in range(1, n)]
    body = {"jobs": jobs, "description": description} if description else {"jobs": jobs}
    answer = caller.post("/batches", json=body)
    assert answer.status_code == 201, answer.json
    return answer.json


def run(runner, *args):
    result = runner.invoke(args=["batches", *args])
    return result


def test_list_prints_one_row_per_batch_newest_first(runner, producer, keys, worker):
    first = make_batch(producer, 2)
    second = make_batch(keys.producer("bob"), 1, None)
    held = worker.post("/jobs/claim").json
    worker.post(f"/jobs/{held['id']}/complete", json={"lease_token": held["lease_token"]})
    result = run(runner, "list")
    assert result.exit_code == 0, result.output
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert [r[:4] for r in rows] == [
        [str(second["id"]), "running", "0/1", "bob"],
        [str(first["id"]), "running", "1/2", "alice"],
    ]
    assert re.fullmatch(TIME, rows[0][4]) and rows[0][5] == "-" and rows[0][6] == "-"
    assert rows[1][6] == "nightly"
    only_bob = run(runner, "list", "--owner", "bob").stdout.splitlines()
    assert [line.split("\t")[0] for line in only_bob] == [str(second["id"])]
    assert run(runner, "list", "--status", "succeeded").stdout == ""
    assert len(run(runner, "list", "--limit", "1").stdout.splitlines()) == 1


def test_list_refuses_an_unknown_status(runner):
    result = run(runner, "list", "--status", "done")
    assert result.exit_code == 2 and "'done' is not one of" in result.output


def test_show_prints_the_batch_its_counts_and_its_jobs(runner, producer):
    batch = make_batch(producer, 3)
    a, b, c = batch["jobs"]
    result = run(runner, "show", str(batch["id"]))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{batch['id']}\trunning\t0/3\talice\t")
    assert lines[1] == "counts\twaiting 2\tpending 1\trunning 0\tcompleted 0\tfailed 0\tcancelled 0"
    assert lines[2:] == [
        f"job\t{a}\temail\tpending\t-",
        f"job\t{b}\tpdf\twaiting\t{a}",
        f"job\t{c}\tpdf\twaiting\t{b}",
    ]
    document = json.loads(run(runner, "show", str(batch["id"]), "--json").stdout)
    assert document["total"] == 3 and document["counts"]["waiting"] == 2
    assert [j["depends_on"] for j in document["jobs"]] == [[], [a], [b]]


def test_show_and_cancel_of_an_unknown_batch_fail_on_one_line(runner):
    for command in ("show", "cancel"):
        result = run(runner, command, "4242")
        assert result.exit_code == 1 and result.stderr == "Error: no batch 4242\n", command


def test_cancel_cancels_the_waiting_and_pending_jobs(runner, producer, queue):
    batch = make_batch(producer, 3)
    other = producer.post("/jobs", json={"type": "email"}).json
    result = run(runner, "cancel", str(batch["id"]))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"cancelled batch {batch['id']}"
    assert lines[1].startswith(f"{batch['id']}\tfinished_with_failures\t3/3\talice\t")
    assert {queue.get(i).status for i in batch["jobs"]} == {"cancelled"}
    assert queue.get(other["id"]).status == "pending"
    history = queue.events(batch["jobs"][0])
    assert history[-1].event == "cancelled" and history[-1].actor == "cli"
